"""Element-wise `T.atomic_add` in a T.Parallel nest over a fragment (the dQ update of attention
backward kernels) adds each thread's consecutive, aligned elements with one vector atomic
(`tl::atomic_addx2/x4`) where the architecture has one for the type (float32: sm_90;
float16: sm_70; bfloat16: sm_80); a vector that may leave the tensor falls back to one
atomic per element; ordered atomics and other architectures stay scalar. The results are the
same: checked on the GPU against torch."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.runtime import compile_cuda

from transform_helpers import SM80, SM90, requires_compiler


def gemm_atomic(M, N, K, dtype="float32", bm=64, bn=64, order=None):
    """C += A @ B^T, one 64 x 64 tile per block, accumulated element by element with
    T.atomic_add from the gemm's fragment."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a = T.alloc_shared((bm, K), "float16")
            b = T.alloc_shared((bn, K), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.copy(A[by * bm, 0], a)
            T.copy(B[bx * bn, 0], b)
            T.gemm(a, b, acc, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(bm, bn):
                if order is None:
                    T.atomic_add(C[by * bm + i, bx * bn + j], acc[i, j])
                else:
                    T.atomic_add(C[by * bm + i, bx * bn + j], acc[i, j], memory_order=order)
    return main


def _atomics(func, target):
    # (on sm_90a a fragment's element-wise adds into a tile are otherwise staged for one TMA
    # reduction: transform/stage_fragment_atomics.py, tests/transform/
    # test_stage_fragment_atomics.py; these tests are about the element-wise lowering)
    src = tilelang.lower(func, target=target, pass_configs={"tl.disable_tma_lower": True})
    return re.findall(r"tl::(atomic_add\w*)\(", src)


def test_float32_pairs_on_sm90():
    ops = _atomics(gemm_atomic(128, 128, 64), SM90)
    assert ops and set(ops) == {"atomic_addx2"}


def test_float32_stays_scalar_before_sm90():
    assert set(_atomics(gemm_atomic(128, 128, 64), SM80)) == {"atomic_add"}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_pairs_on_sm80(dtype):
    assert set(_atomics(gemm_atomic(128, 128, 64, dtype), SM80)) == {"atomic_addx2"}


def test_ragged_tensor_falls_back_per_element():
    # 100 columns: a pair is guarded as a whole, with one atomic per element otherwise
    ops = _atomics(gemm_atomic(100, 100, 64), SM90)
    assert set(ops) == {"atomic_addx2", "atomic_add"}


def test_ordered_atomics_stay_scalar():
    assert set(_atomics(gemm_atomic(128, 128, 64, order="release"), SM90)) == {"atomic_add"}


@requires_compiler
@pytest.mark.parametrize("dtype,target,arch", [("float32", SM90, "sm_90a"),
                                               ("bfloat16", SM80, "sm_80")])
def test_builds(dtype, target, arch):
    compile_cuda(tilelang.lower(gemm_atomic(100, 72, 64, dtype), target=target), arch,
                 name=f"vector_atomics_{dtype}")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("M,N,dtype", [(128, 128, "float32"), (100, 72, "float32"),
                                       (130, 96, "float16"), (64, 200, "bfloat16")])
def test_on_the_gpu(M, N, dtype):
    K = 64
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)
    c = torch.randn(M, N, device="cuda").to(getattr(torch, dtype))
    want = c.double() + a.double() @ b.double().T
    k = tilelang.compile(gemm_atomic(M, N, K, dtype), target="cuda")
    k(a, b, c)
    tol = 1e-3 if dtype == "float32" else 3e-2
    torch.testing.assert_close(c.double(), want, rtol=tol, atol=tol * 8)


def tile_atomic(M, N, bm=64, bn=64):
    """C += A tile by tile: a shared tile added into global memory with the tile form of
    T.atomic_add (the dK / dV epilogue of attention backward kernels)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            s = T.alloc_shared((bm, bn), "float32")
            T.copy(A[by * bm, bx * bn], s)
            T.atomic_add(C[by * bm, bx * bn], s)
    return main


def test_tile_atomic_from_shared_adds_four_at_a_time():
    assert set(_atomics(tile_atomic(128, 128), SM90)) == {"atomic_addx4"}


def test_tile_atomic_interpreter():
    a, c = torch.randn(100, 72), torch.randn(100, 72)
    want = c + a
    tilelang.compile(tile_atomic(100, 72), target="cpu")(a, c)
    torch.testing.assert_close(c, want)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("M,N", [(128, 128), (100, 72)])
def test_tile_atomic_on_the_gpu(M, N):
    a, c = torch.randn(M, N, device="cuda"), torch.randn(M, N, device="cuda")
    want = c + a
    tilelang.compile(tile_atomic(M, N), target="cuda")(a, c)
    torch.testing.assert_close(c, want)


def ragged_rows_atomic(M, N, rows, bm=64, bn=64):
    """C[:rows] += A[:rows] @ B^T with the row bound known only at run time (`rows`, a
    varlen sequence's end): each pair of lanes shares its row, so the guard stays around the
    2-wide atomic."""

    @T.prim_func
    def main(A: T.Tensor((M, 64), "float16"), B: T.Tensor((N, 64), "float16"),
             C: T.Tensor((M, N), "float32"), R: T.Tensor((1,), "int32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a = T.alloc_shared((bm, 64), "float16")
            b = T.alloc_shared((bn, 64), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.copy(A[by * bm, 0], a)
            T.copy(B[bx * bn, 0], b)
            T.gemm(a, b, acc, transpose_B=True, clear_accum=True)
            for i, j in T.Parallel(bm, bn):
                if by * bm + i < R[0]:
                    T.atomic_add(C[by * bm + i, bx * bn + j], acc[i, j])
    return main


def test_lane_invariant_guard_keeps_pairs():
    src = tilelang.lower(ragged_rows_atomic(128, 128, 100), target=SM90)
    assert set(re.findall(r"tl::(atomic_add\w*)\(", src)) == {"atomic_addx2"}
    # the guard is the group's: it reads no lane index, outside the lane loop
    guard = re.search(r"if \((.*R\[0\])\)", src).group(1)
    assert "vi" not in guard, guard


@requires_compiler
def test_guarded_pairs_build():
    compile_cuda(tilelang.lower(ragged_rows_atomic(128, 128, 100), target=SM90), "sm_90a",
                 name="vector_atomics_guarded")


def test_ragged_rows_interpreter():
    a, b = torch.randn(128, 64).half(), torch.randn(128, 64).half()
    c = torch.randn(128, 128)
    want = c.clone()
    want[:100] += a[:100].float() @ b.float().T
    tilelang.compile(ragged_rows_atomic(128, 128, 100), target="cpu")(
        a, b, c, torch.tensor([100], dtype=torch.int32))
    torch.testing.assert_close(c, want, rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("rows", [100, 128, 1])
def test_ragged_rows_on_the_gpu(rows):
    a = torch.randn(128, 64, device="cuda").half()
    b = torch.randn(128, 64, device="cuda").half()
    c = torch.randn(128, 128, device="cuda")
    want = c.clone()
    want[:rows] += a[:rows].float() @ b.float().T
    tilelang.compile(ragged_rows_atomic(128, 128, rows), target="cuda")(
        a, b, c, torch.tensor([rows], dtype=torch.int32, device="cuda"))
    torch.testing.assert_close(c, want, rtol=1e-3, atol=1e-2)


def user_x4_from_shared(rows, cols):
    """The sparse MLA backward's dKV update: a shared staging tile added to global memory
    with one user-written T.atomic_addx4 per iteration of a T.Parallel nest."""
    @T.prim_func
    def main(S: T.Tensor((rows, cols), "float32"), D: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((rows, cols), "float32")
            T.copy(S, s)
            for i, j in T.Parallel(rows, cols // 4):
                T.atomic_addx4(D[i, j * 4], s[i, j * 4])
    return main


def test_user_vector_atomics_take_one_iteration_per_thread():
    """Each iteration already moves 16 bytes: consecutive threads take consecutive iterations
    (contiguous shared reads, coalesced atomics), not four iterations each 64 bytes apart."""
    src = tilelang.compile(user_x4_from_shared(16, 512), target=SM90).get_kernel_source()
    (call,) = set(re.findall(r"tl::atomic_addx4\(.*", src))
    assert "tx * 4]" in call and "tx * 16" not in call, call


def test_user_vector_atomics_interpreter():
    kernel = tilelang.compile(user_x4_from_shared(16, 512), target="cpu")
    g = torch.Generator().manual_seed(0)
    S, D = torch.randn(16, 512, generator=g), torch.randn(16, 512, generator=g)
    want = D + S
    kernel(S, D)
    torch.testing.assert_close(D, want)
