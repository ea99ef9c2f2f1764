"""Tile sweep of the vector-add example (examples/elementwise) against torch eager.

    python benchmarks/sweeps/elementwise.py          # H200: 64M fp16 elements, < 30 s
    python benchmarks/sweeps/elementwise.py --cpu    # plumbing only, tiny size

Each variant (elements per block, threads) is built from the example's kernel, checked on
fresh random inputs (the output block of the allocator filled with NaN first) and timed with
bench_core.bench next to `a + b`. One line per variant:

    name  time_ms  GB/s  torch_ms  ratio(torch / ours)  max_err
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "examples" / "elementwise"))

import example_elementwise as ex  # noqa: E402
from bench_core import wall_bench  # noqa: E402

# (elements per block, threads): 8-byte, 16-byte and two 16-byte vectors per thread
VARIANTS = [(1024, 256), (2048, 256), (4096, 256), (2048, 128), (4096, 512), (8192, 512),
            (8192, 256)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true")
    args = ap.parse_args()
    if args.cpu:
        N, device, timer, variants = 5000, "cpu", wall_bench, VARIANTS[:2]
    else:
        from bench_core import bench as timer
        N, device, variants = ex.SIZES["bench"]["N"], "cuda", VARIANTS
        print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    a = torch.randn(N, device=device, dtype=torch.float16)
    b = torch.randn(N, device=device, dtype=torch.float16)
    ref = a.double() + b.double()
    base = timer(lambda: a + b)
    gb = 3 * N * 2 / 1e9
    for block_N, threads in variants:
        name = f"vector add {block_N}/t{threads}"
        try:
            kern = ex.vector_add(N, block_N=block_N, threads=threads)
            poison = torch.full_like(a, float("nan"))
            del poison  # the output below reuses this block
            out = kern(a, b)
            err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
            if not err < 1e-3:  # NaN fails too
                print(f"{name:28s} FAILED max error {err:.2e}", flush=True)
                continue
            ms = timer(lambda: kern(a, b))
            print(f"{name:28s} {ms:9.4f} {gb / ms * 1e3:8.1f} {base:9.4f} {base / ms:6.2f} "
                  f"{err:8.1e}", flush=True)
        except Exception as e:  # noqa: BLE001 - one failure must not hide the rest
            print(f"{name:28s} FAILED {type(e).__name__}: {str(e)[:200]}", flush=True)


if __name__ == "__main__":
    main()
