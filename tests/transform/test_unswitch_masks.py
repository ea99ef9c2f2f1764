"""Masks decided per tile (transform/unswitch_masks.py, analysis/affine.py): the branch
conditions are checked against every element by brute force, the rewritten IR by its shape,
and the attention schedule it enables on the generated CUDA (no GPU needed)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.transform.analysis.affine import fails_everywhere, holds_everywhere, split_affine
from tilelang.transform.analysis.numeric import eval_index

from transform_helpers import SM80, SM90, nodes, requires_compiler, run_passes

ROOT = Path(__file__).resolve().parents[2]


# ---- analysis/affine.py -----------------------------------------------------------------

def _vars(*names):
    return [ir.Var(n) for n in names]


def test_split_affine_reads_coefficients_and_rejects_non_affine_uses():
    i, j, k = _vars("i", "j", "k")
    coeffs, rest = split_affine(k * 64 + i * 2 - (j - 3) * 5, {i, j})
    assert coeffs == {i: 2, j: -5}
    assert eval_index(rest, {k: 7}) == 7 * 64 + 15
    assert split_affine(i * j, {i, j}) is None
    assert split_affine(ir.binary("floordiv", i, ir.const(2)), {i}) is None
    coeffs, rest = split_affine(ir.binary("floordiv", k, ir.const(2)) + i, {i})
    assert coeffs == {i: 1} and eval_index(rest, {k: 9}) == 4


def _brute_force(cond, box, env):
    """(holds at every point, fails at every point) of `cond` over `box` under `env`."""
    values = []
    ranges = [range(s, s + e) for s, e in box.values()]
    for point in itertools.product(*ranges):
        values.append(bool(eval_index(cond, {**env, **dict(zip(box, point))})))
    return all(values), not any(values)


@pytest.mark.parametrize("shape", ["causal", "window", "either", "strict", "flipped"])
def test_branch_conditions_agree_with_every_element(shape):
    """For each tile position (bx, k) the derived conditions say 'all' / 'none' exactly
    when every element (i, j) of the 8x4 box agrees."""
    i, j, bx, k = _vars("i", "j", "bx", "k")
    q, kv = bx * 8 + i, k * 4 + j
    cond = {
        "causal": ir.compare("ge", q, kv),
        "window": ir.logical_and(ir.compare("ge", q, kv), ir.compare("lt", q, kv + 16)),
        "either": ir.logical_or(ir.compare("lt", kv, 3), ir.compare("gt", q, kv * 1 + 9)),
        "strict": ir.compare("gt", q, kv),
        "flipped": ir.compare("le", kv - 2, q),
    }[shape]
    box = {i: (0, 8), j: (0, 4)}
    holds, fails = holds_everywhere(cond, box), fails_everywhere(cond, box)
    assert holds is not None and fails is not None
    for b, kk in itertools.product(range(0, 4), range(0, 10)):
        env = {bx: b, k: kk}
        all_true, all_false = _brute_force(cond, box, env)
        # exact for affine comparisons; 'or'/'and' of them are sound (imply the truth)
        if shape in ("causal", "strict", "flipped"):
            assert bool(eval_index(holds, env)) == all_true, (b, kk)
            assert bool(eval_index(fails, env)) == all_false, (b, kk)
        else:
            assert not eval_index(holds, env) or all_true, (b, kk)
            assert not eval_index(fails, env) or all_false, (b, kk)
    if shape == "window":  # the window's tiles in the middle are decided too
        assert any(eval_index(holds, {bx: 2, k: kk}) for kk in range(10))


def test_no_branch_condition_for_non_affine_or_unsigned_comparisons():
    i, k = _vars("i", "k")
    u = ir.Var("u", ir.DType("uint32"))
    box = {i: (0, 8)}
    assert holds_everywhere(ir.compare("ge", i * i, k), box) is None
    assert holds_everywhere(ir.compare("ge", ir.cast_to(i, "uint32"), u), box) is None
    assert holds_everywhere(ir.compare("eq", i, k), box) is None


# ---- the pass ----------------------------------------------------------------------------

def _scores(mask: str, block=64, threads=128):
    @T.prim_func
    def main(Q: T.Tensor((256, 64), "float16"), K: T.Tensor((256, 64), "float16"),
             S: T.Tensor((256, 256), "float32")):
        with T.Kernel(4, 4, threads=threads) as (bx, by):
            tx = T.get_thread_binding()
            q_s = T.alloc_shared((block, 64), "float16")
            k_s = T.alloc_shared((block, 64), "float16")
            acc = T.alloc_fragment((block, block), "float32")
            flags = T.alloc_fragment((block,), "int32")
            T.copy(Q[bx * block, 0], q_s)
            T.copy(K[by * block, 0], k_s)
            T.fill(flags, 1)
            if mask == "before":
                for i, j in T.Parallel(block, block):
                    acc[i, j] = T.if_then_else(bx * block + i >= by * block + j, 0, -T.infinity("float32"))
            else:
                T.clear(acc)
            T.gemm(q_s, k_s, acc, transpose_B=True)
            if mask == "after":
                for i, j in T.Parallel(block, block):
                    acc[i, j] = T.if_then_else(bx * block + i >= by * block + j, acc[i, j], -T.infinity("float32"))
            if mask == "thread":
                for i, j in T.Parallel(block, block):
                    acc[i, j] = T.if_then_else(tx + i >= j, acc[i, j], 0.0)
            if mask == "load":
                for i, j in T.Parallel(block, block):
                    acc[i, j] = T.if_then_else(flags[i] + i >= j, acc[i, j], 0.0)
            if mask == "static":
                for i, j in T.Parallel(block, block):
                    acc[i, j] = T.if_then_else(i + block >= j, acc[i, j], 0.0)
            T.copy(acc, S[bx * block, by * block])
    return main


def _mask_ifs(kernel):
    return nodes(kernel.body, ir.If, lambda s: nodes(s, ir.Store, lambda st: st.buffer.name == "acc"))


def test_mask_before_the_gemm_clears_tiles_below_the_diagonal():
    k, _ = run_passes(_scores("before"), "unswitch_masks")
    (outer,) = _mask_ifs(k)
    # if <all kept>: acc = 0  else: the mask as written (a wholly masked tile, -inf, is rare:
    # no version of its own)
    then_stores = nodes(outer.then_body, ir.Store)
    assert then_stores and all(isinstance(s.value, ir.Const) and s.value.value == 0
                               for s in then_stores)
    assert isinstance(outer.else_body, ir.For) and nodes(outer.else_body, ir.Select)
    assert not nodes(outer.cond, ir.Var, lambda v: v.name in ("i", "j"))


def test_mask_after_the_gemm_keeps_the_scores_without_a_loop():
    k, _ = run_passes(_scores("after"), "unswitch_masks")
    (outer,) = _mask_ifs(k)
    # if not <all kept>: the mask -- no copy of acc onto itself
    assert outer.else_body is None
    assert isinstance(outer.then_body, ir.For) and nodes(outer.then_body, ir.Select)
    loads_onto_itself = nodes(outer, ir.Store, lambda s: isinstance(s.value, ir.Load)
                              and s.value.buffer is s.buffer)
    assert not loads_onto_itself


@pytest.mark.parametrize("mask", ["thread", "load"])
def test_conditions_threads_may_disagree_on_are_left_alone(mask):
    k, _ = run_passes(_scores(mask), "unswitch_masks")
    assert not _mask_ifs(k)


def test_a_condition_true_on_the_whole_tile_removes_the_mask():
    before, _ = run_passes(_scores("static"), "unroll_fragment_offsets")
    after, _ = run_passes(_scores("static"), "unswitch_masks")
    assert nodes(before.body, ir.Select)
    assert not nodes(after.body, ir.Select) and not _mask_ifs(after)


def test_the_pass_config_keeps_masks_as_written():
    k, _ = run_passes(_scores("before"), "unswitch_masks",
                      configs={"tl.disable_mask_unswitching": True})
    assert not _mask_ifs(k)


@requires_compiler
@pytest.mark.parametrize("mask", ["before", "after"])
def test_versioned_masks_build_for_sm80_and_sm90a(mask):
    for target in (SM80, SM90):
        src = tilelang.lower(_scores(mask), target=target)
        assert "if (" in src


@requires_compiler
def test_causal_attention_as_written_gets_the_derived_schedule():
    """The reference examples' causal mask (written into the scores before Q K^T) is only
    computed on diagonal tiles, so the loop gets FlashAttention-3's schedule like the
    non-causal one; without unswitching it keeps the plain loop."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import as_written as W

    f = W.flash_fwd(1, 2, 1024, 128, True, 128, 128, 2, 256)
    notes = tilelang.compile(f, target=SM90).get_host_source()
    assert "derived" in notes and "ping-pong" in notes
    off = tilelang.compile(f, target=SM90, pass_configs={
        "tl.disable_mask_unswitching": True}).get_host_source()
    assert "derived" not in off


def test_constant_upper_bound_of_trip_counts():
    from tilelang.transform.analysis.affine import constant_upper_bound

    bx, n = _vars("bx", "n")
    causal = ir.binary("min", ir.binary("floordiv", ir.const(4096 + 127), ir.const(128)),
                       ir.binary("floordiv", (bx + 1) * 128 + 127, ir.const(128)))
    assert constant_upper_bound(causal) == 32
    assert constant_upper_bound(ir.binary("floordiv", n + 127, ir.const(128))) is None
    assert constant_upper_bound(ir.binary("max", ir.const(3), ir.const(5)) + 2) == 7


@requires_compiler
def test_short_masked_loops_keep_the_plain_loop():
    """Two iterations (seq 256, 128-wide tiles): the derived schedule's prologue and epilogue
    cost more than its overlap, so the versioned mask does not bring it in; verbose says why."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import as_written as W

    notes = tilelang.compile(W.flash_fwd(1, 2, 256, 128, True, 128, 128, 2, 256),
                             target=SM90).get_host_source()
    assert "FlashAttention-3's schedule, derived" not in notes
    assert "not known to run 8 times or more (bound: 2)" in notes


def _lengths_mask(source: str):
    @T.prim_func
    def main(Lens: T.Tensor((4,), "int32"), S: T.Tensor((256, 64), "float32")):
        with T.Kernel(4, threads=128) as bx:
            acc = T.alloc_fragment((64, 64), "float32")
            lens_frag = T.alloc_fragment((4,), "int32")
            T.copy(Lens, lens_frag)
            n = Lens[bx] if source == "global" else lens_frag[bx]
            for i, j in T.Parallel(64, 64):
                acc[i, j] = T.if_then_else(bx * 64 + i < n, 1.0, 0.0)
            T.copy(acc, S[bx * 64, 0])
    return main


@pytest.mark.parametrize("source,versioned", [("global", True), ("fragment", False)])
def test_values_bound_from_loads_count_only_from_unwritten_global_tensors(source, versioned):
    """A length read from a global tensor (every thread reads the same element) decides the
    tile; one read from a fragment (each thread's own registers) does not."""
    k, _ = run_passes(_lengths_mask(source), "unswitch_masks")
    assert bool(_mask_ifs(k)) == versioned


def test_trip_bounds_from_the_grid():
    """`T.ceildiv((bx + 1) * 128, 128)` with bx < 16 runs at most 16 times."""
    from tilelang.arith import Analyzer
    from tilelang.transform.analysis.affine import constant_upper_bound

    (bx,) = _vars("bx")
    grid = Analyzer()
    grid.bind(bx, 0, 16)
    trips = ir.binary("floordiv", (bx + 1) * 128 + 127, ir.const(128))
    assert constant_upper_bound(trips) is None
    assert constant_upper_bound(trips, grid) == 16
    # exact through sums: trips - bx is 1 for every bx, trips - (bx - 3) is 4
    assert constant_upper_bound(trips - 1, grid) == 15
    assert constant_upper_bound(trips - bx, grid) == 1
    assert constant_upper_bound(trips - (bx - 3), grid) == 4
    window_start = ir.binary("max", ir.const(0), bx * 128 - 300)
    assert constant_upper_bound(trips - window_start, grid) == 16


def test_verbose_notes_name_the_masks_decided_per_tile():
    _, ctx = run_passes(_scores("before"), "unswitch_masks")
    assert any("1 mask(s) on acc decided per tile" in n for n in ctx.notes), ctx.notes
    _, ctx = run_passes(_scores("thread"), "unswitch_masks")
    assert not any("decided per tile" in n for n in ctx.notes)
