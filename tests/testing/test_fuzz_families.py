"""The fuzz families draw programs a GPU can run and the oracle models.

fuzz/fam_gemm.py: the odd-tile and persistent gemm families fit their pipeline stages and
output tile in the shared memory of a block (227 KB on sm_90a); where even two stages of
their tiles would not (float64 128 x 112 x 64 tiles, fuzz seed 6352), the k loop is serial.
(The plain family's draws stay as recorded: pinned seeds keep their programs.)"""

import pytest

import tilelang
from tilelang.testing import fuzz

LIMIT = 227 * 1024
ELEM = {"float32": 4, "float64": 8, "int8": 1}


def _stage_bytes(s):
    elem = ELEM.get(s["ab"], 2)
    out = 8 if "float64" in (s["acc"], s["out"]) else 4
    stages = s["stages"] if s["loop"] == "pipelined" else 1
    staged_out = s["bm"] * s["bn"] * out if s["store"] == "shared" else 0
    return stages * (s["bm"] + s["bn"]) * s["bk"] * elem + staged_out


@pytest.mark.parametrize("family", ["odd_tiles", "persistent"])
def test_gemm_draws_fit_in_shared_memory(family):
    if family not in fuzz.FAMILIES:
        pytest.skip(f"no fuzz family {family}")
    sizes = [_stage_bytes(fuzz.generate(seed, family).spec) for seed in range(400)]
    assert max(sizes) <= LIMIT, max(sizes)


def test_a_draw_whose_two_stages_do_not_fit_is_a_serial_loop():
    case = fuzz.generate(6352)
    s = case.spec
    assert s["ab"] == "float64" and s["loop"] == "serial", s
    tilelang.lower(fuzz.load(case), target="cuda -arch=sm_90a")  # fits: no refusal


def test_ew_offsets_are_not_negative_in_every_block():
    """fam_elementwise: 3 blocks of 1-column tiles shifted by -3 would index before the tensor
    in every block, an index that counts from the end (seed 40058): such draws keep their
    offsets non-negative."""
    case = fuzz.generate(40058)
    s = case.spec
    assert s["N"] == 3 and s["bn"] == 1 and min(s["ox"], s["gx"], s["cx"]) >= 0, s
