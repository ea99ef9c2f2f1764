"""The TL_EXPERIMENT switches codegen/module.py reads, so that each variant builds until a GPU
run has timed it against the default:

* `tma_desc_prefetch`: the block's first thread prefetches every tensor map the kernel uses
  (`prefetch.tensormap`) before the kernel's own statements;
* `mbarrier_wait_hint`: `#define TL_MBARRIER_WAIT_HINT`, with which tl::mbarrier_wait passes
  try_wait a suspend-time hint (tl/barrier.cuh).

Without the switches neither appears."""

import os
import re
import sys

import pytest
import torch

import tilelang
from tilelang.runtime import compile_cuda, toolkit

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tests.codegen.test_wgmma_gemm_descriptors import _ptx  # noqa: E402
from tests.gpu import kernels as K_  # noqa: E402

SM90 = "cuda -arch=sm_90a"
requires_nvcc = pytest.mark.skipif(toolkit.nvcc_path() is None, reason="nvcc not installed")
requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")


def tma_gemm(M=64, N=64, K=256):
    """C = A @ B in 64 x 64 tiles over a two-stage T.Pipelined loop: on sm_90a the tiles come
    by TMA loads (two tensor maps) behind mbarrier waits, and C leaves by a TMA store (a
    third map)."""
    return K_.gemm(M, N, K, 64, 64, 32)


def _descriptors(src):
    return re.findall(r"const __grid_constant__ CUtensorMap (\w+)", src)


def test_tma_desc_prefetch_prefetches_every_map_first(monkeypatch):
    monkeypatch.setenv("TL_EXPERIMENT", "tma_desc_prefetch")
    src = tilelang.lower(tma_gemm(), target=SM90)
    maps = _descriptors(src)
    assert len(maps) == 3, maps  # A and B loaded, C stored
    body = src[src.index("threadIdx.x;"):]
    guard = body.index("if (tx == 0) {\n    tl::prefetch_tma_descriptor(")
    block = body[guard:body.index("}", guard)]
    assert [f"tl::prefetch_tma_descriptor(&{m});" for m in maps] == \
        [line.strip() for line in block.splitlines()[1:] if line.strip()]
    # before the barriers are set up, so the fetches overlap that and the block's sync
    assert guard < body.index("tl::mbarrier_init(") < body.index("tl::tma_load(")


def test_no_prefetch_without_the_experiment(monkeypatch):
    monkeypatch.delenv("TL_EXPERIMENT", raising=False)
    src = tilelang.lower(tma_gemm(), target=SM90)
    assert len(_descriptors(src)) == 3 and "prefetch_tma_descriptor" not in src


def test_tma_desc_prefetch_skips_kernels_without_maps(monkeypatch):
    monkeypatch.setenv("TL_EXPERIMENT", "tma_desc_prefetch")
    src = tilelang.lower(tma_gemm(), target="cuda -arch=sm_80")  # cp.async, no TMA
    assert not _descriptors(src) and "prefetch_tma_descriptor" not in src


@requires_nvcc
def test_tma_desc_prefetch_builds_to_prefetch_tensormap(monkeypatch):
    monkeypatch.setenv("TL_EXPERIMENT", "tma_desc_prefetch")
    ptx = _ptx(tilelang.lower(tma_gemm(), target=SM90))
    assert len(re.findall(r"prefetch\.tensormap", ptx)) == 3


def _try_waits(ptx):
    """Operand lists of the PTX's mbarrier.try_wait.parity instructions."""
    return re.findall(r"mbarrier\.try_wait\.parity\.shared::cta\.b64\s+[^,]+,\s*([^;]+);", ptx)


@requires_nvcc
def test_mbarrier_wait_hint_adds_the_suspend_time_hint(monkeypatch):
    monkeypatch.setenv("TL_EXPERIMENT", "mbarrier_wait_hint")
    src = tilelang.lower(tma_gemm(), target=SM90)
    assert src.splitlines()[1] == "#define TL_MBARRIER_WAIT_HINT"
    waits = _try_waits(_ptx(src))
    assert waits and all(len(w.split(",")) == 3 for w in waits), waits  # [bar], parity, hint
    monkeypatch.delenv("TL_EXPERIMENT")
    src = tilelang.lower(tma_gemm(), target=SM90)
    assert "TL_MBARRIER_WAIT_HINT" not in src
    waits = _try_waits(_ptx(src))
    assert waits and all(len(w.split(",")) == 2 for w in waits), waits


@requires_compiler
@pytest.mark.parametrize("experiment", ["tma_desc_prefetch", "mbarrier_wait_hint",
                                        "tma_desc_prefetch,mbarrier_wait_hint"])
def test_the_variants_build(monkeypatch, experiment):
    monkeypatch.setenv("TL_EXPERIMENT", experiment)
    compile_cuda(tilelang.lower(tma_gemm(), target=SM90), "sm_90a", name="experiment")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("experiment", ["", "tma_desc_prefetch", "mbarrier_wait_hint",
                                        "tma_desc_prefetch,mbarrier_wait_hint"])
@pytest.mark.parametrize("M,N,K", [(64, 64, 256), (200, 136, 264)])
def test_the_variants_compute_the_gemm(monkeypatch, experiment, M, N, K):
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA needs sm_90")
    monkeypatch.setenv("TL_EXPERIMENT", experiment)
    k = tilelang.compile(tma_gemm(M, N, K), target="cuda")
    for _ in range(2):
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        c = torch.full((M, N), float("nan"), device="cuda")
        k(a, b, c)
        torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=5e-2)
