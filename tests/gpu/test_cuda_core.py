"""The CUDA backend against torch on the GPU: fresh random inputs, poisoned outputs, ragged
sizes, several dtypes. Marked `gpu`; skipped without a GPU (run through the device tool)."""

import math

import pytest
import torch

import tilelang
import tilelang.language as T  # noqa: F401

from . import kernels as K

pytestmark = pytest.mark.gpu

DEV = "cuda"


def poison(shape, dtype):
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dtype, device=DEV)
    return torch.full(shape, -12345, dtype=dtype, device=DEV)


def rel_err(out, ref):
    out64, ref64 = out.double(), ref.double()
    assert not torch.isnan(out64).any(), "NaN in output (unwritten or wrong)"
    return ((out64 - ref64).norm() / ref64.norm().clamp_min(1e-12)).item()


def compile_cuda(func, out_idx=None, wgmma=True):
    configs = {} if wgmma else {tilelang.PassConfigKey.TL_DISABLE_WGMMA: True}
    return tilelang.compile(func, out_idx=out_idx, target="cuda", pass_configs=configs)


@pytest.mark.parametrize("n,dtype", [(1000, torch.float32), (4096, torch.float16)])
def test_vector_add(n, dtype):
    k = compile_cuda(K.vector_add(n, dtype=str(dtype).split(".")[1]), out_idx=[2])
    a, b = torch.randn(n, device=DEV, dtype=dtype), torch.randn(n, device=DEV, dtype=dtype)
    c = k(a, b)
    assert rel_err(c, a.double() + b.double()) < 1e-3


@pytest.mark.parametrize("M,N,K_", [(1024, 1024, 1024), (1000, 1000, 1000), (200, 136, 72)])
def test_seed000_fused_gemm(M, N, K_):
    func = _seed000(M, N, K_)
    k = compile_cuda(func, out_idx=[2])
    a = torch.randn(M, K_, device=DEV).half()
    b = torch.randn(K_, N, device=DEV).half()
    c = k(a, b, 0.5)
    ref = torch.relu((a.double() @ b.double()) * 0.5)
    assert rel_err(c, ref) < 2e-3


def _seed000(M, N, K_, block_M=64, block_N=64, block_K=32, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def gemm_fused(A: T.Tensor((M, K_), dtype), B: T.Tensor((K_, N), dtype),
                   C: T.Tensor((M, N), dtype), scale: T.float32):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K_, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                v_acc = C_local[i, j]
                v_scaled = v_acc * scale
                v_relu = T.max(v_scaled, T.float32(0.0))
                C_local[i, j] = v_relu
            T.copy(C_local, C[by * block_M, bx * block_N])
    return gemm_fused


GEMM_DTYPES = [
    ("float16", "float32", torch.float16, 2e-3),
    ("bfloat16", "float32", torch.bfloat16, 5e-3),
    ("float32", "float32", torch.float32, 3e-3),
    ("int8", "int32", torch.int8, 0.0),
]


@pytest.mark.parametrize("dtype,acc,tdtype,tol", GEMM_DTYPES)
@pytest.mark.parametrize("trans_A,trans_B", [(False, False), (False, True), (True, False),
                                             (True, True)])
@pytest.mark.parametrize("shape", [(256, 256, 256), (200, 136, 96)])
@pytest.mark.parametrize("wgmma", [True, False])
def test_gemm(dtype, acc, tdtype, tol, trans_A, trans_B, shape, wgmma):
    M, N, K_ = shape
    block_K = 64 if dtype == "int8" else 32
    if dtype == "int8" and K_ % 16:
        pytest.skip("int8 rows must be 16-byte aligned")
    func = K.gemm(M, N, K_, 64, 64, block_K, trans_A, trans_B, dtype, acc, num_stages=2)
    k = compile_cuda(func, wgmma=wgmma)
    for _ in range(2):  # the second call takes the generated fast path
        _check_gemm(k, M, N, K_, tdtype, acc, tol, trans_A, trans_B)


def _check_gemm(k, M, N, K_, tdtype, acc, tol, trans_A, trans_B):
    if tdtype == torch.int8:
        a = torch.randint(-8, 8, (M, K_), device=DEV, dtype=tdtype)
        b = torch.randint(-8, 8, (K_, N), device=DEV, dtype=tdtype)
    else:
        a = torch.randn(M, K_, device=DEV, dtype=tdtype)
        b = torch.randn(K_, N, device=DEV, dtype=tdtype)
    A = a.t().contiguous() if trans_A else a
    B = b.t().contiguous() if trans_B else b
    c = poison((M, N), torch.int32 if acc == "int32" else torch.float32)
    k(A, B, c)
    ref = a.double() @ b.double()
    if tol == 0.0:
        assert torch.equal(c.long(), ref.long())
    else:
        assert rel_err(c, ref) < tol


@pytest.mark.parametrize("wgmma", [True, False])
@pytest.mark.parametrize("bm,bn,bk,threads", [(64, 64, 32, 128), (128, 128, 64, 256),
                                               (128, 256, 32, 256), (64, 128, 64, 256),
                                               (64, 80, 64, 256), (64, 96, 32, 256),
                                               (128, 80, 64, 256), (64, 64, 32, 256),
                                               (64, 32, 32, 256), (64, 16, 32, 256),
                                               (64, 128, 32, 512)])
def test_gemm_tiles_and_stages(wgmma, bm, bn, bk, threads):
    for stages in (0, 1, 3):
        func = K.gemm(256, 320, 192, bm, bn, bk, dtype="float16", accum_dtype="float32",
                      out_dtype="float16", num_stages=stages, threads=threads)
        k = compile_cuda(func, out_idx=[2], wgmma=wgmma)
        a = torch.randn(256, 192, device=DEV, dtype=torch.float16)
        b = torch.randn(192, 320, device=DEV, dtype=torch.float16)
        assert rel_err(k(a, b), a.double() @ b.double()) < 3e-3, stages


def test_softmax():
    M, N = 1000, 256
    k = compile_cuda(K.softmax(M, N), out_idx=[1])
    x = torch.randn(M, N, device=DEV, dtype=torch.float16)
    assert rel_err(k(x), torch.softmax(x.double(), dim=1)) < 2e-3


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("wgmma", [True, False])
@pytest.mark.parametrize("block_M,threads", [(64, 128), (128, 256)])
def test_flash_attention(causal, wgmma, block_M, threads):
    B, H, S, D = 2, 4, 256, 64
    k = compile_cuda(K.flash_fwd(B, H, S, D, is_causal=causal, block_M=block_M,
                                 num_stages=2 if causal else 1, threads=threads),
                     out_idx=[3], wgmma=wgmma)
    for _ in range(2):  # general path, then the generated fast path
        q, kk, v = (torch.randn(B, S, H, D, device=DEV, dtype=torch.float16) for _ in range(3))
        out = k(q, kk, v)
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2).float(), kk.transpose(1, 2).float(), v.transpose(1, 2).float(),
            is_causal=causal).transpose(1, 2)
        assert rel_err(out, ref) < 5e-3


def test_gemv():
    N, K_ = 1000, 1024
    k = compile_cuda(K.gemv(N, K_), out_idx=[2])
    a = torch.randn(K_, device=DEV, dtype=torch.float16)
    b = torch.randn(N, K_, device=DEV, dtype=torch.float16)
    c = k(a, b)
    assert c.shape == (N,)


@pytest.mark.parametrize("kind", ["max", "min", "sum", "abssum", "absmax"])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("clear", [True, False])
def test_reduce(kind, dim, clear):
    if kind == "abssum" and not clear:
        pytest.skip("abssum always clears")
    k = compile_cuda(K.reduce_k(64, 128, kind, dim, clear))
    a = torch.randn(64, 128, device=DEV)
    init = torch.randn(64 if dim == 1 else 128, device=DEV)
    b = init.clone()
    k(a, b)
    fn = {"max": lambda x: x.amax(dim), "min": lambda x: x.amin(dim),
          "sum": lambda x: x.sum(dim), "abssum": lambda x: x.abs().sum(dim),
          "absmax": lambda x: x.abs().amax(dim)}[kind]
    ref = fn(a.double())
    if not clear:
        comb = {"max": torch.maximum, "min": torch.minimum, "absmax": torch.maximum,
                "sum": torch.add}[kind]
        ref = comb(ref, init.double())
    assert rel_err(b, ref) < 1e-5


def test_cumsum_shared():
    k = compile_cuda(K.cumsum_k(100, 64), out_idx=[1])
    a = torch.randn(100, 64, device=DEV)
    assert rel_err(k(a), a.double().cumsum(1)) < 1e-5


def test_atomic_tile_sum():
    k = compile_cuda(K.atomic_k(100, 64))
    a = torch.randn(100, 64, device=DEV)
    b = torch.zeros(64, device=DEV)
    k(a, b)
    assert rel_err(b, a.double().sum(0)) < 1e-5


def test_dynamic_shape_and_scalar():
    k = compile_cuda(K.dynamic_scale(), out_idx=[1])
    for m in (1, 70, 256):
        a = torch.randn(m, 64, device=DEV)
        assert rel_err(k(a, 3.0), a.double() * 3 + 1) < 1e-6


def test_two_kernels_with_workspace():
    k = compile_cuda(K.two_kernels(1000), out_idx=[1])
    a = torch.randn(1000, device=DEV)
    assert rel_err(k(a), a.double() * 2 + 1) < 1e-6


def test_cuda_graph_capture():
    k = compile_cuda(K.vector_add(4096), out_idx=[2])
    a, b = torch.randn(4096, device=DEV), torch.randn(4096, device=DEV)
    k(a, b)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        with torch.cuda.graph(g):
            out = k(a, b)
    a.copy_(torch.randn_like(a))
    g.replay()
    torch.cuda.synchronize()
    assert rel_err(out, a.double() + b.double()) < 1e-6


def test_seed004_swizzled_gemm():
    M, N, K_ = 512, 384, 256

    def kernel_matmul(M, N, K, block_M, block_N, block_K, dtype, accum_dtype, panel_size=10):
        @T.prim_func
        def gemm_schedule(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
                          C: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
                T.use_swizzle(panel_size=panel_size)
                A_shared = T.alloc_shared((block_M, block_K), dtype)
                B_shared = T.alloc_shared((block_K, block_N), dtype)
                C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
                T.clear(C_local)
                for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                    T.copy(A[by * block_M, ko * block_K], A_shared)
                    for k, j in T.Parallel(block_K, block_N):
                        B_shared[k, j] = B[ko * block_K + k, bx * block_N + j]
                    T.gemm(A_shared, B_shared, C_local)
                T.copy(C_local, C[by * block_M, bx * block_N])
        return gemm_schedule

    k = tilelang.compile(kernel_matmul(M, N, K_, 128, 128, 32, "float16", "float", 2), out_idx=-1)
    a = torch.rand(M, K_, device=DEV, dtype=torch.float16)
    b = torch.rand(K_, N, device=DEV, dtype=torch.float16)
    assert rel_err(k(a, b), a.double() @ b.double()) < 2e-3
    assert "rasterize" in k.get_kernel_source()


def test_print_runs(capfd):
    @T.prim_func
    def p(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            T.print(A[1], msg="a1")

    k = compile_cuda(p)
    k(torch.arange(4, device=DEV, dtype=torch.float32))
    torch.cuda.synchronize()
    out = capfd.readouterr().out
    assert "msg='a1'" in out and "value=1.000000" in out


_ = math


@pytest.mark.parametrize("M,N,K_", [(200, 136, 72), (1000, 1000, 1000), (512, 384, 256)])
def test_parallel_loop_loads_feed_the_pipeline(M, N, K_):
    """Seed 004: B is loaded by an element-wise T.Parallel loop, which becomes a pipelined
    copy (cp.async or TMA); ragged sizes read zeros outside B as the loop would."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "gemm"))
    from example_gemm_swizzle import matmul_swizzle

    k = matmul_swizzle(M, N, K_, panel_size=4)
    a = torch.randn(M, K_, device=DEV).half()
    b = torch.randn(K_, N, device=DEV).half()
    c = k(a, b)
    assert rel_err(c, a.double() @ b.double()) < 2e-3
