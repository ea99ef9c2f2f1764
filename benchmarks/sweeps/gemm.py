"""fp16 GEMM tile configs at 4096^3 and 8192^3 (issue 5's targets), cuBLAS in the same run.

    python benchmarks/sweeps/gemm.py [--cpu] [--sizes 4096] [--only cluster|persistent]

One line per config: name, time (ms), TFLOP/s, cuBLAS time (ms, in alternating batches with
the config), ratio (cuBLAS / ours), max error relative to the fp32 product. `--cpu` runs one config at a tiny size (plumbing only).
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
from tests.gpu import kernels as K  # noqa: E402
from tests.gpu.epilogue_kernels import hand_staged, persistent_tiles  # noqa: E402




# (block_M, block_N, block_K, stages, threads[, "staged" epilogue | cluster dims])
CONFIGS = [
    (128, 256, 64, 3, 256),
    (128, 256, 64, 4, 256),
    (256, 128, 64, 3, 256),
    (128, 128, 64, 4, 256),
    (128, 128, 64, 4, 128),
    (128, 256, 32, 4, 256),
    (128, 256, 64, 3, 256, "staged"),
    (128, 128, 64, 4, 256, "staged"),
    # thread block clusters: the blocks of a cluster share one tile, loaded once (multicast)
    (128, 256, 64, 3, 256, (2, 1, 1)),
    (128, 256, 64, 4, 256, (2, 1, 1)),
    (128, 256, 64, 3, 256, (1, 2, 1)),
    (256, 128, 64, 3, 256, (2, 1, 1)),
    (128, 256, 64, 4, 256, (4, 1, 1)),
    # persistent kernels (T.Persistent over 132 blocks): tiles visited 8 rows at a time or
    # row-major; with the TMA producer running the tile loop, or the cp.async pipeline
    (128, 256, 64, 3, 256, ("persistent", 8)),
    (128, 256, 64, 3, 256, ("persistent", 1)),
    (128, 256, 64, 3, 256, ("persistent", 8, "cp.async")),
]
NO_WS = {"tl.disable_warp_specialized": True}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--sizes", default="4096,8192", help="cube sizes, comma-separated")
    ap.add_argument("--only", default="", help="'cluster': the clustered configs only")
    args = ap.parse_args()
    if args.cpu:
        sizes, configs, device = [(96, 80, 64)], [(32, 32, 32, 2, 128),
                                                  (32, 32, 32, 2, 128, "staged"),
                                                  (32, 32, 32, 2, 128, ("persistent", 2))], "cpu"
    else:
        from bench_core import bench_pair
        sizes = [(int(n),) * 3 for n in args.sizes.split(",")]
        kind = {"cluster": lambda e: isinstance(e, tuple) and e[0] != "persistent",
                "persistent": lambda e: isinstance(e, tuple) and e[0] == "persistent"}
        configs = [c for c in CONFIGS if not args.only or
                   (len(c) > 5 and kind[args.only](c[5]))]
        device = "cuda"
        print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    for M, N, Kd in sizes:
        a = torch.randn(M, Kd, device=device).half()
        b = torch.randn(Kd, N, device=device).half()
        ref = a.float() @ b.float()
        for bm, bn, bk, stages, threads, *extra in configs:
            staged = extra == ["staged"]
            persistent = extra[0] if extra and extra[0][0] == "persistent" else None
            cluster = extra[0] if extra and not staged and not persistent else None
            name = f"gemm {M}x{N}x{Kd} {bm}/{bn}/{bk} s{stages} t{threads}" + \
                (" hand-staged epilogue" if staged else "") + \
                (f" cluster {cluster}" if cluster else "") + \
                (f" persistent group {persistent[1]} {persistent[2:] and 'cp.async' or 'TMA'}"
                 if persistent else "")
            try:
                if persistent:
                    func = persistent_tiles(M, N, Kd, bm, bn, bk, stages, threads,
                                            4 if args.cpu else 132, persistent[1])
                elif staged:
                    func = hand_staged(M, N, Kd, bm, bn, bk, stages, threads)
                else:
                    func = K.gemm(M, N, Kd, bm, bn, bk, out_dtype="float16",
                                  num_stages=stages, threads=threads, cluster_dims=cluster)
                kern = tilelang.compile(func, out_idx=[2],
                                        target="cpu" if args.cpu else "auto",
                                        pass_configs=NO_WS if persistent and persistent[2:]
                                        else None)
                out = kern(a, b)
                err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
                if not err < 1e-2:
                    print(f"{name:44s} FAILED relative error {err:.2e}", flush=True)
                    continue
                if args.cpu:
                    print(f"{name:44s} ok (cpu) max_err {err:.1e}", flush=True)
                    continue
                ms, base = bench_pair(lambda: kern(a, b), lambda: a @ b)
                print(f"{name:44s} {ms:8.4f} ms {2 * M * N * Kd / ms / 1e9:7.1f} TFLOP/s  cuBLAS "
                      f"{base:8.4f} ms  ratio {base / ms:5.2f}  max_err {err:.1e}", flush=True)
            except Exception as e:  # noqa: BLE001 - keep going
                print(f"{name:44s} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)


if __name__ == "__main__":
    main()
