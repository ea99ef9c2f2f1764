"""Which part of fast math the FlashAttention forward as written pays for: the kernel of
benchmarks/as_written.py (B8 H32 S4096 D128 fp16, 128x128 tiles, 2 stages, 256 threads) built
four ways, timed interleaved in one process with SDPA:

  accurate       the default: T.exp2 is exp2f (it rescales results that would be subnormal:
                 4 instructions), the epilogue's division is IEEE division
  fast_exp2      the same source with tl::exp2 -> tl::fast_exp2 (one ex2.approx.ftz)
  fast_exp2_div  and the epilogue's `acc_o[i] / logsum[r]` as __fdividef
  fast_math      pass_configs={"tl.enable_fast_math": True}, as the reference's attention
                 examples compile it

    python benchmarks/sweeps/flash_fast_math.py [--rounds 10] [--no-causal]

The two middle variants rewrite the generated CUDA (tilelang.engine.callback); they exist to
measure, not to use. One line per variant: median of the rounds' medians (15 calls a round,
L2 flushed before each, the variants' order reversed every other round), SDPA / ours, and
each round's median. 2026-11-27 (H200): accurate 0.93x of SDPA, fast_exp2 0.98x, fast_math
1.00x; causal 0.92x, 0.99x, 1.03x (docs/perf.md, twenty-second session).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import as_written  # noqa: E402
import tilelang  # noqa: E402
from bench_core import _samples  # noqa: E402
from tilelang.engine import callback  # noqa: E402

_DIVISION = re.compile(r"(\w+\[\w+\]) = (\w+\[\w+\]) / (\w+\[[^;]+\]);")


def _fast_exp2(code, target):
    out = code.replace("tl::exp2(", "tl::fast_exp2(")
    assert out != code, "no tl::exp2 in the kernel"
    return out


def _fast_exp2_div(code, target):
    out = _DIVISION.sub(r"\1 = __fdividef(\2, \3);", _fast_exp2(code, target))
    assert "__fdividef" in out, "no division in the kernel"
    return out


VARIANTS = [  # name, pass configs, source rewrite
    ("accurate", {}, None),
    ("fast_exp2", {}, _fast_exp2),
    ("fast_exp2_div", {}, _fast_exp2_div),
    ("fast_math", {"tl.enable_fast_math": True}, None),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--no-causal", action="store_true")
    args = ap.parse_args()
    tilelang.disable_cache()
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    for causal in (False,) if args.no_causal else (False, True):
        torch.manual_seed(0)
        func, out_idx, inputs, ref, _, sdpa = as_written.case_flash(
            8, 32, 4096, 128, causal, 128, 128, 2, 256)
        want = ref()
        fns = {}
        for name, configs, rewrite in VARIANTS:
            if rewrite is not None:
                callback.register_cuda_postproc(rewrite)
            try:
                kernel = tilelang.compile(func, out_idx=out_idx, target="cuda",
                                          pass_configs=configs)
            finally:
                callback.unregister_postproc("cuda")
            got = kernel(*inputs).float()
            err = ((got - want).norm() / want.norm()).item()
            assert err < 1e-3, f"{name}: relative error {err:.3g}"
            fns[name] = lambda kernel=kernel: kernel(*inputs)
        fns["sdpa"] = sdpa
        for fn in fns.values():
            for _ in range(5):
                fn()
        rounds = {name: [] for name in fns}
        for r in range(args.rounds):
            order = list(fns.items())[::-1 if r % 2 else 1]
            for name, fn in order:
                rounds[name].append(statistics.median(_samples(fn, 15)))
        med = {name: statistics.median(v) for name, v in rounds.items()}
        for name, ms in med.items():
            print(f"{'causal' if causal else 'full':6} {name:14} {ms:.4f} ms  "
                  f"SDPA/ours {med['sdpa'] / ms:.3f}  rounds {[round(x, 3) for x in rounds[name]]}",
                  flush=True)


if __name__ == "__main__":
    main()
