"""Seeded differential fuzzing on the CPU: random valid tile programs (tilelang.testing.fuzz)
run on the interpreter and compared with a numpy oracle computed from the program's
description alone. Also checks that the oracle can fail (a wrong result is caught) and that the
seeded corpus covers every feature the generator knows about."""

from __future__ import annotations

import numpy as np
import pytest

from tilelang.errors import KernelError
from tilelang.testing import fuzz
from tilelang.testing.fuzz.known import known_bug

SEEDS = {"ew": range(0, 36), "reduce": range(0, 26), "gemm": range(0, 16),
         "atomic": range(0, 18), "gather": range(0, 12), "conv2d": range(0, 8)}
CASES = [(f, s) for f, seeds in SEEDS.items() for s in seeds]


def _run_interp(case, inputs):
    try:
        return fuzz.run_case(case, "cpu", inputs)
    except KernelError as e:
        bug = known_bug(e)
        if bug:
            pytest.xfail(f"known defect {bug}")
        raise AssertionError(f"the interpreter rejected a valid program:\n{e}\n\n"
                             f"{case.source}") from e


@pytest.mark.parametrize("family,seed", CASES, ids=[f"{f}-{s}" for f, s in CASES])
def test_interpreter_matches_oracle(family, seed):
    case = fuzz.generate(seed, family)
    inputs = case.make_inputs(np.random.default_rng(seed))
    want = fuzz.expected(case, inputs)
    got = _run_interp(case, inputs)
    problems = fuzz.check(case, got, want)
    assert not problems, "\n".join(problems) + "\n\n" + case.source


def test_generation_is_deterministic():
    for seed in (0, 7, 123):
        a, b = fuzz.generate(seed), fuzz.generate(seed)
        assert a.source == b.source and a.family == b.family
        ia = a.make_inputs(np.random.default_rng(1))
        ib = b.make_inputs(np.random.default_rng(1))
        assert ia.keys() == ib.keys()
        assert all(np.array_equal(ia[k], ib[k]) for k in ia)
    assert len({fuzz.generate(s).source for s in range(30)}) == 30


@pytest.mark.parametrize("family,seed", [("ew", 3), ("reduce", 4), ("gemm", 2), ("atomic", 0),
                                         ("gather", 1), ("conv2d", 2)])
def test_oracle_catches_wrong_results(family, seed):
    """A result off by more than the rounding bound in one element, or computed from other
    inputs, must be reported: the comparison is not vacuous."""
    case = fuzz.generate(seed, family)
    inputs = case.make_inputs(np.random.default_rng(seed))
    want = fuzz.expected(case, inputs)
    got = _run_interp(case, inputs)
    assert not fuzz.check(case, got, want)
    for name, (value, tol) in want.items():
        bad = {k: np.array(v, copy=True) for k, v in got.items()}
        idx = tuple(s // 2 for s in value.shape)
        t = float(np.broadcast_to(tol, value.shape)[idx])
        bad[name][idx] += max(3 * t, 1e-3 * max(1.0, abs(float(value[idx]))), 1)
        assert fuzz.check(case, bad, want), f"a wrong element of {name} went unnoticed"
    other = case.make_inputs(np.random.default_rng(seed + 1000))
    assert fuzz.check(case, got, fuzz.expected(case, other)), \
        "results of other inputs went unnoticed"


def test_seeded_corpus_covers_the_generator():
    """The CI seeds exercise every family feature that matters (so a generator change that
    stops producing, say, transposed gemms is noticed)."""
    feats = set()
    for family, seed in CASES:
        feats.update(fuzz.generate(seed, family).features)
    extra = set()
    for seed in range(400):  # the wider corpus the device script draws from
        extra.update(fuzz.generate(seed).features)
    required = {"elementwise", "broadcast", "dynamic", "reduce", "dim0", "dim1", "gemm",
                "pipelined", "serial", "atomic", "trans00", "trans01", "trans10", "trans11",
                "a_regs", "a_shared", "clear_false", "tmp", "block_atomic", "split", "colsum",
                "gather", "predicated_gather", "conv2d", "channels_per_tile"}
    assert required <= feats, f"CI seeds miss {sorted(required - feats)}"
    dtypes = {"gemm_float16_float32", "gemm_float16_float16", "gemm_bfloat16_float32",
              "gemm_float32_float32", "gemm_int8_int32", "gemm_float8_e4m3_float32",
              "gemm_float8_e5m2_float32"}
    assert dtypes <= feats | extra, f"the generator never draws {sorted(dtypes - feats - extra)}"
    assert {"g2g", "region", "shared", "parallel"} <= feats | extra
    tiles = {f for f in feats if f.startswith("tile")}
    assert any(t.endswith(("x1", "x3", "x5")) for t in tiles), "no odd-width fragments"
