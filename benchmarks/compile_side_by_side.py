"""Cold compile time of the same programs under this project and under the reference TileLang,
each in fresh processes, on one machine (needs a GPU: the reference compiles only there).

    python benchmarks/compile_side_by_side.py --reference /tmp/tlsite [--runs 3]
                                              [--only aw_gemm,aw_flash]

The programs are benchmarks/compile_time.py's `aw_*` ones: benchmarks/as_written.py's programs,
written with the API both share. Each child
imports `tilelang` (ours, or the reference with PYTHONPATH=REFERENCE), imports the program's
module and torch, starts the CUDA driver and collects garbage (not timed: a program that runs
kernels pays both anyway), then times tracing the program and `tilelang.compile(func,
target="cuda")` with tilelang's cache off. Both implementations import from a warm private
bytecode cache (one discarded child each fills it), as installed packages do, and the CUDA
driver's cache is off (CUDA_CACHE_DISABLE=1): where a driver is installed, NVRTC keeps device
code there and a later process compiling the same kernel would skip NVVM and ptxas (nvcc,
which the reference runs, keeps none). Children alternate between the two implementations.
Medians in ms.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def child(name: str) -> dict:
    import gc
    import time

    os.environ["TILELANG_DISABLE_CACHE"] = "1"
    t0 = time.perf_counter()
    import tilelang

    import_s = time.perf_counter() - t0
    if hasattr(tilelang, "disable_cache"):
        tilelang.disable_cache()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import compile_time  # after tilelang: it puts this project on sys.path
    import torch

    compile_time.kernel_module(name)
    torch.zeros(1, device="cuda")  # the driver and a context: not the compiler's cost
    gc.collect()  # the collection torch's import left owing
    t0 = time.perf_counter()
    func, _ = compile_time.program(name)
    t1 = time.perf_counter()
    tilelang.compile(func, target="cuda")
    t2 = time.perf_counter()
    return {"import": import_s, "trace": t1 - t0, "compile": t2 - t1,
            "tilelang": tilelang.__file__}


def run_child(name: str, pythonpath: str, pycache: str) -> dict:
    env = dict(os.environ, PYTHONPATH=pythonpath, PYTHONPYCACHEPREFIX=pycache,
               CUDA_CACHE_DISABLE="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    p = subprocess.run([sys.executable, __file__, "--child", name], capture_output=True,
                       text=True, env=env, cwd=str(ROOT))
    if p.returncode != 0:
        raise RuntimeError(f"{name} ({pythonpath}): child failed\n{p.stdout}\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", required=False, default="",
                    help="directory whose `tilelang` is the reference (e.g. /tmp/tlsite)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="aw_gemm,aw_flash",
                    help="comma-separated; any of compile_time.py's aw_* kernels")
    ap.add_argument("--child", default="")
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    if not args.reference:
        ap.error("--reference DIR is required")
    impls = {"ours": str(ROOT), "reference": os.path.abspath(args.reference)}
    names = args.only.split(",")
    if any(not n.startswith("aw_") for n in names):
        ap.error("--only: the aw_* kernels of compile_time.py (programs both implementations run)")
    caches = {k: tempfile.mkdtemp(prefix=f"tl-side-{k}-") for k in impls}
    for name in names:  # fill each implementation's bytecode cache
        for impl, path in impls.items():
            run_child(name, path, caches[impl])
    rows = {(n, i): [] for n in names for i in impls}
    for _ in range(args.runs):
        for name in names:
            for impl, path in impls.items():
                r = run_child(name, path, caches[impl])
                if impl == "reference" and Path(r["tilelang"]).resolve().is_relative_to(ROOT):
                    raise SystemExit(f"--reference {args.reference} did not select another "
                                     f"tilelang (got {r['tilelang']})")
                rows[(name, impl)].append(r)
    print(f"medians of {args.runs} processes, ms; the driver's cache off; warm bytecode")
    print(f"{'program':16s} {'impl':10s} {'import':>7s} {'trace':>6s} {'compile':>8s}")
    med = {}
    for (name, impl), rs in rows.items():
        m = {k: statistics.median(r[k] for r in rs) * 1e3 for k in ("import", "trace",
                                                                        "compile")}
        med[(name, impl)] = m
        print(f"{name:16s} {impl:10s} {m['import']:7.0f} {m['trace']:6.1f} {m['compile']:8.0f}")
    for name in names:
        o, r = med[(name, "ours")], med[(name, "reference")]
        print(f"{name:16s} trace + compile: the reference / ours = "
              f"{(r['trace'] + r['compile']) / (o['trace'] + o['compile']):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
