"""How a 16-bit T.gemm is split over warpgroups on wgmma (sm_90a), checked on the generated
CUDA without a GPU. A warpgroup's slice of an N-contiguous B (K x N in shared memory) must
be whole swizzle atoms or lie within one; where no split allows it, the gemm stays on
mma.sync (and is still correct: tests/gpu/test_cuda_core.py)."""

import re
import sys
from pathlib import Path

import pytest

import tilelang

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.gpu import kernels as K  # noqa: E402


def _gemm_call(bm, bn, bk, threads, trans_B):
    src = tilelang.lower(K.gemm(256, 320, 192, bm, bn, bk, trans_B=trans_B,
                                out_dtype="float16", threads=threads),
                         target="cuda -arch=sm_90a")
    calls = re.findall(r"tl::(\w*gemm_ss)<(\d+), (\d+), \d+, (\d+), (\d+),", src)
    assert len(calls) == 1, calls
    name, _, _, wm, wn = calls[0]
    return name, (int(wm), int(wn))  # warpgroups (wgmma) or warps (mma.sync) along M, N


@pytest.mark.parametrize("bm,bn,bk,trans_B,want", [
    # B K x N, 128-byte atoms of 64 columns: two slices of 64 columns
    (64, 128, 64, False, ("wgmma_gemm_ss", (1, 2))),
    # 80 columns (32-byte atoms of 16): slices of 40 would start mid-atom
    (64, 80, 64, False, ("gemm_ss", None)),
    # 96 columns (64-byte atoms of 32): slices of 48 would start mid-atom
    (64, 96, 32, False, ("gemm_ss", None)),
    # split along M instead: each warpgroup takes all 80 columns
    (128, 80, 64, False, ("wgmma_gemm_ss", (2, 1))),
    # B N x K is sliced by rows: 40 rows are five 8-row groups
    (64, 80, 64, True, ("wgmma_gemm_ss", (1, 2))),
    # halves of one atom: 32 of a 128-byte atom's 64 columns, 16 of a 64-byte atom's 32,
    # 8 of a 32-byte atom's 16
    (64, 64, 32, False, ("wgmma_gemm_ss", (1, 2))),
    (64, 32, 32, False, ("wgmma_gemm_ss", (1, 2))),
    (64, 16, 32, False, ("wgmma_gemm_ss", (1, 2))),
])
def test_n_slices_of_b_fit_swizzle_atoms(bm, bn, bk, trans_B, want):
    name, split = _gemm_call(bm, bn, bk, 256, trans_B)
    assert (name, split if want[1] else None) == want


def test_mma_sync_fallback_is_noted():
    from tilelang.engine.build import lower_cuda
    from tilelang.jit.target import parse_target

    func = K.gemm(256, 320, 192, 64, 80, 64, out_dtype="float16", threads=256)
    mod = lower_cuda(func, parse_target("cuda -arch=sm_90a"), {})
    notes = [n for k in mod.kernels for n in k.notes if "swizzle atoms" in n]
    assert len(notes) == 1, notes
    assert "80 columns of B_shared into slices of 40" in notes[0]
    assert "16-column" in notes[0] and "mma.sync" in notes[0]


@pytest.mark.parametrize("bm,bn,threads,want", [
    (64, 128, 128, "0"),             # one warpgroup: index 0, folded into the descriptors
    (64, 128, 256, "warpgroup"),     # N split over two: the bound index
    (128, 128, 256, "warpgroup"),    # M split over two
])
def test_one_warpgroup_passes_index_zero(bm, bn, threads, want):
    src = tilelang.lower(K.gemm(256, 320, 192, bm, bn, 64, trans_B=False,
                                out_dtype="float16", threads=threads),
                         target="cuda -arch=sm_90a")
    calls = re.findall(r"tl::wgmma_gemm_ss<[^;]*, (\w+)\);", src)
    assert calls and set(calls) == {want}, calls
    assert ("tl::warpgroup_index(" in src) == (want == "warpgroup")
