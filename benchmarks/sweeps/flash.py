"""FlashAttention forward B8 H32 S4096 D128 fp16: tile configs on wgmma and on mma.sync
(TL_DISABLE_WGMMA), with and without warp specialisation, against torch SDPA in the same run.

    python benchmarks/sweeps/flash.py [--cpu]

One line per variant: name, time (ms), TFLOP/s, SDPA time (ms), ratio (SDPA / ours), max error.
`--cpu` runs two variants at a tiny size on the CPU interpreter (plumbing only).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import tilelang  # noqa: E402

FAST_MATH = {"tl.enable_fast_math": True}  # as the attention examples (exp2 = ex2.approx.ftz)
from tests.gpu import kernels as K  # noqa: E402

KEY = tilelang.PassConfigKey
# (label, block_M, block_N, stages, threads, pass configs)
MMA = {KEY.TL_DISABLE_WGMMA: True}
MMA_NO_WS = {KEY.TL_DISABLE_WGMMA: True, KEY.TL_DISABLE_WARP_SPECIALIZED: True}
VARIANTS = [
    ("wgmma", 128, 64, 2, 256, None),
    ("wgmma", 128, 128, 2, 256, None),
    ("wgmma", 128, 64, 3, 256, None),
    ("wgmma", 128, 128, 2, 128, None),
    ("wgmma", 64, 128, 2, 128, None),
    ("mma.sync", 128, 64, 2, 256, MMA),
    ("mma.sync", 128, 64, 3, 256, MMA),
    ("mma.sync", 64, 64, 2, 128, MMA),
    ("mma.sync", 128, 32, 2, 256, MMA),
    ("mma.sync no-ws", 128, 64, 2, 256, MMA_NO_WS),
    ("mma.sync no-ws", 128, 64, 3, 256, MMA_NO_WS),
    ("mma.sync no-ws", 64, 64, 2, 128, MMA_NO_WS),
    # four warps of 32 query rows each (FlashAttention-2's split): every K/V fragment read
    # from shared memory feeds two mma rows, half the shared-memory traffic of 16-row warps
    ("mma.sync", 128, 64, 2, 128, MMA),
    ("mma.sync no-ws", 128, 64, 2, 128, MMA_NO_WS),
    ("mma.sync no-ws", 128, 64, 1, 128, MMA_NO_WS),
    ("mma.sync no-ws", 128, 32, 2, 128, MMA_NO_WS),
    ("mma.sync no-ws", 128, 32, 3, 128, MMA_NO_WS),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--causal", action="store_true", help="also time the causal form")
    ap.add_argument("--only", default="", help="variants whose label contains this text")
    args = ap.parse_args()
    if args.cpu:
        B, H, S, D, variants, device = 1, 2, 128, 32, VARIANTS[:1] + VARIANTS[5:6], "cpu"
    else:
        from bench_core import bench
        B, H, S, D, variants, device = 8, 32, 4096, 128, VARIANTS, "cuda"
        print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, S, H, D, device=device).half() for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    for causal in ([False, True] if args.causal else [False]):
        ref = torch.nn.functional.scaled_dot_product_attention(
            qt.float(), kt.float(), vt.float(), is_causal=causal).transpose(1, 2)
        flops = 4 * B * H * S * S * D * (0.5 if causal else 1.0)
        if not args.cpu:
            qc, kc, vc = qt.contiguous(), kt.contiguous(), vt.contiguous()
            base = bench(lambda: torch.nn.functional.scaled_dot_product_attention(
                qc, kc, vc, is_causal=causal))
        for label, bm, bn, stages, threads, configs in variants:
            if args.only and args.only not in label:
                continue
            name = f"{label} {bm}/{bn} s{stages} t{threads} c={int(causal)}"
            try:
                t0 = time.perf_counter()
                kern = tilelang.compile(K.flash_fwd(B, H, S, D, causal, bm, bn, stages, threads),
                                        out_idx=[3], pass_configs={**FAST_MATH, **(configs or {})},
                                        target="cpu" if args.cpu else "auto")
                compile_s = time.perf_counter() - t0
                out = kern(q, k, v)
                err = (out.float() - ref).abs().max().item()
                if not err < 2e-2:
                    print(f"{name:34s} FAILED max error {err:.3e}", flush=True)
                    continue
                if args.cpu:
                    print(f"{name:34s} ok (cpu) max_err {err:.2e}", flush=True)
                    continue
                ms = bench(lambda: kern(q, k, v))
                regs = kern.n_regs
                print(f"{name:34s} {ms:8.4f} ms {flops / ms / 1e9:7.1f} TFLOP/s  SDPA {base:8.4f} ms"
                      f"  ratio {base / ms:5.2f}  max_err {err:.1e}  regs {regs} spills "
                      f"{kern.n_spills}  compile {compile_s:.1f}s", flush=True)
            except Exception as e:  # noqa: BLE001 - keep going: one failure must not hide the rest
                print(f"{name:34s} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)


if __name__ == "__main__":
    main()
