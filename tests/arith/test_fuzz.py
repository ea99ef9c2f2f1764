"""Seeded random fuzzing of the simplifier: simplified expressions must evaluate like the
originals on random assignments within the bounds, keep their dtype, and `prove` /
`const_int_bound` must never claim anything an assignment contradicts.

The seed is printed (run with -s to see it); set TL_ARITH_SEED to replay a failure.
"""

from __future__ import annotations

import os
import random

import pytest

from tilelang.arith import Analyzer
from tilelang.arith.int_eval import evaluate
from tilelang.ir import nodes as ir

from arith_fuzz_gen import I64, ExprGen, pick, wide_int

SEED = int(os.environ.get("TL_ARITH_SEED", random.randrange(1 << 30)))


def _seed(offset):
    print(f"arith fuzz seed: TL_ARITH_SEED={SEED} (case offset {offset})")
    return random.Random(SEED + offset)


def _check(ana, gen, sample, rng, n_exprs, n_samples, depth):
    checked_proofs = 0
    for n in range(n_exprs):
        e = gen.expr(depth)
        envs = [sample(rng) for _ in range(n_samples)]
        s = ana.simplify(e)
        assert s.dtype is e.dtype, f"dtype changed: {e} ({e.dtype}) -> {s} ({s.dtype})"
        lo, hi = ana.const_int_bound(e)
        for env in envs:
            want = evaluate(e, env)
            got = evaluate(s, env)
            assert got == want, (f"seed {SEED} expr #{n}: {e}\n  simplified: {s}\n"
                                 f"  env {({v.name: x for v, x in env.items()})}: "
                                 f"{want} != {got}")
            assert (lo is None or lo <= want) and (hi is None or want <= hi), (
                f"seed {SEED}: bound ({lo}, {hi}) of {e} excludes {want} at "
                f"{({v.name: x for v, x in env.items()})}")
        # prove() and disproofs on a random comparison with this expression
        op = rng.choice(["lt", "le", "gt", "ge", "eq", "ne"])
        other = gen.expr(max(depth - 2, 0)) if rng.random() < 0.5 else gen.const(-5, 40)
        cond = ir.compare(op, e, other)
        proved = ana.prove(cond)
        folded = ana.simplify(cond)
        values = [bool(evaluate(cond, env)) for env in envs]
        if proved:
            checked_proofs += 1
            assert all(values), f"seed {SEED}: proved false claim {cond}"
        if isinstance(folded, ir.Const) and not folded.value:
            assert not any(values), f"seed {SEED}: {cond} folded to False but can hold"
        for env, v in zip(envs, values):
            assert bool(evaluate(folded, env)) == v, f"seed {SEED}: {cond} -> {folded}"
    return checked_proofs


def _bounded_setup(dtype=ir.INT32):
    i, j, k, w, u, v = (ir.Var(n, dtype) for n in ("i", "j", "k", "w", "u", "v"))
    n = ir.Var("n", dtype)
    ana = Analyzer()
    ana.bind(i, 0, 16)
    ana.bind(j, 0, 64)
    ana.bind(k, -8, 16)
    ana.bind_range(w, 1, 50)
    ana.bind_range(u, 0, 8)   # ends exactly at a power of two: off-by-one bait
    ana.bind(v, 0, 4)

    def sample(rng):
        return {i: pick(rng, 0, 15), j: pick(rng, 0, 63), k: pick(rng, -8, 7),
                w: pick(rng, 1, 50), u: pick(rng, 0, 8), v: pick(rng, 0, 3), n: wide_int(rng)}

    return ana, [i, j, k, w, n, u, v], [w, j + 1], sample


def test_fuzz_bounded_int32():
    rng = _seed(0)
    ana, leaves, divs, sample = _bounded_setup()
    gen = ExprGen(rng, leaves, divs)
    proofs = _check(ana, gen, sample, rng, n_exprs=700, n_samples=25, depth=4)
    assert proofs > 10  # the comparisons are not all undecidable


def test_fuzz_deep_expressions():
    rng = _seed(1)
    ana, leaves, divs, sample = _bounded_setup()
    gen = ExprGen(rng, leaves, divs)
    _check(ana, gen, sample, rng, n_exprs=150, n_samples=20, depth=7)


def test_fuzz_int64_with_casts():
    rng = _seed(2)
    ana, leaves32, divs, sample = _bounded_setup()
    big = ir.Var("big", I64)
    leaves = leaves32 + [big]

    def sample64(rng):
        env = sample(rng)
        env[big] = wide_int(rng) * 1000
        return env

    gen = ExprGen(rng, leaves, divs, dtype=I64)
    _check(ana, gen, sample64, rng, n_exprs=300, n_samples=20, depth=4)


@pytest.mark.parametrize("n_bounded", [False, True])
def test_fuzz_symbolic_ranges(n_bounded):
    """p in [0, n), q in [n, n + 8), r in [0, p] with n unknown (or in [1, 5000])."""
    rng = _seed(3 + 100 * n_bounded)
    n, p, q, r = (ir.Var(x) for x in ("n", "p", "q", "r"))
    ana = Analyzer()
    if n_bounded:
        ana.bind_range(n, 1, 5000)
    ana.bind(p, 0, n)
    ana.bind(q, n, 8)
    ana.bind_range(r, 0, p)

    def sample(rng):
        nv = rng.choice([1, 2, 7, 64, 100, rng.randint(1, 5000)])
        pv = pick(rng, 0, nv - 1)
        return {n: nv, p: pv, q: pick(rng, nv, nv + 7), r: pick(rng, 0, pv)}

    gen = ExprGen(rng, [n, p, q, r], [n, p + 1])
    proofs = _check(ana, gen, sample, rng, n_exprs=500, n_samples=25, depth=4)
    assert proofs > 5


def test_fuzz_unbounded():
    """No ranges at all: only unconditional identities may fire."""
    rng = _seed(4)
    x, y = ir.Var("x"), ir.Var("y")
    ana = Analyzer()
    gen = ExprGen(rng, [x, y])
    _check(ana, gen, lambda r: {x: wide_int(r), y: wide_int(r)}, rng, n_exprs=400,
           n_samples=25, depth=4)


def test_fuzz_idempotent():
    """Simplifying a simplified expression changes nothing."""
    rng = _seed(5)
    ana, leaves, divs, _ = _bounded_setup()
    gen = ExprGen(rng, leaves, divs)
    for _ in range(300):
        once = ana.simplify(gen.expr(4))
        twice = ana.simplify(ir.Binary("add", once, ir.const(0), once.dtype)
                             if once.dtype.is_int else once)
        assert ir.structural_equal(once, twice), f"seed {SEED}: {once} -> {twice}"


@pytest.mark.parametrize("offset", [10, 11])
def test_fuzz_fresh_analyzers(offset):
    """Atoms are shared between analyzers; a new analyzer with different ranges must not
    reuse decisions that depended on the previous ranges."""
    rng = _seed(offset)
    i = ir.Var("i")
    for trial in range(40):
        lo = rng.randint(-20, 20)
        ext = rng.randint(1, 40)
        ana = Analyzer()
        ana.bind(i, lo, ext)
        gen = ExprGen(rng, [i])
        _check(ana, gen, lambda r: {i: pick(r, lo, lo + ext - 1)}, rng, n_exprs=15,
               n_samples=10, depth=3)


def test_fuzz_rebinding_and_scopes():
    """Ranges change between questions (bind, rebind, unbind, scopes): cached answers must
    follow the current ranges."""
    rng = _seed(20)
    vs = [ir.Var(f"v{q}") for q in range(4)]
    ana = Analyzer()
    ranges = {}
    stack = []
    for step in range(150):
        r = rng.random()
        v = rng.choice(vs)
        if r < 0.35:
            lo, ext = rng.randint(-10, 10), rng.randint(1, 40)
            ana.bind(v, lo, ext)
            ranges[v] = (lo, lo + ext - 1)
        elif r < 0.45:
            ana.unbind(v)
            ranges.pop(v, None)
        elif r < 0.55 and len(stack) < 3:
            cm = ana.scope()
            cm.__enter__()
            stack.append((cm, dict(ranges)))
        elif r < 0.65 and stack:
            cm, saved = stack.pop()
            cm.__exit__(None, None, None)
            ranges = saved

        def sample(rr):
            return {x: (pick(rr, *ranges[x]) if x in ranges else wide_int(rr)) for x in vs}

        gen = ExprGen(rng, vs)
        _check(ana, gen, sample, rng, n_exprs=4, n_samples=12, depth=3)
