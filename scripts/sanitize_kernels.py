#!/usr/bin/env python
"""Kernels for compute-sanitizer, and the summary of its logs (used by scripts/sanitize.sh).

    python scripts/sanitize_kernels.py run [--fuzz N] [--size small]
        runs every example's kernels (examples/*/example_*.py, `run("cuda", size)`), every
        kernel builder of tests/gpu/kernels.py at small ragged sizes, and the first N fuzz
        programs that compile; before each it prints a marker line `@@ kernel <name>` so
        sanitizer reports can be attributed (run it under compute-sanitizer);
    python scripts/sanitize_kernels.py summarize LOG... [--json FILE]
        parses compute-sanitizer logs (the runner's or pytest -v -s output under the
        sanitizer) into reports per tool and per kernel/test, prints a table, writes JSON.
"""

import argparse
import json
import os
import re
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
MARK = "@@ kernel "


def _mark(name):
    print(f"{MARK}{name}", flush=True)


def _sync():
    import torch

    torch.cuda.synchronize()


# ==== runner ======================================================================================

def run_examples(size):
    import importlib.util
    from pathlib import Path

    for path in sorted((Path(ROOT) / "examples").glob("*/example_*.py")):
        name = f"example {path.parent.name}/{path.stem}"
        _mark(name)
        try:
            spec = importlib.util.spec_from_file_location(f"san_{path.stem}", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            for case in mod.run("cuda", size):
                _mark(f"{name}:{case.get('name', '?')}")
                case["tilelang"]()
                _sync()
        except Exception as e:  # noqa: BLE001 - keep going: the sanitizer run is the point
            print(f"@@ failed {name}: {type(e).__name__}: {str(e)[:300]}", flush=True)


def run_gpu_kernels():
    """The builders of tests/gpu/kernels.py at small, ragged sizes."""
    import torch

    sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
    import kernels as K

    import tilelang

    dev = "cuda"
    h = torch.float16
    jobs = [
        ("vector_add", lambda: K.vector_add(1000), lambda: [torch.randn(1000, device=dev)] * 3),
        ("softmax", lambda: K.softmax(50, 64),
         lambda: [torch.randn(50, 64, device=dev, dtype=h), torch.empty(50, 64, device=dev,
                                                                       dtype=h)]),
        ("flash_fwd", lambda: K.flash_fwd(1, 2, 128, 64, is_causal=True),
         lambda: [torch.randn(1, 128, 2, 64, device=dev, dtype=h) for _ in range(4)]),
        ("gemv", lambda: K.gemv(200, 256),
         lambda: [torch.randn(256, device=dev, dtype=h), torch.randn(200, 256, device=dev,
                                                                     dtype=h),
                  torch.empty(200, device=dev, dtype=h)]),
        ("cumsum", lambda: K.cumsum_k(40, 64),
         lambda: [torch.randn(40, 64, device=dev), torch.empty(40, 64, device=dev)]),
        ("gemm", lambda: K.gemm(100, 72, 80, 64, 64, 32),
         lambda: [torch.randn(100, 80, device=dev, dtype=h), torch.randn(80, 72, device=dev,
                                                                         dtype=h),
                  torch.empty(100, 72, device=dev)]),
        ("gemm_tn", lambda: K.gemm(100, 72, 80, 64, 64, 32, trans_A=True, trans_B=True),
         lambda: [torch.randn(80, 100, device=dev, dtype=h), torch.randn(72, 80, device=dev,
                                                                         dtype=h),
                  torch.empty(100, 72, device=dev)]),
        ("atomic", lambda: K.atomic_k(100, 24),
         lambda: [torch.randn(100, 24, device=dev), torch.zeros(24, device=dev)]),
        ("reduce_max", lambda: K.reduce_k(50, 100, "max", 1),
         lambda: [torch.randn(50, 100, device=dev), torch.zeros(50, device=dev)]),
        ("reduce_sum0", lambda: K.reduce_k(50, 100, "sum", 0),
         lambda: [torch.randn(50, 100, device=dev), torch.zeros(100, device=dev)]),
        ("dynamic_scale", lambda: K.dynamic_scale(),
         lambda: [torch.randn(70, 64, device=dev), torch.empty(70, 64, device=dev), 0.5]),
        ("two_kernels", lambda: K.two_kernels(300),
         lambda: [torch.randn(300, device=dev), torch.empty(300, device=dev)]),
    ]
    for name, build, args in jobs:
        _mark(f"tests/gpu/kernels.py:{name}")
        try:
            k = tilelang.compile(build(), target="cuda")
            k(*args())
            _sync()
        except Exception as e:  # noqa: BLE001
            print(f"@@ failed {name}: {type(e).__name__}: {str(e)[:300]}", flush=True)


def run_fuzz(n):
    import numpy as np

    from tilelang.errors import KernelError
    from tilelang.testing import fuzz

    done, seed = 0, 0
    while done < n and seed < 20 * n:
        case = fuzz.generate(seed)
        seed += 1
        try:
            kernel = fuzz.compile_case(case, "cuda")
        except KernelError:
            continue
        except Exception as e:  # noqa: BLE001
            print(f"@@ failed fuzz {case.name}: {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        _mark(f"fuzz {case.name} (seed {case.seed})")
        try:
            fuzz.run_kernel(case, kernel, case.make_inputs(np.random.default_rng(case.seed)),
                            device="cuda")
        except Exception as e:  # noqa: BLE001
            print(f"@@ failed fuzz {case.name}: {type(e).__name__}: {str(e)[:200]}", flush=True)
        done += 1


def cmd_run(args):
    t0 = time.time()
    for part in args.parts.split(","):
        try:
            if part == "examples":
                run_examples(args.size)
            elif part == "kernels":
                run_gpu_kernels()
            elif part == "fuzz":
                run_fuzz(args.fuzz)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
    print(f"@@ done in {time.time() - t0:.1f} s", flush=True)


# ==== summary =====================================================================================

# first lines of a sanitizer report (memcheck, racecheck, synccheck, initcheck)
_REPORT = re.compile(r"^========= (Invalid |Error|ERROR:|Warning|WARNING:|Barrier error|"
                     r"Race reported|Potential .* hazard|Program hit|Uninitialized|Misaligned|"
                     r"Out-of-range|Cuda API error|Malloc/Free error|Divergent|"
                     r"Leaked [0-9]+ bytes)")
_IN_KERNEL = re.compile(r"(?:in|at) (?:0x[0-9a-f]+ in )?([A-Za-z_][\w:<>, ]*_kernel\w*)")
_PYTEST_ID = re.compile(r"^(tests/\S+::\S+)")
_TOOL = re.compile(r"--tool[ =](\w+)|^TOOL (\w+)")
_SUMMARY = re.compile(r"^========= (?:ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY)(.*)")


def parse_log(path):
    tool = os.path.basename(path).split(".")[0]
    owner, reports, summaries = "(start)", [], []
    current = None
    with open(path, errors="replace") as f:
        for raw in f:
            line = raw.rstrip("\n")
            m = _TOOL.search(line)
            if m and line.startswith("TOOL"):
                tool = m.group(1) or m.group(2)
            if line.startswith(MARK):
                owner = line[len(MARK):]
                continue
            m = _PYTEST_ID.match(line)
            if m:  # pytest -v prints the test id, then (same line) whatever the test prints
                owner = m.group(1)
                line = line[m.end():].lstrip()
                line = line[line.find("========="):] if "=========" in line else line
            if line.startswith("@@ TIMEOUT") or line.startswith("@@ failed"):
                summaries.append(line[3:])
                continue
            if _SUMMARY.match(line):
                summaries.append(line.replace("=========", "").strip())
                continue
            if _REPORT.match(line):
                current = {"tool": tool, "owner": owner, "what": line[10:].strip()[:200],
                           "kernel": ""}
                reports.append(current)
                continue
            if current is not None and not current["kernel"] and line.startswith("========="):
                k = _IN_KERNEL.search(line)
                if k:
                    current["kernel"] = k.group(1)
    return reports, summaries


def cmd_summarize(args):
    from collections import Counter

    all_reports, summaries = [], {}
    for path in args.logs:
        reps, sums = parse_log(path)
        all_reports += reps
        summaries[os.path.basename(path)] = sums[-6:]
    grouped = Counter((r["tool"], r["owner"], r["kernel"], re.sub(r"0x[0-9a-f]+", "0x?",
                                                                   r["what"]))
                      for r in all_reports)
    print("\n==== compute-sanitizer summary ====")
    for log, sums in summaries.items():
        print(f"{log}: {'; '.join(sums) or '(no summary line: did the run finish?)'}")
    if not grouped:
        print("no reports")
    else:
        print(f"{len(all_reports)} reports, {len(grouped)} distinct:")
        for (tool, owner, kernel, what), n in sorted(grouped.items()):
            print(f"  [{tool}] {owner} {kernel}: {what}  (x{n})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summaries": summaries,
                       "reports": [{"tool": t, "owner": o, "kernel": k, "what": w, "count": n}
                                   for (t, o, k, w), n in sorted(grouped.items())]}, f,
                      indent=1)
    return 1 if grouped else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--parts", default="examples,kernels,fuzz")
    r.add_argument("--fuzz", type=int, default=30)
    r.add_argument("--size", default="small")
    s = sub.add_parser("summarize")
    s.add_argument("logs", nargs="+")
    s.add_argument("--json", default="")
    args = ap.parse_args()
    if args.cmd == "run":
        cmd_run(args)
    else:
        sys.exit(cmd_summarize(args))


if __name__ == "__main__":
    main()
