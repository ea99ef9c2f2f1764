"""T.thread_binding inside T.Kernel: `tx = T.thread_binding(0, n, thread="threadIdx.x")` and
`for tx in T.thread_binding(n, "threadIdx.x")` name the launch index along that axis (plus the
start), on the interpreter and in the generated CUDA alike; a binding that does not cover the
launched extent is a located error."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.runtime import toolkit

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")


def scaled_plus_lane(M, N, bx_threads, by_threads, start=0):
    """B[r, c] = 2 A[r, c] + (c mod bx_threads) + start, rows spread over threadIdx.y."""

    @T.prim_func
    def kernel(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bx_threads), threads=(bx_threads, by_threads)) as bx:
            lane = T.thread_binding(start, start + bx_threads, thread="threadIdx.x")
            row_in_step = T.thread_binding(by_threads, "threadIdx.y")
            for step in T.serial(T.ceildiv(M, by_threads)):
                r = step * by_threads + row_in_step
                c = bx * bx_threads + lane - start
                if r < M and c < N:
                    B[r, c] = A[r, c] * 2 + lane
    return kernel


def block_sums(N, threads):
    """out[b] = the sum of one block's slice, the block and thread from `for` bindings."""

    @T.prim_func
    def kernel(A: T.Tensor((N,), "float32"), out: T.Tensor((T.ceildiv(N, threads),), "float32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads):
            for b in T.thread_binding(T.ceildiv(N, threads), thread="blockIdx.x"):
                for t in T.thread_binding(0, threads, "threadIdx.x"):
                    partial = T.alloc_shared((threads,), "float32")
                    partial[t] = T.if_then_else(b * threads + t < N, A[b * threads + t], 0.0)
                    total = T.alloc_fragment((1,), "float32")
                    T.reduce_sum(partial, total, dim=0)
                    if t == 0:
                        out[b] = total[0]
    return kernel


def expected_scaled(a, bx_threads, start):
    return a * 2 + (torch.arange(a.shape[1]) % bx_threads).float() + start


@pytest.mark.parametrize("M,N,bx,by,start", [(37, 70, 32, 4, 0), (5, 130, 64, 2, 3)])
def test_assigned_bindings_on_the_interpreter(M, N, bx, by, start):
    a = torch.rand(M, N)
    b = torch.full_like(a, float("nan"))
    tilelang.compile(scaled_plus_lane(M, N, bx, by, start), target="cpu")(a, b)
    torch.testing.assert_close(b, expected_scaled(a, bx, start))


def test_for_bindings_on_the_interpreter():
    a = torch.rand(300)
    out = torch.full((3,), float("nan"))
    tilelang.compile(block_sums(300, 128), target="cpu")(a, out)
    torch.testing.assert_close(out, torch.stack([a[:128].sum(), a[128:256].sum(), a[256:].sum()]))


def test_bindings_are_the_launch_indices_in_cuda():
    src = tilelang.compile(scaled_plus_lane(37, 70, 32, 4, 3),
                           target="cuda -arch=sm_90a").get_kernel_source()
    assert "threadIdx.x" in src and "threadIdx.y" in src
    assert "for (int lane" not in src and "for (int row_in_step" not in src
    src = tilelang.compile(block_sums(300, 128), target="cuda -arch=sm_90a").get_kernel_source()
    assert "for (int b" not in src and "for (int t" not in src


@pytest.mark.parametrize("build", [
    lambda: T.thread_binding(0, 64, thread="threadIdx.x"),     # launched 128
    lambda: T.thread_binding(0, 2, thread="threadIdx.y"),      # launched 1
    lambda: T.thread_binding(0, 128, thread="warp.x"),         # not a launch axis
])
def test_a_binding_that_does_not_match_the_launch_is_a_located_error(build):
    with pytest.raises(ValueError, match="thread_binding") as info:
        @T.prim_func
        def kernel(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                tx = build()
                A[tx] = 1.0
    assert "test_thread_binding.py" in str(info.value)


def tvm_style_launch(M=19, N=5):
    """The launch written as TVM-style binding loops outside any T.Kernel (a 2-D grid of
    one-dimensional blocks); rows past M are guarded."""
    @T.prim_func
    def kernel(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        for by in T.thread_binding(N, thread="blockIdx.y"):
            for bx in T.thread_binding(T.ceildiv(M, 8), thread="blockIdx.x"):
                for tx in T.thread_binding(8, thread="threadIdx.x"):
                    if bx * 8 + tx < M:
                        B[bx * 8 + tx, by] = A[bx * 8 + tx, by] * 3.0 + tx
    return kernel


def expected_tvm_style(a):
    rows = torch.arange(a.shape[0]).remainder(8).to(a.dtype)
    return a * 3.0 + rows[:, None]


def test_binding_loops_outside_a_kernel_are_the_launch():
    a = torch.randn(19, 5)
    b = torch.full_like(a, float("nan"))
    tilelang.compile(tvm_style_launch(), target="cpu")(a, b)
    torch.testing.assert_close(b, expected_tvm_style(a))


@requires_compiler
def test_binding_loops_outside_a_kernel_build_for_sm90():
    src = tilelang.compile(tvm_style_launch(), target="cuda -arch=sm_90a").get_kernel_source()
    # 8 threads a block (a grid of 3 x 5 blocks: one block an SM, `, 1`)
    assert "__launch_bounds__(8, 1)" in src and "blockIdx.y" in src


def test_binding_assignment_outside_a_kernel_is_an_error():
    with pytest.raises(NotImplementedError, match="outside `with T.Kernel") as info:
        @T.prim_func
        def kernel(A: T.Tensor((128,), "float32")):
            tx = T.thread_binding(0, 128, thread="threadIdx.x")
            A[tx] = 1.0
    assert "test_thread_binding.py" in str(info.value)


def test_a_second_binding_of_a_launched_axis_must_match_it():
    with pytest.raises(ValueError, match="cover the launched extent") as info:
        @T.prim_func
        def kernel(A: T.Tensor((128,), "float32")):
            for tx in T.thread_binding(128, thread="threadIdx.x"):
                for tx2 in T.thread_binding(64, thread="threadIdx.x"):
                    A[tx + tx2] = 1.0
    assert "test_thread_binding.py" in str(info.value)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_binding_loops_outside_a_kernel_on_the_gpu():
    a = torch.randn(37, 3, device="cuda")
    b = torch.full_like(a, float("nan"))
    tilelang.compile(tvm_style_launch(37, 3), target="cuda")(a, b)
    torch.testing.assert_close(b.cpu(), expected_tvm_style(a.cpu()))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("M,N,bx,by,start", [(37, 70, 32, 4, 0), (5, 130, 64, 2, 3)])
def test_bindings_on_the_gpu(M, N, bx, by, start):
    a = torch.rand(M, N, device="cuda")
    b = torch.full_like(a, float("nan"))
    tilelang.compile(scaled_plus_lane(M, N, bx, by, start), target="cuda")(a, b)
    torch.testing.assert_close(b.cpu(), expected_scaled(a.cpu(), bx, start))
    a = torch.rand(300, device="cuda")
    out = torch.full((3,), float("nan"), device="cuda")
    tilelang.compile(block_sums(300, 128), target="cuda")(a, out)
    a = a.cpu()
    torch.testing.assert_close(out.cpu(),
                               torch.stack([a[:128].sum(), a[128:256].sum(), a[256:].sum()]))
