"""Compile-only fuzzing, no GPU needed: generated programs lowered and compiled by NVRTC (or
nvcc) for sm_90a and sm_80, each seed with its pass configs; what the GPU fuzzer
(scripts/device_reliability.py) would call `crash`, `nvrtc` or `rejected_valid` is printed.

    python scripts/compile_fuzz.py 530000 600        # first seed, seconds
    python scripts/compile_fuzz.py 530000 600 --arch sm_90a

Seeds go to sm_90a and sm_80 two to one (`--arch` picks one). The generator writes programs
for an H200, so sm_80 refusing an sm_90 feature it names (TMA, wgmma) is expected, as are
the rejections tilelang/testing/fuzz/known.py lists. Ends with a JSON summary line."""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time
import warnings


def outcome(seed: int, arch: str) -> tuple[str, str]:
    """(outcome, detail) of compiling seed's program for arch with its pass configs."""
    from tilelang.runtime.compiler import CudaCompileError
    from tilelang.testing import fuzz
    from tilelang.testing.fuzz.known import expected_rejection, known_bug

    configs = fuzz.pass_configs_for(seed)
    case = fuzz.generate(seed, None)
    try:
        fuzz.compile_case(case, f"cuda -arch={arch}", configs)
        return "ok", ""
    except Exception as e:  # noqa: BLE001 - every failure is classified
        detail = (f"{case.family} [{fuzz.describe_configs(configs)}] "
                  f"{type(e).__name__}: {e}")[:2000]
        if known_bug(e):
            return "known", detail
        if isinstance(e, CudaCompileError):
            return "nvrtc", detail
        kind = fuzz.classify(e)
        if kind == "rejected" and (expected_rejection(e) or
                                   (arch == "sm_80" and "SM90" in str(e).upper())):
            return "rejected", detail
        return ("rejected_valid" if kind == "rejected" else kind), detail


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("start", type=int, help="first seed")
    ap.add_argument("seconds", type=float)
    ap.add_argument("--arch", choices=("sm_90a", "sm_80"), default=None)
    args = ap.parse_args(argv)
    os.environ.setdefault("TILELANG_CACHE_DIR", tempfile.mkdtemp(prefix="tl-compile-fuzz-"))
    warnings.simplefilter("ignore")  # the generator's programs warn by design
    counts: collections.Counter = collections.Counter()
    deadline = time.time() + args.seconds
    seed = args.start
    while time.time() < deadline:
        arch = args.arch or ("sm_80" if seed % 3 == 0 else "sm_90a")
        kind, detail = outcome(seed, arch)
        counts[kind] += 1
        if kind not in ("ok", "rejected", "known"):
            print(f"{kind.upper()} seed {seed} {arch}: {detail}", flush=True)
        seed += 1
    print(json.dumps({"first_seed": args.start, "next_seed": seed, **counts}), flush=True)
    bad = sum(n for k, n in counts.items() if k not in ("ok", "rejected", "known"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
