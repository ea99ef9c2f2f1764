"""Dynamic sizes: the build specialised on aligned sizes (TMA, 16-byte vectors), the exact
build for other sizes, and how calls are routed between them (transform/align_sizes.py,
engine/build.py AlignedCUDAAdapter, the fast call's guard)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.engine.build import AlignedCUDAAdapter
from tilelang.runtime import toolkit
from tilelang.transform.align_sizes import align_sizes, alignment_of_sizes

pytestmark = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")

HOPPER = "cuda -arch=sm_90a"


def dynamic_gemm(block_M=128, block_N=128, block_K=32, stages=3, threads=128,
                 dtype="float16", out_dtype="float16"):
    M, N, K = T.dynamic("m"), T.dynamic("n"), T.dynamic("k")

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


def _names(alignment):
    return {v.name: a for v, a in alignment.items()}


def test_only_row_stride_sizes_are_aligned():
    f = dynamic_gemm()
    # m is only ever an outermost extent: no row start depends on it
    assert _names(alignment_of_sizes(f)) == {"k": 8, "n": 8}


def test_alignment_follows_the_narrowest_element():
    # n is the row length of B (fp8: 16 per 16 bytes) and of C (float32: 4): B decides
    f = dynamic_gemm(dtype="float8_e4m3", out_dtype="float32")
    assert _names(alignment_of_sizes(f)) == {"k": 16, "n": 16}
    f = dynamic_gemm(dtype="float32", out_dtype="float32")
    assert _names(alignment_of_sizes(f)) == {"k": 4, "n": 4}


def test_compound_extents_keep_their_variable_exact():
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((4, n), "float16"), B: T.Tensor((4, n + 1), "float16")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.serial(4):
                B[i, 0] = A[i, 0]

    assert alignment_of_sizes(main) == {}


def test_specialised_function_reads_multiples():
    f = dynamic_gemm()
    g, derived = align_sizes(f, alignment_of_sizes(f))
    assert sorted(v.name for v in derived) == ["k_div8", "n_div8"]
    A = g.params[0]
    assert A.shape[0] is f.params[0].shape[0]  # m untouched
    assert "k_div8" in str(A.shape[1])


def test_aligned_build_uses_tma_and_exact_build_does_not():
    kernel = tilelang.compile(dynamic_gemm(threads=256), target=HOPPER)
    adapter = kernel.adapter
    assert isinstance(adapter, AlignedCUDAAdapter)
    assert "tl::tma_load" in kernel.get_kernel_source()
    assert "int k_div8" in kernel.get_kernel_source()
    exact = adapter.exact.source
    assert "tl::tma_load" not in exact and "int k," in exact


def test_aligned_cp_async_build_copies_16_bytes():
    kernel = tilelang.compile(dynamic_gemm(threads=128), target=HOPPER)
    aligned, exact = kernel.get_kernel_source(), kernel.adapter.exact.source
    assert "tl::cp_async_zfill<16>" in aligned
    assert "cp_async_zfill" not in exact  # element loads with a bounds check each


def test_dynamic_alignment_config_of_one_turns_it_off():
    kernel = tilelang.compile(dynamic_gemm(threads=256), target=HOPPER,
                              pass_configs={"tl.dynamic_alignment": 1})
    assert not isinstance(kernel.adapter, AlignedCUDAAdapter)
    assert "tl::tma_load" not in kernel.get_kernel_source()


def test_calls_are_routed_by_alignment(monkeypatch):
    kernel = tilelang.compile(dynamic_gemm(), target=HOPPER)
    adapter = kernel.adapter
    seen = []
    monkeypatch.setattr(type(adapter.aligned), "run",
                        lambda self, args, symbols, device, stream=None:
                        seen.append(("aligned" if self is adapter.aligned else "exact",
                                     {v.name: x for v, x in symbols.items()})))
    m, n, k = adapter.func.params[0].shape[0], adapter.func.params[1].shape[1], \
        adapter.func.params[0].shape[1]
    adapter.run([None] * 3, {m: 100, n: 64, k: 48}, None)
    adapter.run([None] * 3, {m: 100, n: 64, k: 50}, None)
    assert seen[0] == ("aligned", {"m": 100, "n": 64, "k": 48, "n_div8": 8, "k_div8": 6})
    assert seen[1][0] == "exact" and "k_div8" not in seen[1][1]


def test_fast_call_guards_the_alignment(monkeypatch):
    """The generated fast path launches the aligned build for multiples and hands other
    sizes to the general path (which runs the exact build)."""
    import ctypes

    from tests.engine.test_fast_call import FakeCudaTensor
    from tilelang.engine.build import build_cuda
    from tilelang.jit.args import CallPlan
    from tilelang.jit.target import Target
    from tilelang.runtime import driver, launcher

    n = T.dynamic("n")

    @T.prim_func
    def double(A: T.Tensor((4, n), "float16"), B: T.Tensor((4, n), "float16")):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i, j in T.Parallel(4, 64):
                B[i, bx * 64 + j] = A[i, bx * 64 + j] * 2

    launches = []
    monkeypatch.setattr(driver, "fast_launcher", lambda: lambda *a: launches.append(a) or 0)
    monkeypatch.setattr(driver, "fast_launcher_ex", lambda: None)
    adapter = build_cuda(double, Target("cuda", "sm_90a"), {"pass_configs": {}})
    assert isinstance(adapter, AlignedCUDAAdapter)
    slow = []
    call = adapter.make_fast_call(CallPlan(double, [1]), lambda args: slow.append(args) or "slow")
    assert "% 8: return slow(args)" in call.source
    monkeypatch.setattr(launcher.CudaKernelFunction, "prepare",
                        lambda self, dev=None, smem=0: (ctypes.c_void_p(1234), 49152))
    call.register(0)
    g = call.__globals__
    g["Tensor"] = FakeCudaTensor
    g["empty"] = lambda shape, dtype, device: FakeCudaTensor(shape, dtype, ptr=8192)
    g["raw_stream"] = lambda dev: 0
    out = call((FakeCudaTensor((4, 128), torch.float16),))
    assert tuple(out.shape) == (4, 128) and len(launches) == 1 and not slow
    assert call((FakeCudaTensor((4, 130), torch.float16),)) == "slow"
    assert len(launches) == 1 and len(slow) == 1


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("M,N,K", [(512, 384, 256), (129, 136, 72), (200, 130, 70),
                                   (77, 64, 1000)])
def test_dynamic_gemm_on_gpu(M, N, K):
    kernel = tilelang.compile(dynamic_gemm(), out_idx=[2], target="cuda")
    for _ in range(2):  # second call: the fast path
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        c = kernel(a, b)
        ref = a.double() @ b.double()
        err = ((c.double() - ref).norm() / ref.norm()).item()
        assert err < 2e-3, (M, N, K, err)
    assert isinstance(kernel.adapter, AlignedCUDAAdapter)
    aligned = N % 8 == 0 and K % 8 == 0
    assert (kernel.adapter._exact is None) == aligned



def test_aligned_chunks_are_wholly_in_or_out():
    """With k = 8 * k_div8 each 16-byte chunk lies wholly inside a row or wholly past its
    end: the copy carries a predicate, not a byte count clamped to [0, 8]."""
    src = tilelang.compile(dynamic_gemm(threads=128), target=HOPPER).get_kernel_source()
    assert "? 16 : 0)" in src
    assert "min(max(" not in src
