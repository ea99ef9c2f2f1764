"""Lowering time of two source trees side by side: a change to the compiler's own speed
measured against the tree before it, with no NVRTC and no GPU.

    git worktree add /tmp/before <commit>        # or: git archive <commit> | tar x -C DIR
    python benchmarks/lowering_ab.py /tmp/before . [--rounds 5] [--only aw_gemm,aw_flash]

Each round runs one fresh process per kernel and tree, alternating the trees, so machine
drift falls on both. A process imports tilelang from its tree (with warm bytecode: one
discarded round fills a private pycache first), traces the kernel (compile_time.py's
programs, taken from each tree's own benchmarks/) and lowers it three times:
  trace   the first trace of the program;
  cold    the first lowering: what a new kernel costs in a new process, the compiler's
          imports and per-process tables included (the `lower` column of compile_time.py);
  steady  the third lowering: the passes alone.
Medians over the rounds, in ms. The generated code should be the same in both trees (check
with scripts/dump_cuda.py diff) for the comparison to mean what it says.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def child(tree: str, name: str) -> dict:
    os.environ["TILELANG_DISABLE_CACHE"] = "1"
    sys.path[:0] = [tree, os.path.join(tree, "benchmarks")]
    import compile_time as ct

    import tilelang  # noqa: F401
    from tilelang.jit.target import parse_target

    assert tilelang.__file__.startswith(tree), tilelang.__file__
    ct.kernel_module(name)
    gc.collect()
    out = {}
    for i in range(3):
        t0 = time.perf_counter()
        func, options = ct.program(name)
        t1 = time.perf_counter()
        from tilelang.engine.build import lower_cuda

        lower_cuda(func, parse_target(ct.KERNELS[name][1]), options)
        t2 = time.perf_counter()
        if i == 0:
            out.update(trace=(t1 - t0) * 1e3, cold=(t2 - t1) * 1e3)
    out["steady"] = (t2 - t1) * 1e3
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", nargs="?")
    ap.add_argument("after", nargs="?")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="aw_gemm,gemm_sm90,aw_flash,flash_sm90",
                    help="compile_time.py kernel names")
    ap.add_argument("--child", nargs=2, metavar=("TREE", "KERNEL"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    if not (args.before and args.after):
        ap.error("give the two trees: BEFORE AFTER")
    trees = [os.path.abspath(args.before), os.path.abspath(args.after)]
    names = args.only.split(",")
    env = dict(os.environ, PYTHONPYCACHEPREFIX=tempfile.mkdtemp(prefix="tl-lowering-ab-"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    rows: dict = {}
    for r in range(args.rounds + 1):  # round 0 fills the bytecode caches
        for n in names:
            for t in trees:
                p = subprocess.run([sys.executable, __file__, "--child", t, n],
                                   capture_output=True, text=True, env=env)
                if p.returncode:
                    print(p.stderr[-2000:])
                    return 1
                if r:
                    rows.setdefault((n, t), []).append(json.loads(p.stdout.splitlines()[-1]))
    print(f"{'kernel':12s} {'tree':32s} {'trace':>6s} {'cold':>6s} {'steady':>6s}"
          f"  (ms, medians of {args.rounds})")
    for (n, t), rs in rows.items():
        m = {k: statistics.median(x[k] for x in rs) for k in ("trace", "cold", "steady")}
        print(f"{n:12s} {t[-32:]:32s} {m['trace']:6.1f} {m['cold']:6.1f} {m['steady']:6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
