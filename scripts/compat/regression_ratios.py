"""Kernel-time ratios of the reference's regression functions, the reference against this
project, from `regression_profile.py` rows measured in the same device call(s):

    python scripts/compat/regression_ratios.py DIR...

Each DIR holds `profile_ref_*.jsonl` and `profile_ours_*.jsonl` (one pair per example
directory, as scripts/device_regression.sh writes them; files named `<call>_profile_...` as
kept in docs/measurements/ are read too). A function's time is the sum of its kernels' GPU
times (torch.profiler, memcpys left out); the ratio is reference / ours (above 1: ours is
faster); prints the geometric mean, the functions below 0.95 and every row."""

from __future__ import annotations

import glob
import json
import math
import os
import sys


def kernel_times(paths) -> dict:
    """{function: µs of its kernels} of the rows that ran."""
    out = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if not row.get("ok"):
                    continue
                kernels = [k for run in row["runs"] for k in run.get("kernels", [])
                           if not str(k[0]).startswith("Memcpy") and isinstance(k[1], (int, float))]
                if kernels:
                    out[row["fn"]] = sum(k[1] for k in kernels)
    return out


def side(dirs, label):
    return kernel_times(sorted(p for d in dirs for p in glob.glob(os.path.join(d, f"*profile_{label}_*.jsonl"))))


def main(dirs):
    ref, ours = side(dirs, "ref"), side(dirs, "ours")
    rows = sorted((ref[f] / ours[f], f, ref[f], ours[f]) for f in ours if f in ref)
    if not rows:
        print("no function ran on both sides")
        return 1
    geomean = math.exp(sum(math.log(r) for r, *_ in rows) / len(rows))
    print(f"{len(rows)} functions on both sides: geomean {geomean:.3f}x")
    print("below 0.95x:", ", ".join(f"{f[len('regression_'):]} {r:.3f}x" for r, f, *_ in rows
                                   if r < 0.95) or "none")
    for r, f, a, b in rows:
        print(f"  {f[len('regression_'):][:50]:50} reference {a:9.1f} µs  ours {b:9.1f} µs  {r:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
