"""tile_nest.py: ring slots and parities of positions counted across tiles, and which values
depend on a block or thread index through lets (no GPU needed; the GPU tests in
tests/gpu/test_persistent_pipeline.py run the nests)."""

from __future__ import annotations

import pytest

from tilelang.arith import Analyzer
from tilelang.ir import nodes as ir
from tilelang.transform.warp_specialize.tile_nest import depends_on, slot_and_phase


@pytest.mark.parametrize("counted", [True, False])
@pytest.mark.parametrize("S", [1, 2, 3, 4])
def test_slot_and_phase_follow_the_ring(S, counted):
    """Position p sits in slot p % S and its mbarrier phase flips every S positions; the
    counted (unsigned) form computes the same as the floor form for every position."""
    an = Analyzer()
    for p in range(3 * S + 2):
        slot, phase = slot_and_phase(ir.const(p), S, counted)
        assert ir.int_value(an.simplify(slot)) == p % S
        assert ir.int_value(an.simplify(phase)) == (p // S) % 2
        if counted:
            assert slot.dtype == ir.DType("int32") and phase.dtype == ir.DType("int32")


def test_counted_positions_are_taken_as_unsigned():
    """A position read from a counter is not provably non-negative: the counted form takes it
    as unsigned so that `%` and `/` by the stage count need no floor rounding."""
    done = ir.Buffer("pipe_done", (1,), ir.DType("int32"), "local.var")
    k = ir.Var("k", ir.DType("int32"))
    pos = ir.binary("add", k, ir.Load(done, (ir.const(0),), done.dtype))
    slot, _ = slot_and_phase(pos, 2, counted=True)
    assert isinstance(slot, ir.Cast) and slot.value.dtype == ir.DType("uint32")


def test_depends_on_follows_lets():
    tx, bid = ir.Var("tx", ir.DType("int32")), ir.Var("bid", ir.DType("int32"))
    t = ir.Var("t", ir.DType("int32"))
    row = ir.Var("row", ir.DType("int32"))
    lets = {t: ir.binary("add", bid, 132), row: ir.binary("mul", t, 128)}
    assert depends_on([ir.binary("add", row, 1)], {bid}, lets)
    assert not depends_on([ir.binary("add", row, 1)], {tx}, lets)
    assert depends_on([tx], {tx}, {})
