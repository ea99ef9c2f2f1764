"""The reference's public modules that its example programs import, with the reference's
meaning: tilelang.contrib.nvcc, tilelang.engine.callback (post-processing of generated CUDA),
tilelang.tools.Analyzer, tilelang.carver (tile-configuration recommender), tilelang.transform,
tilelang.tileop.base, the tvm stand-in's tirx and testing, LazyJIT.get_kernel_source, and the
backends that do not exist here (rocm, metal, iket: clear import errors)."""

import importlib

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.runtime import toolkit

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")
requires_nvcc = pytest.mark.skipif(toolkit.nvcc_path() is None, reason="nvcc is not installed")
SM90 = "cuda -arch=sm_90a"


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))


def copy_kernel(n=256):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * 2.0
    return main


# ---- tilelang.contrib.nvcc ----------------------------------------------------------------------
def test_nvcc_compute_versions():
    from tilelang.contrib import nvcc

    assert nvcc.get_target_compute_version("cuda -arch=sm_90a") == "9.0"
    from tilelang.jit.target import parse_target

    assert nvcc.get_target_compute_version(parse_target("cuda -arch=sm_80")) == "8.0"
    assert nvcc.get_target_compute_version("cuda -arch=sm_100a") == "10.0"
    assert nvcc.parse_compute_version("8.6") == (8, 6)
    with pytest.raises(RuntimeError, match="cannot parse"):
        nvcc.parse_compute_version("sm90")
    assert nvcc.get_target_arch("9.0") == "90a" and nvcc.get_target_arch((8, 0)) == "80"
    assert nvcc.have_tensorcore("7.0") and not nvcc.have_tensorcore("6.1")
    assert nvcc.have_fp8("8.9") and not nvcc.have_fp8("8.6") and nvcc.have_bf16("8.0")
    assert nvcc.have_fp16("5.3") and not nvcc.have_fp16("5.2") and nvcc.have_int8("6.1")
    assert nvcc.have_tma(SM90) and not nvcc.have_tma("cuda -arch=sm_80")
    assert nvcc.is_hopper(SM90) and not nvcc.have_tma("cpu") and nvcc.have_mbarrier(SM90)


@requires_nvcc
def test_nvcc_toolkit_queries_and_compile():
    from tilelang.contrib import nvcc

    version = nvcc.get_cuda_version()
    assert isinstance(version, tuple) and version[0] >= 11
    assert nvcc.get_nvcc_compiler().endswith("nvcc") and nvcc.find_cuda_path()
    ptx = nvcc.compile_cuda("extern \"C\" __global__ void k(float* x) { x[0] = 1.0f; }",
                            "ptx", arch="sm_80")
    assert b".entry k" in ptx
    with pytest.raises(RuntimeError, match="nvcc failed"):
        nvcc.compile_cuda("this is not C++", "ptx", arch="sm_80")


# ---- tilelang.engine.callback -----------------------------------------------------------------
@requires_compiler
def test_cuda_postproc_callback_changes_what_is_compiled():
    from tilelang.engine.callback import (get_postproc, register_cuda_postproc_callback,
                                          unregister_postproc)

    seen = []

    @register_cuda_postproc_callback
    def mark(code, target):
        seen.append(str(target))
        return "// postprocessed by the test\n" + code

    try:
        src = tilelang.compile(copy_kernel(), target=SM90).get_kernel_source()
        assert src.startswith("// postprocessed by the test") and seen == [SM90]

        @register_cuda_postproc_callback(override=True)
        def broken(code, target):
            return code + "\n#error postproc_was_applied_before_compilation\n"

        with pytest.raises(Exception, match="postproc_was_applied_before_compilation"):
            tilelang.compile(copy_kernel(), target=SM90)
        with pytest.raises(ValueError, match="already registered"):
            register_cuda_postproc_callback(override=False)(mark)
        register_cuda_postproc_callback(lambda code, target: None)
        with pytest.raises(TypeError, match="not the source text"):
            tilelang.compile(copy_kernel(), target=SM90)
    finally:
        unregister_postproc("cuda")
    assert get_postproc("cuda") is None
    src = tilelang.compile(copy_kernel(), target=SM90).get_kernel_source()
    assert "postprocessed" not in src  # not a cached build of the processed text
    assert tilelang.register_cuda_postproc is importlib.import_module(
        "tilelang.engine.callback").register_cuda_postproc


# ---- tilelang.tools.Analyzer --------------------------------------------------------------------
@tilelang.jit
def analyzed_gemm(A, B, bm=64, bn=64, bk=32, stages=2):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((N, K), T.float16)
    C = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
        A_s = T.alloc_shared((bm, bk), T.float16)
        B_s = T.alloc_shared((bn, bk), T.float16)
        C_l = T.alloc_fragment((bm, bn), T.float32)
        T.clear(C_l)
        for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
            T.copy(A[by * bm, k * bk], A_s)
            T.copy(B[bx * bn, k * bk], B_s)
            T.gemm(A_s, B_s, C_l, transpose_B=True)
        T.copy(C_l, C[by * bm, bx * bn])
    return C


def test_analyzer_counts_gemm_flops_and_global_bytes():
    from tilelang.carver.arch import CUDA
    from tilelang.tools import Analyzer

    M, N, K, bm, bn, bk = 256, 192, 128, 64, 64, 32
    func = analyzed_gemm.get_tir(M=M, N=N, K=K, bm=bm, bn=bn, bk=bk)
    result = Analyzer.analysis(func, CUDA(SM90))
    assert result.total_flops == 2 * M * N * K
    blocks = (M // bm) * (N // bn)
    per_block = (K // bk) * (bm + bn) * bk * 2 + bm * bn * 2
    assert result.total_global_bytes == blocks * per_block
    assert result.expected_tflops and result.estimated_time > 0
    with pytest.raises(TypeError, match="PrimFunc"):
        Analyzer.analysis("not a function", CUDA(SM90))


# ---- tilelang.carver ---------------------------------------------------------------------------
def test_matmul_template_recommends_configs_that_fit():
    from tilelang.carver.arch import CUDA
    from tilelang.carver.roller.rasterization import NoRasterization, Rasterization
    from tilelang.carver.template import MatmulTemplate

    arch = CUDA(SM90)
    assert (arch.sm_version, arch.compute_capability, arch.platform) == (90, "90", "CUDA")
    template = MatmulTemplate(M=4096, N=4096, K=4096, in_dtype=T.float16, out_dtype=T.float16,
                              accum_dtype=T.float32).with_arch(arch)
    hints = template.recommend_hints(topk=8)
    assert len(hints) == 8
    assert [h.score for h in hints] == sorted(h.score for h in hints)
    for h in hints:
        bm, bn = h.block
        wm, wn = h.warp
        assert bm % wm == 0 and bn % wn == 0 and wm % 16 == 0 and wn % 8 == 0
        assert (bm // wm) * (bn // wn) in (4, 8) and h.threads in (128, 256)
        assert (bm + bn) * h.rstep[0] * 2 * h.pipeline_stage <= arch.smem_cap
        assert isinstance(h.rasterization_plan, Rasterization)
    # a big square problem wants big tiles and a pipeline
    assert hints[0].block[0] * hints[0].block[1] >= 128 * 128 and hints[0].pipeline_stage >= 2
    # a tiny problem is not rasterized and prefers tiles that do not waste work
    small = MatmulTemplate(M=64, N=64, K=256, accum_dtype=T.float32).with_arch(arch)
    best = small.recommend_hints(topk=1)[0]
    assert isinstance(best.rasterization_plan, NoRasterization) and best.block[0] <= 64


def test_matmul_template_equivalent_function_runs():
    from tilelang.carver.arch import CUDA
    from tilelang.carver.template import MatmulTemplate

    M, N, K = 64, 96, 64
    func = MatmulTemplate(M=M, N=N, K=K, in_dtype="float16", out_dtype="float32",
                          accum_dtype="float32").with_arch(CUDA(SM90)).equivalent_function()
    kernel = tilelang.compile(func, out_idx=[2], target="cpu")
    a, b = torch.randn(M, K).half(), torch.randn(N, K).half()
    np.testing.assert_allclose(kernel(a, b).numpy(), (a.float() @ b.float().T).numpy(),
                               rtol=1e-3, atol=1e-3)


def test_carver_devices_without_a_backend():
    from tilelang.carver.arch import CDNA, CUDA, is_hopper_arch

    with pytest.raises(NotImplementedError, match="CDNA"):
        CDNA("hip")
    assert is_hopper_arch(CUDA(SM90)) and not is_hopper_arch(CUDA("cuda -arch=sm_80"))
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no.*GPU|none is visible"):
            CUDA("cuda")


# ---- transform, tileop ------------------------------------------------------------------------
def test_transform_and_tileop_names():
    from tilelang.tileop.base import GemmWarpPolicy
    from tilelang.transform import PassConfigKey, simplify_prim_func

    assert PassConfigKey is tilelang.PassConfigKey and GemmWarpPolicy is T.GemmWarpPolicy
    assert PassConfigKey.TL_DISABLE_WARP_SPECIALIZED == "tl.disable_warp_specialized"

    @simplify_prim_func
    def make():
        return copy_kernel(128)

    assert isinstance(make(), tilelang.ir.PrimFunc)
    with pytest.raises(TypeError, match="not a PrimFunc"):
        simplify_prim_func(lambda: 3)()


# ---- the tvm stand-in: tirx and testing ----------------------------------------------------------
def test_tirx_builds_kernel_expressions():
    import tvm
    from tvm import tirx

    assert tvm.tirx is tirx and tilelang.tvm.tirx is tirx
    import tvm.tirx as tirx_again  # the same module object under both names

    assert tirx_again is tirx

    def f4_to_bf16(val: tirx.PrimExpr, pos: tirx.PrimExpr):
        # the reference's dequantize helpers are written with tirx like this
        f4 = (val >> (pos.astype(T.uint16) * tirx.const(4, T.uint16))) & tirx.const(15, T.uint16)
        s = f4 >> tirx.const(3, T.uint16)
        e = (f4 & tirx.const(6, T.uint16)) >> tirx.const(1, T.uint16)
        m = f4 & tirx.const(1, T.uint16)
        e_bf16 = tirx.Min(e + tirx.const(126, T.uint16), tirx.const(255, T.uint16))
        bits = (((s << tirx.const(8, T.uint16)) | e_bf16) << tirx.const(7, T.uint16)) | \
            (m << tirx.const(6, T.uint16))
        value = tirx.reinterpret(T.bfloat16, bits.astype(T.uint16))
        return tirx.Select(e == tirx.const(0, T.uint16), tirx.Cast(T.bfloat16, 0.0), value)

    @T.prim_func
    def decode(Q: T.Tensor((64,), "uint16"), O: T.Tensor((64, 4), "bfloat16")):
        with T.Kernel(1, threads=64):
            for i, j in T.Parallel(64, 4):
                O[i, j] = f4_to_bf16(Q[i], j)

    k = tilelang.compile(decode, target="cpu")
    q = torch.randint(0, 1 << 16, (64,), dtype=torch.int32).to(torch.int16).view(torch.uint16)
    out = torch.zeros(64, 4, dtype=torch.bfloat16)
    k(q, out)
    qn = q.view(torch.int16).numpy().astype(np.int64) & 0xFFFF
    for i in range(64):
        for j in range(4):
            nib = (qn[i] >> (4 * j)) & 15
            s, e, m = nib >> 3, (nib >> 1) & 3, nib & 1
            want = 0.0 if e == 0 else (-1) ** s * 2.0 ** (e - 1) * (1 + m / 2)
            assert out[i, j].item() == want, (i, j, nib)


def test_tirx_index_map_and_tvm_testing():
    from tvm import testing as tvm_testing
    from tvm.tirx import IndexMap

    from tvm import tirx

    v = tirx.Var("value", "bfloat16")
    assert isinstance(v, tirx.Var) and v.dtype is T.bfloat16 and T.exp(v).dtype is T.bfloat16
    assert not isinstance(T.float16(1.0), tirx.Var) and isinstance(T.exp(v), tirx.Call)
    imap = IndexMap.from_func(lambda i, j: (i // 2, j * 2 + i % 2), index_dtype=T.int32)
    assert imap.map_indices([5, 3]) == [2, 7]
    n = T.dynamic("n")
    tvm_testing.assert_prim_expr_equal(n * 2 + n, n * 3)
    with pytest.raises(AssertionError):
        tvm_testing.assert_prim_expr_equal(n + 1, n)
    assert tvm_testing.requires_package("a_package_that_does_not_exist").marks()
    assert callable(tvm_testing.parameter(1, 2))


def test_tirx_decl_buffer_and_tvm_arith():
    import tvm
    from tvm import tirx

    from tilelang.layout import make_full_bank_swizzled_layout

    buf = tirx.decl_buffer((3, 8, 64), T.float16, name="A", scope="shared")
    assert buf.shape == (3, 8, 64) and buf.scope == "shared" and buf.dtype is T.float16
    assert tirx.decl_buffer(16).scope == "global"
    tile = tirx.decl_buffer((8, 64), "float16", scope="shared")
    assert make_full_bank_swizzled_layout(buf).is_equal(
        make_full_bank_swizzled_layout(tile).expand([3]))
    ana = tvm.arith.Analyzer()
    n = T.dynamic("n")
    assert ana.can_prove(n * 2 - n == n) and not ana.can_prove(n > 3)
    assert ana.can_prove_equal(n * 4 + n, n * 5)
    with pytest.raises(AttributeError, match="tvm.arith"):
        tvm.relax


# ---- backends that do not exist here ------------------------------------------------------------
@pytest.mark.parametrize("module,words", [
    ("tilelang.rocm.intrinsics.mfma_layout", "AMD ROCm/HIP"), ("tilelang.rocm.intrinsics",
                                                             "AMD ROCm/HIP"),
    ("tilelang.metal", "Apple Metal")])
def test_absent_backends_say_so(module, words):
    with pytest.raises(ImportError, match=words):
        importlib.import_module(module)


def test_rocm_answers_only_its_availability_probe():
    rocm = importlib.import_module("tilelang.rocm")
    from tilelang.rocm.target import check_hip_availability, target_is_hip

    assert check_hip_availability() is False
    assert target_is_hip("hip") and not target_is_hip("cuda -arch=sm_90a")
    with pytest.raises(AttributeError, match="AMD ROCm/HIP"):
        rocm.intrinsics_helpers  # noqa: B018
    with pytest.raises(AttributeError, match="AMD ROCm/HIP"):
        importlib.import_module("tilelang.rocm.target").rocm_warp_size_for_arch  # noqa: B018


def test_iket_says_it_is_absent():
    with pytest.raises(ImportError, match="iket"):
        from tilelang.tools.cuda import iket  # noqa: F401


# ---- LazyJIT.get_kernel_source ----------------------------------------------------------------
@tilelang.jit(target=SM90)
def scaled_copy(A, scale: float = 2.0, block=128):
    N = T.const("N")
    A: T.Tensor((N,), T.float32)
    B = T.empty((N,), T.float32)
    with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
        for i in T.Parallel(block):
            B[bx * block + i] = A[bx * block + i] * scale
    return B


@requires_compiler
def test_lazy_jit_get_kernel_source_with_constants():
    src = scaled_copy.get_kernel_source(N=1024, block=256)
    assert "__global__" in src and "256" in src
    assert src == scaled_copy.compile(N=1024, block=256).get_kernel_source()


@requires_compiler
def test_factory_get_kernel_source():
    factory = tilelang.jit(lambda n: copy_kernel(n), target=SM90)
    assert "__global__" in factory.get_kernel_source(512)


@pytest.mark.parametrize("construct", ["tcgen05_gemm", "tcgen05_mma_arrive", "alloc_tmem"])
def test_blackwell_constructs_name_their_backend(construct):
    with pytest.raises((AttributeError, NotImplementedError), match="sm_100") as info:
        @T.prim_func
        def kernel(A: T.Tensor((128, 128), "float16")):
            with T.Kernel(1, threads=128):
                getattr(T, construct)((128, 128), "float32")
    assert "test_reference_modules.py" in str(info.value)


# ---- TILELANG_COMPILE_TIMEOUT_SECONDS ------------------------------------------------------
def test_compile_timeout_setting(monkeypatch):
    from tilelang.env import env

    for unlimited in (None, "", " ", "0"):
        if unlimited is None:
            monkeypatch.delenv("TILELANG_COMPILE_TIMEOUT_SECONDS", raising=False)
        else:
            monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", unlimited)
        assert env.get_compile_timeout_seconds() is None
    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "2.5")
    assert env.get_compile_timeout_seconds() == 2.5
    for bad in ("soon", "nan", "inf", "-1"):
        monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", bad)
        with pytest.raises(ValueError, match=f"TILELANG_COMPILE_TIMEOUT_SECONDS .* got '{bad}'"):
            env.get_compile_timeout_seconds()


def test_nvcc_is_stopped_after_the_compile_timeout(monkeypatch, tmp_path):
    from tilelang.contrib import nvcc

    # an "nvcc" that does not finish within the limit
    slow = tmp_path / "nvcc"
    slow.write_text("#!/bin/sh\nexec sleep 60\n")
    slow.chmod(0o755)
    monkeypatch.setattr(nvcc, "get_nvcc_compiler", lambda: str(slow))
    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "0.3")
    with pytest.raises(RuntimeError, match="NVCC compilation timed out after 0.3 seconds") as info:
        nvcc.compile_cuda("__global__ void k() {}", "cubin", arch="sm_90a")
    message = str(info.value)
    assert f"Command: {slow}" in message and "-arch=sm_90a" in message
    assert "__global__ void k() {}" in message  # the source
