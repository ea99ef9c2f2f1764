"""Differential fuzzing of one family on the GPU, in this process (the device script draws
families by weight; this one aims at a new feature):

    python scripts/fuzz_family.py conv2d 0 300      # family, first seed, count
    python scripts/fuzz_family.py gemm 0 300 --vary-configs     # each seed with its pass configs
    python scripts/fuzz_family.py auto 1234 1 --configs 'tl.disable_wgmma'   # reproduce one

`auto` draws the family from the seed, as scripts/device_reliability.py does (so its findings
reproduce here). --vary-configs compiles each seed with `fuzz.pass_configs_for(seed)`;
--configs compiles every seed with the given set (a `fuzz.describe_configs` line, '' for the
defaults). --target cpu runs the interpreter instead (a check of this script without a GPU).

Prints one line per mismatch or failure (seed, configs, reason) and a summary with how many
programs used each marker string of interest in their CUDA (e.g. tl::tma_load_im2col) and how
many ran with non-default pass configs."""

import argparse
import time

import numpy as np

from tilelang.testing import fuzz
from tilelang.testing.fuzz.known import expected_rejection


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("family", help=f"one of {sorted(fuzz.FAMILIES)}, or 'auto'")
    ap.add_argument("start", type=int, help="first seed")
    ap.add_argument("count", type=int, help="number of seeds")
    ap.add_argument("marker", nargs="?", default="tl::tma_load_im2col(",
                    help="count the programs whose generated source contains this")
    ap.add_argument("--vary-configs", action="store_true",
                    help="compile each seed with its drawn pass configs")
    ap.add_argument("--configs", default=None,
                    help="compile every seed with these pass configs ('' = defaults)")
    ap.add_argument("--target", default="cuda", help="'cuda' (default), 'cuda -arch=..' or 'cpu'")
    return ap.parse_args(argv)


def configs_for(seed, args) -> dict:
    if args.configs is not None:
        return fuzz.parse_configs(args.configs)
    return fuzz.pass_configs_for(seed) if args.vary_configs else {}


def main(argv=None):
    args = parse_args(argv)
    family = None if args.family == "auto" else args.family
    device = "cpu" if args.target == "cpu" else "cuda"
    ok = bad = rejected = marked = varied = 0
    t0 = time.time()
    for seed in range(args.start, args.start + args.count):
        case = fuzz.generate(seed, family)
        configs = configs_for(seed, args)
        varied += bool(configs)
        tag = f"seed {seed} {case.family} [{fuzz.describe_configs(configs)}]"
        inputs = case.make_inputs(np.random.default_rng(seed))
        try:
            kernel = fuzz.compile_case(case, args.target, configs)
            marked += args.marker in (kernel.get_kernel_source() or "")
            got = fuzz.run_kernel(case, kernel, inputs, device=device)
        except Exception as e:  # noqa: BLE001 - report and go on
            kind = fuzz.classify(e)
            if kind == "rejected" and expected_rejection(e):
                rejected += 1
                continue
            if kind == "rejected":
                kind = "rejected_valid"  # generated programs are valid: a defect
            bad += 1
            print(f"{tag}: {kind}: {str(e).splitlines()[0][:200]}", flush=True)
            continue
        problems = fuzz.check(case, got, fuzz.expected(case, inputs))
        if problems:
            bad += 1
            print(f"{tag}: mismatch: {problems[0][:200]}", flush=True)
        else:
            ok += 1
    print(f"{args.family}: {args.count} seeds from {args.start}: {ok} ok, {bad} bad, "
          f"{rejected} rejected; {varied} with non-default pass configs; {marked} used "
          f"{args.marker!r}; {time.time() - t0:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
