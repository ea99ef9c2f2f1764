"""Every example at its benchmark size on the GPU, against the best baseline in the
environment (cuBLAS via torch.matmul, torch SDPA, torch eager, torch._scaled_mm for FP8,
cuDNN for convolution), in one run.

    python benchmarks/run_all.py [--only gemm,flash] [--out benchmarks/results] [--rep 50]
    python benchmarks/run_all.py --cpu      # plumbing check without a GPU (see below)

For each case an example's `run("cuda", "bench")` returns, both callables are timed with
`bench_core.bench_pair` (CUDA events after warm-up, L2 flushed before every run, median; the
two sides in alternating batches so that both see the same clocks and temperature). The
example has already checked its result against a float64 reference before timing. Prints one
row per case (kernel, time, TFLOP/s or GB/s, baseline time, speedup = baseline / tilelang)
and writes `<out>/results.md` (markdown table) and `<out>/speedup.png` (bar chart of the
speedups). An example that fails gets a FAILED row and the run goes on.

`--cpu` runs the small sizes on the CPU interpreter and times both sides by wall clock: the
numbers mean nothing, it only checks that the examples, the table and the chart work.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import sys
import time
import traceback
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_core import bench_pair, wall_bench  # noqa: E402  (timing shared with the core benchmarks)

ROOT = HERE.parent
EXAMPLES = sorted((ROOT / "examples").glob("*/example_*.py"))


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"bench_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rate(case, ms):
    """(value, unit): TFLOP/s for compute-bound cases, GB/s for memory-bound ones."""
    if case.get("flops"):
        return case["flops"] / (ms * 1e-3) / 1e12, "TFLOP/s"
    return case["bytes"] / (ms * 1e-3) / 1e9, "GB/s"


def run_example(path: Path, rep: int, rows: list, cpu: bool = False):
    name = f"{path.parent.name}/{path.stem}"
    t0 = time.perf_counter()
    try:
        # compiles, runs, checks against a float64 reference
        cases = load(path).run("cpu", "small") if cpu else load(path).run("cuda", "bench")
    except Exception as e:  # one failure must not hide the other numbers
        msg = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        rows.append(dict(example=name, kernel=name, failed=msg))
        print(f"{name:58s} FAILED {msg}", flush=True)
        if os.environ.get("TL_BENCH_TRACEBACK"):
            traceback.print_exc()
        return
    setup = time.perf_counter() - t0
    for case in cases:
        try:
            if cpu:
                ms, base_ms = (wall_bench(case[key]) for key in ("tilelang", "baseline"))
            else:  # alternating batches: both sides see the same clocks and temperature
                ms, base_ms = bench_pair(case["tilelang"], case["baseline"], rep=rep)
        except Exception as e:
            msg = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            rows.append(dict(example=name, kernel=case["name"], failed=msg))
            print(f"{case['name']:58s} FAILED {msg}", flush=True)
            continue
        value, unit = rate(case, ms)
        row = dict(example=name, kernel=case["name"], ms=ms, rate=value, unit=unit,
                   baseline=case["baseline_name"], base_ms=base_ms, speedup=base_ms / ms,
                   error=case["error"], setup_s=setup)
        rows.append(row)
        print(f"{case['name']:58s} {ms:9.4f} ms {value:8.1f} {unit:7s} | {row['baseline']:34s} "
              f"{base_ms:9.4f} ms | x{row['speedup']:5.2f}  (err {case['error']:.1e})",
              flush=True)
    del cases
    gc.collect()
    if not cpu:
        torch.cuda.empty_cache()


def write_markdown(rows, path: Path, header: str):
    lines = [header, "",
             "| kernel | time (ms) | rate | baseline | baseline (ms) | speedup | rel. error |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: |"]
    for r in rows:
        if "failed" in r:
            lines.append(f"| {r['kernel']} | FAILED | | {r['failed']} | | | |")
        else:
            lines.append(f"| {r['kernel']} | {r['ms']:.4f} | {r['rate']:.1f} {r['unit']} | "
                         f"{r['baseline']} | {r['base_ms']:.4f} | {r['speedup']:.2f}x | "
                         f"{r['error']:.1e} |")
    lines.append("")
    lines.append("speedup = baseline time / tilelang time (above 1: tilelang is faster). Times are "
                 "medians of CUDA-event timings after warm-up, with the L2 cache flushed "
                 "before every run.")
    path.write_text("\n".join(lines) + "\n")


def write_chart(rows, path: Path, title: str):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart written")
        return
    ok = [r for r in rows if "failed" not in r]
    if not ok:
        return
    fig, ax = plt.subplots(figsize=(10, 0.38 * len(ok) + 1.5))
    names = [r["kernel"] for r in ok][::-1]
    speed = [r["speedup"] for r in ok][::-1]
    colors = ["tab:green" if s >= 1.0 else "tab:red" for s in speed]
    ax.barh(names, speed, color=colors)
    ax.axvline(1.0, color="black", linewidth=1)
    for y, s in enumerate(speed):
        ax.text(s, y, f" {s:.2f}x", va="center", fontsize=8)
    ax.set_xlabel("speedup over the baseline (baseline time / tilelang time)")
    ax.set_title(title, fontsize=10)
    ax.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated substrings of example paths")
    ap.add_argument("--out", default=str(HERE / "results"), help="output directory")
    ap.add_argument("--rep", type=int, default=50, help="timed runs per measurement")
    ap.add_argument("--cpu", action="store_true",
                    help="plumbing check: small sizes on the CPU interpreter, wall clock")
    args = ap.parse_args()
    if not args.cpu and not torch.cuda.is_available():
        sys.exit("benchmarks/run_all.py needs a CUDA GPU (or --cpu for a plumbing check)")
    device = ("CPU interpreter, small sizes (plumbing check: times are meaningless)"
              if args.cpu else f"{torch.cuda.get_device_name()} (torch {torch.__version__})")
    print(f"device: {device}", flush=True)
    selected = [p for p in EXAMPLES if not args.only or
                any(s in f"{p.parent.name}/{p.stem}" for s in args.only.split(","))]
    rows: list = []
    t0 = time.perf_counter()
    for path in selected:
        run_example(path, args.rep, rows, cpu=args.cpu)
    print(f"total {time.perf_counter() - t0:.0f} s", flush=True)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    header = f"# TileLang examples vs baselines\n\nDevice: {device}"
    write_markdown(rows, out / "results.md", header)
    write_chart(rows, out / "speedup.png", f"TileLang examples vs baselines: {device}")
    print(f"wrote {out / 'results.md'} and {out / 'speedup.png'}")


if __name__ == "__main__":
    main()
