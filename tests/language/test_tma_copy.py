"""T.tma_copy with user-managed mbarriers (the reference's warp-specialisation examples): the
interpreter's results against torch, the sm_90a lowering (one issuing thread, expect_tx
without arrival, no block barrier inside roles) built with the CUDA compiler, located
errors for what TMA cannot do."""

import re
import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError
from tilelang.layout import make_swizzled_layout
from tilelang.runtime import compile_cuda, toolkit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gpu import role_kernels as R  # noqa: E402

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")

SM90 = "cuda -arch=sm_90a"


def _body(src):
    return src[src.index("threadIdx.x"):]


def _interp(func, *args):
    tilelang.compile(func, target="cpu")(*args)


@pytest.mark.parametrize("producer", [0, 1])
def test_ws_gemm_on_the_interpreter(producer):
    M, N, K = 200, 136, 72  # ragged: TMA boxes past the tensors read zeros
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    c = torch.full((M, N), float("nan")).half()
    _interp(R.ws_gemm(M, N, K, producer=producer), a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=2e-2)


def test_ring_of_stages_on_the_interpreter():
    M, N, K = 256, 128, 320
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    c = torch.full((M, N), float("nan")).half()
    _interp(R.ws_gemm_stages(M, N, K), a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=2e-2)


def test_one_issuing_thread_per_copy_and_no_block_barrier_inside_roles():
    body = _body(tilelang.lower(R.ws_gemm(256, 256, 128, producer=1), target=SM90))
    # the producer is warpgroup 1: its first thread issues both loads, expect_tx without arrival
    issues = re.findall(r"if \(\(?tx == 128\)?\) \{\s*tl::mbarrier_expect_tx\(\(&data_ready\[0\]\), "
                        r"(\d+)\);\s*tl::tma_load", body)
    assert issues == ["16384", "16384"], body
    assert "mbarrier_arrive_expect_tx" not in body
    roles = body[body.index("for (int ko"):]
    assert "__syncthreads" not in roles
    # the gemm runs on the consumer warpgroup alone: one warpgroup's wgmma template
    assert re.search(r"wgmma_gemm_ss<128, 128, 64, 1, 1,", body)


def test_consumer_in_warpgroup_1_runs_on_relabelled_threads():
    src = tilelang.lower(R.ws_gemm(256, 256, 128, producer=0), target=SM90)
    assert "const int tid = threadIdx.x;" in src
    # user thread u runs on thread (u - 128) mod 256: warpgroup 0's leader is thread 128
    assert "((tid + 128) & 255) == 0" in src


@requires_compiler
@pytest.mark.parametrize("make", [lambda: R.ws_gemm(200, 136, 72, producer=0),
                                  lambda: R.ws_gemm(256, 256, 128, producer=1),
                                  lambda: R.ws_gemm_stages(256, 256, 320),
                                  lambda: R.branch_roles(300, 64),
                                  lambda: R.per_warp_rows(37, 1024),
                                  lambda: R.tma_store(100, 132),
                                  lambda: R.sliced_tma_gemm(200, 64, 256)])
def test_builds_for_sm90a(make):
    compile_cuda(tilelang.lower(make(), target=SM90), "sm_90a")


def test_thread_range_branches_on_the_interpreter():
    x = torch.randn(300, 64)
    out = torch.full((300,), float("nan"))
    _interp(R.branch_roles(300, 64), x, out)
    torch.testing.assert_close(out, 2 * x.sum(1) + 1, rtol=1e-5, atol=1e-4)


def test_per_warp_leaders():
    a = torch.randn(37, 1024)
    out = torch.full((37,), float("nan"))
    _interp(R.per_warp_rows(37, 1024), a, out)
    torch.testing.assert_close(out, a[:, 0] + a[:, -1])
    body = _body(tilelang.lower(R.per_warp_rows(37, 1024), target=SM90))
    # one leader per warp; a row of 1024 floats is 4 boxes of 256
    assert re.search(r"if \(\(tx & 31\) == 0\)", body)
    assert len(re.findall(r"tl::tma_load\(", body)) == 4


def test_tma_store():
    x = torch.randn(100, 132)
    y = torch.full((100, 132), float("nan"))
    _interp(R.tma_store(100, 132), x, y)
    torch.testing.assert_close(y, 3 * x)
    body = _body(tilelang.lower(R.tma_store(100, 132), target=SM90))
    # every writer fences its stores for the async proxy, a barrier, then one thread stores
    store = body.index("tl::tma_store(")
    assert body.rindex("tl::fence_proxy_async", 0, store) < body.rindex("__syncthreads", 0, store)
    assert "tl::tma_store_arrive()" in body and "tl::tma_store_wait<0>()" in body


def _load_kernel(**kw):
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 64), "float16")
            bar = T.alloc_barrier(128)
            T.tma_copy(A, S, **{k: (bar if v == "bar" else v) for k, v in kw.items()})
            T.barrier_arrive(bar)
            T.barrier_wait(bar, 0)
            T.copy(S, B)
    return f


@pytest.mark.parametrize("kw,match", [
    ({}, "needs barrier="),
    ({"barrier": "bar", "cluster_mask": 3}, "non-zero int of 1 bits"),  # no cluster here
    ({"barrier": "bar", "leader_scope_threads": 48}, "multiple of 32"),
    ({"barrier": "bar", "eviction_policy": "evict_sometimes"}, "eviction_policy"),
])
def test_bad_arguments_are_located(kw, match):
    with pytest.raises(KernelError, match=match) as e:
        _load_kernel(**kw)
    assert "test_tma_copy.py" in str(e.value)


def test_not_global_shared_is_rejected():
    with pytest.raises(KernelError, match="global -> shared or shared -> global"):
        @T.prim_func
        def f(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128):
                S = T.alloc_shared((64,), "float32")
                F = T.alloc_fragment((64,), "float32")
                T.tma_copy(S, F)


def test_needs_sm90():
    with pytest.raises(KernelError, match="sm_90a") as e:
        tilelang.lower(_load_kernel(barrier="bar"), target="cuda -arch=sm_80")
    assert "test_tma_copy.py" in str(e.value)


def test_block_level_copy_on_the_interpreter():
    a = torch.randn(64, 64).half()
    b = torch.full((64, 64), float("nan")).half()
    _interp(_load_kernel(barrier="bar"), a, b)
    torch.testing.assert_close(b, a)


def test_a_wait_nothing_can_complete_is_an_error():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            bar = T.alloc_barrier(128)
            T.barrier_wait(bar, 0)  # nobody arrives

    with pytest.raises(RuntimeError, match="would wait forever") as e:
        _interp(f, torch.zeros(64))
    assert "test_tma_copy.py" in str(e.value)


def test_roles_waiting_on_each_other_is_an_error():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=256):
            a = T.alloc_barrier(128)
            b = T.alloc_barrier(128)
            with T.ws(0):
                T.barrier_wait(a, 0)
                T.barrier_arrive(b)
            with T.ws(1):
                T.barrier_wait(b, 0)
                T.barrier_arrive(a)

    with pytest.raises(RuntimeError, match="wait on each other forever"):
        _interp(f, torch.zeros(64))


def test_too_many_arrivals_is_an_error():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=256):
            bar = T.alloc_barrier(128)
            T.barrier_arrive(bar)  # 256 threads on a barrier expecting 128

    with pytest.raises(RuntimeError, match="256 arrivals"):
        _interp(f, torch.zeros(64))


def test_block_level_loads_wait_for_earlier_reads():
    # a TMA load at block level must not overwrite the tile the previous iteration's gemm
    # reads in other threads: a barrier comes before the issuing thread's load
    body = _body(tilelang.lower(R.block_tma_gemm(256, 256, 128), target=SM90))
    loop = body[body.index("for (int k"):]
    first_load = loop.index("tl::tma_load(")
    assert "__syncthreads" in loop[:first_load]
    a, b = torch.randn(256, 128).half(), torch.randn(128, 256).half()
    c = torch.full((256, 256), float("nan")).half()
    _interp(R.block_tma_gemm(256, 256, 128), a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=2e-2)


def test_rows_tma_cannot_address_are_a_compile_error_at_the_line():
    @T.prim_func
    def f(A: T.Tensor((64, 60), "float16"), B: T.Tensor((64, 60), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 60), "float16")
            bar = T.alloc_barrier(128)
            T.tma_copy(A, S, barrier=bar)
            T.barrier_arrive(bar)
            T.barrier_wait(bar, 0)
            T.copy(S, B)

    with pytest.raises(KernelError, match="multiple of 16 bytes apart; they are 120 bytes") as e:
        tilelang.compile(f, target=SM90)
    assert "test_tma_copy.py" in str(e.value)


def test_slices_at_run_time_column_offsets():
    M, N, K = 100, 64, 256
    a, b = torch.randn(M, K).half(), torch.randn(N, K).half()
    c = torch.full((M, N), float("nan"))
    _interp(R.sliced_tma_gemm(M, N, K), a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float().T, rtol=1e-3, atol=2e-2)
    body = _body(tilelang.lower(R.sliced_tma_gemm(M, N, K), target=SM90))
    # every slice is one TMA box per operand and one wgmma per slice: no mma.sync fallback
    assert len(re.findall(r"tl::tma_load", body)) == 2, body
    assert "wgmma_gemm_ss" in body and "tl::gemm_ss" not in body


def test_slice_off_the_swizzle_row_is_a_located_error():
    @T.prim_func
    def main(A: T.Tensor((64, 128), "float16"), C: T.Tensor((64, 128), "float16")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 128), "float16")
            T.annotate_layout({A_s: make_swizzled_layout(A_s)})
            ready = T.alloc_barrier(arrive_count=128)
            for j in T.unroll(4):
                T.tma_copy(A[0:64, j * 32:(j + 1) * 32], A_s[:, j * 32:(j + 1) * 32],
                           barrier=ready)
            T.barrier_arrive(ready)
            T.barrier_wait(ready, 0)
            T.copy(A_s, C)

    with pytest.raises(KernelError, match="whole 64-element swizzle rows"):
        tilelang.lower(main, target=SM90)


# ---- cluster_mask: a load multicast to the blocks of a cluster ----------------------------------


def _multicast(mask, cluster=4, iters=3, tile=32):
    """Every block of each cluster loads tile k of its own slice of A with
    T.tma_copy(..., cluster_mask=mask) into a two-slot ring and writes what it received to
    B[block, k]: blocks in the mask receive the tile their lowest-ranked block loaded, the
    others their own."""
    blocks = 2 * cluster

    @T.prim_func
    def main(A: T.Tensor((blocks, iters, tile, tile), "float32"),
             B: T.Tensor((blocks, iters, tile, tile), "float32")):
        with T.ClusterKernel(blocks, threads=128, cluster_dims=(cluster, 1, 1)) as bx:
            S = T.alloc_shared((2, tile, tile), "float32")
            bars = T.alloc_barrier([128, 128])
            for k in T.serial(iters):
                T.tma_copy(A[bx, k, :, :], S[k % 2, :, :], barrier=bars[k % 2],
                           cluster_mask=mask)
                T.barrier_arrive(bars[k % 2])
                T.mbarrier_wait_parity(bars[k % 2], (k // 2) % 2)
                T.copy(S[k % 2, :, :], B[bx, k, :, :])
                T.sync_threads()
    return main


def _multicast_expected(a, mask, cluster):
    want = a.clone()
    first = (mask & -mask).bit_length() - 1
    for block in range(a.shape[0]):
        rank, base = block % cluster, block - block % cluster
        if mask >> rank & 1:
            want[block] = a[base + first]
    return want


@pytest.mark.parametrize("mask", [0b0110, 0b1111, 0b0001])
def test_multicast_on_the_interpreter(mask):
    kernel = tilelang.compile(_multicast(mask), target="cpu")
    a = torch.randn(8, 3, 32, 32)
    b = torch.full_like(a, float("nan"))
    kernel(a, b)
    assert torch.equal(b, _multicast_expected(a, mask, 4))


@requires_compiler
def test_multicast_lowering():
    src = _body(tilelang.compile(_multicast(0b0110), target=SM90).get_kernel_source())
    # rank 1 (the mask's lowest) multicasts to ranks 1 and 2; ranks 0 and 3 load their own
    assert "if (tl::cluster_ctarank() == 1) {" in src
    assert src.count("tl::tma_load_multicast(") == 1 and "(unsigned short)6" in src
    assert src.count("tl::tma_load(") == 1
    assert src.count("tl::mbarrier_expect_tx(") == 1  # every block expects its bytes


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("mask", [0b0110, 0b1111])
def test_multicast_on_gpu(mask):
    kernel = tilelang.compile(_multicast(mask), target="cuda")
    a = torch.randn(8, 3, 32, 32, device="cuda")
    b = torch.full_like(a, float("nan"))
    kernel(a, b)
    assert torch.equal(b.cpu(), _multicast_expected(a.cpu(), mask, 4))


def test_multicast_store_is_rejected():
    with pytest.raises(KernelError, match="a store takes no cluster_mask") as e:
        @T.prim_func
        def f(A: T.Tensor((32, 32), "float32")):
            with T.ClusterKernel(2, threads=128, cluster_dims=(2, 1, 1)):
                S = T.alloc_shared((32, 32), "float32")
                T.tma_copy(S, A, cluster_mask=3)
    assert "test_tma_copy.py" in str(e.value)
