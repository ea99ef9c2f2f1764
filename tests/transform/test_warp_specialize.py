"""When a pipelined loop is not warp-specialised because a copy cannot be a TMA load, the
note in the host source names the constraint that failed, with the numbers."""

import sys
from pathlib import Path

import pytest

import tilelang

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.gpu import kernels as K  # noqa: E402


def _notes(M, N, Kd, bm, bn, bk):
    kern = tilelang.compile(K.gemm(M, N, Kd, bm, bn, bk, out_dtype="float16", num_stages=3,
                                   threads=256), target="cuda -arch=sm_90a")
    return kern.get_host_source()


@pytest.mark.parametrize("shape,reason", [
    ((512, 512, 300, 128, 128, 64), "the rows of A are 600 bytes apart, not a multiple of 16"),
    ((1024, 512, 512, 512, 64, 32),
     "a box of (512, 32) elements exceeds TMA's 256 per dimension"),
])
def test_fallback_note_names_the_constraint(shape, reason):
    notes = _notes(*shape)
    assert "no warp specialisation: copy A -> A_shared does not meet TMA's constraints: " + \
        reason in notes, notes


def test_tma_able_copies_are_warp_specialised():
    assert "warp-specialised pipeline over k" in _notes(512, 512, 512, 128, 128, 64)
