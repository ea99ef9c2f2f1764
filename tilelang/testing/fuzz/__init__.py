"""Differential fuzzing of the compiler: random valid tile programs with a numpy oracle.

    from tilelang.testing import fuzz
    case = fuzz.generate(seed=3)            # or fuzz.generate(3, family="gemm")
    inputs = case.make_inputs(np.random.default_rng(0))
    want = fuzz.expected(case, inputs)      # numpy, from the description only
    got = fuzz.run_case(case, "cpu", inputs)
    assert not fuzz.check(case, got, want), case.source

Families (one module each): "ew" element-wise chains with offsets/broadcasting, "reduce"
reductions over either axis (pipelined accumulation, softmax-style broadcasts), "gemm" all
transposes and dtypes with pipelined k-loops, "atomic" atomics (scalar, tile, block-level),
"gather" im2col gathers into shared tiles inside pipelined GEMMs (async zero-fill copies),
"conv2d" 2-D convolutions through `T.c2d_im2col` (TMA in im2col mode on sm_90a where it
applies), "persistent" the GEMMs in a `T.Persistent` tile loop, "odd_tiles" the GEMMs with N
tiles that are not powers of two (24 to 112 columns), "fragments" fragments indexed by serial
and runtime indices, read outside T.Parallel, register gemm operands, lets used by several
pipelined copies and fp8 casts (fam_fragments.py).
`generate(seed)` is deterministic: the same seed gives the same program and inputs on every
machine, so a failing seed is a reproducer (and `case.source` is the program text).

Pass configs: `pass_configs_for(seed)` is the set of optimisation switches (`VARIED_CONFIGS`)
the seed is compiled with when a runner varies them (`scripts/device_reliability.py
--vary-configs`, `scripts/fuzz_family.py --vary-configs`): {} for about half the seeds, else
1-3 switches, drawn from a stream of its own so programs and inputs stay the same.
`compile_case(case, target, pass_configs)` compiles with them; `reproduce(seed, family, target,
pass_configs)` reruns one case and returns its mismatches (run.py's docstring has the commands).
"""

from __future__ import annotations

import numpy as np

from .case import Case, Param, agree, check, load, write_source  # noqa: F401
from .run import (VARIED_CONFIGS, classify, compile_case, describe_configs, expected,  # noqa: F401
                  parse_configs, pass_configs_for, reproduce, run_case, run_kernel)
from . import (fam_atomic, fam_conv2d, fam_elementwise, fam_fragments, fam_gather, fam_gemm,
               fam_reduce)

__all__ = ["Case", "Param", "FAMILIES", "generate", "load", "write_source", "check", "agree",
           "expected", "run_case", "run_kernel", "compile_case", "classify", "VARIED_CONFIGS",
           "pass_configs_for", "describe_configs", "parse_configs", "reproduce"]

FAMILIES = {
    "ew": fam_elementwise.sample,
    "reduce": fam_reduce.sample,
    "gemm": fam_gemm.sample,
    "atomic": fam_atomic.sample,
    "gather": fam_gather.sample,
    "conv2d": fam_conv2d.sample,
    "persistent": fam_gemm.sample_persistent,
    "odd_tiles": fam_gemm.sample_odd_tiles,
    "fragments": fam_fragments.sample,
}
# how often each family is drawn when none is asked for
WEIGHTS = {"ew": 0.35, "reduce": 0.25, "gemm": 0.25, "atomic": 0.15}


# families added later are drawn from a stream of their own, so the seeds of every earlier
# finding keep their programs (the checked-in regression seeds stay valid)
LATER = {"gather": 0.12}
_LATER_STREAM = 0x6A1
# and each later one from its own stream after that (conv2d, persistent, odd_tiles:
# 2026-11-22; odd_tiles on 0x6A5 because 0x6A4 would have taken finding 192125; fragments on
# 0x6B7, the first stream that takes none of the compile seeds 0..13, the findings or the
# seeds test_fuzz_configs pins)
LATEST = {"conv2d": (0.08, 0x6A2), "persistent": (0.06, 0x6A3), "odd_tiles": (0.06, 0x6A5),
          "fragments": (0.08, 0x6B7)}


def generate(seed: int, family: str | None = None) -> Case:
    """The program of `seed` (from `family`, or a family drawn from the seed)."""
    rng = np.random.default_rng([seed, 0x7113])
    if family is None:
        names = list(WEIGHTS)
        family = names[int(rng.choice(len(names), p=[WEIGHTS[n] for n in names]))]
        u = np.random.default_rng([seed, _LATER_STREAM]).random()
        for name, weight in LATER.items():
            if u < weight:
                family = name
                break
            u -= weight
        for name, (weight, stream) in LATEST.items():  # the first one drawn takes the seed
            if np.random.default_rng([seed, stream]).random() < weight:
                family = name
                break
    return FAMILIES[family](rng, seed)
