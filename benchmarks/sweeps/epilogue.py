"""GEMM epilogue variants (transform/stage_epilogue.py) vs cuBLAS, fp16 4096^3 and 8192^3.

    python benchmarks/sweeps/epilogue.py [--cpu]

Per size and tile config (128/256/64 and 256/128/64, 3 stages, 256 threads), four variants:
  auto     the compiler stages the fragment->global copy (TMA store on sm_90a)
  vector   staged, 16-byte vector stores (tl.disable_tma_store)
  off      direct stores from the accumulator fragment (tl.disable_staged_epilogue)
  hand     the user stages it through a shared tile by hand
One line each: name, time (ms), TFLOP/s, cuBLAS (ms), ratio (cuBLAS / ours), max error
relative to the fp32 product (outputs NaN-poisoned before the checked run). `--cpu` runs the
plumbing on the interpreter at a tiny size.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import tilelang  # noqa: E402
from tilelang.transform.pass_config import PassConfigKey  # noqa: E402
from tests.gpu.epilogue_kernels import gemm, hand_staged  # noqa: E402

VARIANTS = {
    "auto": (gemm, {}),
    "vector": (gemm, {PassConfigKey.TL_DISABLE_TMA_STORE: True}),
    "off": (gemm, {PassConfigKey.TL_DISABLE_STAGED_EPILOGUE: True}),
    "hand": (hand_staged, {}),
}
CONFIGS = [(128, 256, 64, 3, 256), (256, 128, 64, 3, 256)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true")
    args = ap.parse_args()
    if args.cpu:
        sizes, configs, device = [(96, 80, 64)], [(32, 32, 32, 2, 128)], "cpu"
    else:
        from bench_core import bench
        sizes, configs, device = [(4096,) * 3, (8192,) * 3], CONFIGS, "cuda"
        print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    for M, N, Kd in sizes:
        a = torch.randn(M, Kd, device=device).half()
        b = torch.randn(Kd, N, device=device).half()
        ref = a.float() @ b.float()
        base = None if args.cpu else bench(lambda: a @ b)
        for bm, bn, bk, stages, threads in configs:
            for vname, (build, cfg) in VARIANTS.items():
                name = f"gemm {M}x{N}x{Kd} {bm}/{bn}/{bk} s{stages} t{threads} {vname}"
                try:
                    kern = tilelang.compile(build(M, N, Kd, bm, bn, bk, stages, threads),
                                            target="cpu" if args.cpu else "auto",
                                            pass_configs=cfg)
                    c = torch.full((M, N), float("nan"), device=device, dtype=torch.float16)
                    kern(a, b, c)
                    err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
                    if not err < 1e-2:  # NaN fails too
                        print(f"{name:52s} FAILED relative error {err:.2e}", flush=True)
                        continue
                    if args.cpu:
                        print(f"{name:52s} ok (cpu) max_err {err:.1e}", flush=True)
                        continue
                    ms = bench(lambda: kern(a, b, c))
                    print(f"{name:52s} {ms:8.4f} ms {2 * M * N * Kd / ms / 1e9:7.1f} TFLOP/s  "
                          f"cuBLAS {base:8.4f} ms  ratio {base / ms:5.2f}  max_err {err:.1e}",
                          flush=True)
                except Exception as e:  # noqa: BLE001 - keep going
                    print(f"{name:52s} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)


if __name__ == "__main__":
    main()
