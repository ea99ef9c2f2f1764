"""T.wgmma_gemm: T.gemm issued on wgmma without waiting (T.wait_wgmma completes it), and a
located error where no wgmma can compute the gemm. Interpreter results against torch and the
sm_90a lowering; tests/gpu/test_wgmma_gemm_async.py runs the same kernels on the GPU."""

import os
import re
import sys

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError
from tilelang.runtime import compile_cuda, toolkit

sys.path.insert(0, os.path.dirname(__file__))
from wgmma_gemm_kernels import wgmma_gemm_tiles  # noqa: E402

sys.path.pop(0)


def _ref(a, b, trans_B):
    return (a.float() @ (b.float().T if trans_B else b.float())).half()


@pytest.mark.parametrize("M,N,K,k_slices,trans_B,wait", [
    (64, 64, 32, 1, False, True), (100, 72, 80, 2, True, True), (70, 130, 48, 2, False, False)])
def test_interpreter_matches_torch(M, N, K, k_slices, trans_B, wait):
    func = wgmma_gemm_tiles(M, N, K, k_slices=k_slices, trans_B=trans_B, wait=wait)
    a = torch.randn(M, K).half()
    b = torch.randn(*((N, K) if trans_B else (K, N))).half()
    d = torch.full((M, N), float("nan")).half()
    tilelang.compile(func, target="cpu")(a, b, d)
    torch.testing.assert_close(d, _ref(a, b, trans_B), rtol=1e-2, atol=1e-2)


def _body(src):
    return src[src.index("__global__"):]


def test_issued_without_waiting():
    body = _body(tilelang.lower(wgmma_gemm_tiles(64, 64, 32), target="cuda -arch=sm_90a"))
    # the template's WgWait argument -1: commit only; the program's T.wait_wgmma(0) is the
    # only wait, between the gemm and the accumulator's store
    assert re.search(r"tl::wgmma_gemm_ss<[^>]*, -1[,>]", body)
    assert body.count("tl::wgmma_wait<0>();") == 1 and "wgmma_wait_in_place" not in body
    assert body.index("tl::wgmma_gemm_ss<") < body.index("tl::wgmma_wait<0>();")


def test_compiler_waits_when_the_program_does_not():
    body = _body(tilelang.lower(wgmma_gemm_tiles(64, 64, 32, wait=False),
                                target="cuda -arch=sm_90a"))
    # one wait before the next iteration overwrites the shared tiles, one before C is stored
    assert body.count("tl::wgmma_wait_in_place<0>();") == 2
    assert body.index("tl::wgmma_gemm_ss<") < body.rindex("tl::wgmma_wait_in_place<0>();")


def test_f16_accumulator_still_compiles():
    # wgmma can accumulate in f16, this compiler's wgmma path does not: mma.sync, no error
    src = tilelang.lower(wgmma_gemm_tiles(64, 64, 32, acc_dtype=T.float16),
                         target="cuda -arch=sm_90a")
    assert "tl::gemm_ss<" in src


@pytest.mark.parametrize("kw,target,match", [
    (dict(block_M=32), "cuda -arch=sm_90a", "M=32 is not a multiple of the 64 rows"),
    (dict(threads=96), "cuda -arch=sm_90a", "96 threads are not whole warpgroups"),
    (dict(), "cuda -arch=sm_80", "the target is sm_80"),
])
def test_no_wgmma_is_a_located_error(kw, target, match):
    with pytest.raises(KernelError, match=r"T\.wgmma_gemm\(\) requires Hopper WGMMA lowering") as e:
        tilelang.lower(wgmma_gemm_tiles(64, 64, 32, **kw), target=target)
    assert match in str(e.value) and "wgmma_gemm_kernels.py" in str(e.value)


def test_the_interpreter_computes_what_cuda_rejects():
    a, b = torch.randn(32, 32).half(), torch.randn(32, 64).half()
    d = torch.full((32, 64), float("nan")).half()
    tilelang.compile(wgmma_gemm_tiles(32, 64, 32, block_M=32), target="cpu")(a, b, d)
    torch.testing.assert_close(d, _ref(a, b, False), rtol=1e-2, atol=1e-2)


requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")


@requires_compiler
@pytest.mark.parametrize("kw", [dict(), dict(wait=False, trans_B=True), dict(k_slices=2)])
def test_builds_for_sm90a(kw):
    compile_cuda(tilelang.lower(wgmma_gemm_tiles(130, 70, 96, **kw), target="cuda -arch=sm_90a"),
                 "sm_90a")


def test_printed_as_written():
    assert "T.wgmma_gemm(A_s, B_s, C)" in wgmma_gemm_tiles(64, 64, 32).script()
