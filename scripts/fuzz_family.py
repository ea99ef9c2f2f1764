"""Differential fuzzing of one family on the GPU, in this process (the device script draws
families by weight; this one aims at a new feature):

    python scripts/fuzz_family.py conv2d 0 300      # family, first seed, count

Prints one line per mismatch or failure (seed, reason) and a summary with how many programs
used each marker string of interest in their CUDA (e.g. tl::tma_load_im2col)."""

import sys
import time

import numpy as np

from tilelang.testing import fuzz


def main():
    family, start, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    marker = sys.argv[4] if len(sys.argv) > 4 else "tl::tma_load_im2col("
    ok = bad = rejected = marked = 0
    t0 = time.time()
    for seed in range(start, start + count):
        case = fuzz.generate(seed, family)
        inputs = case.make_inputs(np.random.default_rng(seed))
        try:
            kernel = fuzz.compile_case(case, "cuda")
            marked += marker in kernel.get_kernel_source()
            got = fuzz.run_kernel(case, kernel, inputs, device="cuda")
        except Exception as e:  # noqa: BLE001 - report and go on
            kind = fuzz.classify(e)
            if kind == "rejected":
                rejected += 1
                continue
            bad += 1
            print(f"seed {seed}: {kind}: {str(e).splitlines()[0][:200]}", flush=True)
            continue
        problems = fuzz.check(case, got, fuzz.expected(case, inputs))
        if problems:
            bad += 1
            print(f"seed {seed}: mismatch: {problems[0][:200]}", flush=True)
        else:
            ok += 1
    print(f"{family}: {count} seeds from {start}: {ok} ok, {bad} bad, {rejected} rejected; "
          f"{marked} used {marker!r}; {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
