"""Lowering time, or the warm load, of two source trees side by side: a change to the
compiler's own speed measured against the tree before it.

    git worktree add /tmp/before <commit>        # or: git archive <commit> | tar x -C DIR
    python benchmarks/lowering_ab.py /tmp/before . [--rounds 5] [--only aw_gemm,aw_flash]
    python benchmarks/lowering_ab.py /tmp/before . --warm [--rounds 4 --children 3]

Each round runs fresh processes per kernel and tree, alternating the trees, so machine drift
falls on both. A process imports tilelang from its tree (with warm bytecode: one discarded
round fills a private pycache first) and traces the kernel (compile_time.py's programs, taken
from each tree's own benchmarks/).

Lowering (default; no NVRTC, no GPU): the process lowers the program three times:
  trace   the first trace of the program;
  cold    the first lowering: what a new kernel costs in a new process, the compiler's
          imports and per-process tables included (the `lower` column of compile_time.py);
  steady  the third lowering: the passes alone.
The generated code should be the same in both trees (check with scripts/dump_cuda.py diff)
for the comparison to mean what it says.

`--warm`: the discarded round also compiles each kernel into a disk cache of its tree, and
`--children` processes per round and tree then find it there (engine/program_cache.py; a
process that does not is an error). Each starts the CUDA driver where there is one (through
ctypes: no tilelang module is imported for it), imports tilelang and the program's module,
collects garbage, then times:
  trace   tracing the program, the first time in the process;
  load    tilelang.compile of it: key, cache entry, cubin, adapter, and the imports these need;
  warm    trace + load: the first kernel of a process (compile_time.py's `warm` column);
  next    trace + load once more in the same process.
Medians over the rounds, in ms.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def child(tree: str, name: str) -> dict:
    os.environ["TILELANG_DISABLE_CACHE"] = "1"
    ct = _import_tree(tree, name)
    from tilelang.engine.build import lower_cuda
    from tilelang.jit.target import parse_target

    out = {}
    for i in range(3):
        t0 = time.perf_counter()
        func, options = ct.program(name)
        t1 = time.perf_counter()
        lower_cuda(func, parse_target(ct.KERNELS[name][1]), options)
        t2 = time.perf_counter()
        if i == 0:
            out.update(trace=(t1 - t0) * 1e3, cold=(t2 - t1) * 1e3)
    out["steady"] = (t2 - t1) * 1e3
    return out


def warm_child(tree: str, name: str, fill: bool) -> dict:
    import ctypes

    try:  # the driver started as a program running kernels has it (compile_time.py's `drv`)
        ctypes.CDLL("libcuda.so.1").cuInit(0)
    except (OSError, AttributeError):
        pass
    ct = _import_tree(tree, name)
    import tilelang

    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        func, options = ct.program(name)
        t1 = time.perf_counter()
        kernel = tilelang.compile(func, target=ct.KERNELS[name][1], **options)
        t2 = time.perf_counter()
        if not fill and not getattr(kernel.adapter, "program_cache_hit", False):
            raise SystemExit(f"{name}: not loaded from the program cache in {tree}")
        times.append((t1 - t0, t2 - t1))
    (trace, load), (trace2, load2) = times
    return {"trace": trace * 1e3, "load": load * 1e3, "warm": (trace + load) * 1e3,
            "next": (trace2 + load2) * 1e3}


def _import_tree(tree: str, name: str):
    """compile_time.py of `tree`, with `tree`'s tilelang imported and the kernel's module."""
    sys.path[:0] = [tree, os.path.join(tree, "benchmarks")]
    import compile_time as ct

    import tilelang

    assert tilelang.__file__.startswith(tree), tilelang.__file__
    ct.kernel_module(name)
    gc.collect()
    return ct


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", nargs="?")
    ap.add_argument("after", nargs="?")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="aw_gemm,gemm_sm90,aw_flash,flash_sm90",
                    help="compile_time.py kernel names")
    ap.add_argument("--warm", action="store_true", help="time loading from the disk cache")
    ap.add_argument("--children", type=int, default=1,
                    help="processes per kernel, tree and round (--warm)")
    ap.add_argument("--json", help="write every process's row here (JSON lines)")
    ap.add_argument("--child", nargs=3, metavar=("TREE", "KERNEL", "MODE"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        tree, name, mode = args.child
        print(json.dumps(child(tree, name) if mode == "lower" else
                         warm_child(tree, name, fill=mode == "fill")))
        return 0
    if not (args.before and args.after):
        ap.error("give the two trees: BEFORE AFTER")
    trees = [os.path.abspath(args.before), os.path.abspath(args.after)]
    names = args.only.split(",")
    work = tempfile.mkdtemp(prefix="tl-lowering-ab-")
    env = dict(os.environ, PYTHONPYCACHEPREFIX=os.path.join(work, "pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("TILELANG_DISABLE_CACHE", None)
    metrics = ("trace", "load", "warm", "next") if args.warm else ("trace", "cold", "steady")
    rows: dict = {}
    lines = []
    for r in range(args.rounds + 1):  # round 0 fills the bytecode caches (and, warm, the cache)
        for n in names:
            for t in (trees if r % 2 else trees[::-1]):
                env["TILELANG_CACHE_DIR"] = os.path.join(work, f"cache{trees.index(t)}")
                mode = "lower" if not args.warm else "fill" if r == 0 else "load"
                for _ in range(1 if r == 0 else args.children):
                    p = subprocess.run([sys.executable, __file__, "--child", t, n, mode],
                                       capture_output=True, text=True, env=env)
                    if p.returncode:
                        print(p.stderr[-2000:])
                        return 1
                    if r:
                        row = json.loads(p.stdout.splitlines()[-1])
                        rows.setdefault((n, t), []).append(row)
                        lines.append(dict(row, kernel=n, tree=t, round=r))
    shutil.rmtree(work, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            f.writelines(json.dumps(x) + "\n" for x in lines)
    print(f"{'kernel':12s} {'tree':32s} " + " ".join(f"{m:>6s}" for m in metrics)
          + f"  (ms, medians of {args.rounds} rounds x {args.children if args.warm else 1})")
    for (n, t), rs in sorted(rows.items(), key=lambda kv: (names.index(kv[0][0]),
                                                           trees.index(kv[0][1]))):
        print(f"{n:12s} {t[-32:]:32s} "
              + " ".join(f"{statistics.median(x[m] for x in rs):6.1f}" for m in metrics))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
