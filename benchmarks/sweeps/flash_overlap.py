"""FlashAttention forward, B8 H32 S4096 D128 fp16: the FlashAttention-3-style overlapped schedule
(examples/flash_attention/example_mha_fwd_pipelined.py: T.Pipelined order/stage/group, async
wgmma, one TMA ring per tile) in a few tile configs, against the plain warp-specialised kernel
(tests/gpu/kernels.py::flash_fwd, 128/128 s2 t256), the example without its schedule
(no-overlap) and torch SDPA, in one run; each variant with the consumer warpgroups taking
turns to issue their gemms (transform/pingpong.py, "pp") and without ("free").

    python benchmarks/sweeps/flash_overlap.py [--cpu] [--no-causal]

One line per variant: name, time (ms), TFLOP/s, SDPA time (ms), ratio (SDPA / ours), max error
against a float32 SDPA reference. Outputs are NaN-poisoned before the checked call. `--cpu`
runs four variants at a tiny size on the CPU interpreter (plumbing only: the times mean
nothing).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, ROOT)
import tilelang  # noqa: E402
from tests.gpu import kernels as K  # noqa: E402


def _example():
    path = os.path.join(ROOT, "examples", "flash_attention", "example_mha_fwd_pipelined.py")
    spec = importlib.util.spec_from_file_location("example_mha_fwd_pipelined_sweep", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# (label, builder, block_M, block_N, stages, threads)
VARIANTS = [
    ("plain", "plain", 128, 128, 2, 256),
    ("plain", "plain", 192, 128, 2, 384),
    ("overlap", "overlap", 128, 128, 2, 256),
    ("overlap", "overlap", 128, 128, 3, 256),
    ("overlap", "overlap", 192, 64, 2, 384),
]
FAST_MATH = {"tl.enable_fast_math": True}  # as the attention examples (exp2 = ex2.approx.ftz)
PINGPONG_OFF = {**FAST_MATH, "tl.disable_warpgroup_pingpong": True}


def build(ex, kind, B, H, S, D, causal, bm, bn, stages, threads):
    if kind == "plain":
        return K.flash_fwd(B, H, S, D, causal, bm, bn, stages, threads)
    return ex.flash_attention_fwd_pipelined.get_tir(B, H, S, D, causal, block_M=bm, block_N=bn,
                                                    num_stages=stages, threads=threads,
                                                    overlap=kind == "overlap")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--no-causal", action="store_true", help="skip the causal form")
    args = ap.parse_args()
    ex = _example()
    if args.cpu:
        from bench_core import wall_bench as bench
        B, H, S, D, device, target = 1, 2, 192, 64, "cpu", "cpu"
        variants = [(lbl, kind, 64, 64, st, 128) for lbl, kind, _, _, st, _ in VARIANTS[:4]]
    else:
        from bench_core import bench
        B, H, S, D, device, target = 8, 32, 4096, 128, "cuda", "auto"
        variants = VARIANTS
        print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, S, H, D, device=device).half() for _ in range(3))
    # SDPA wants (batch, heads, seq, dim): made contiguous once, outside the timed lambda
    qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    print(f"{'name':40s} {'time_ms':>9s} {'TFLOP/s':>8s} {'sdpa_ms':>9s} {'ratio':>6s} "
          f"{'max_err':>8s}", flush=True)
    for causal in [False] if args.no_causal else [False, True]:
        ref = torch.nn.functional.scaled_dot_product_attention(
            qt.float(), kt.float(), vt.float(), is_causal=causal).transpose(1, 2)
        flops = 4 * B * H * S * S * D * (0.5 if causal else 1.0)
        base = bench(lambda: torch.nn.functional.scaled_dot_product_attention(
            qt, kt, vt, is_causal=causal))
        for (label, kind, bm, bn, stages, threads), pp in ((v, pp) for v in variants
                                                           for pp in (True, False)):
            if (threads == 128 or kind != "overlap") and not pp:
                continue  # turns apply to the overlapped schedule of 2+ warpgroups only
            name = (f"{label} {bm}/{bn} s{stages} t{threads} c={int(causal)} "
                    + (f"{'pp' if pp else 'free'}" if kind == "overlap" else ""))
            try:
                t0 = time.perf_counter()
                kern = tilelang.compile(build(ex, kind, B, H, S, D, causal, bm, bn, stages,
                                              threads), target=target,
                                        pass_configs=FAST_MATH if pp else PINGPONG_OFF)
                compile_s = time.perf_counter() - t0
                out = torch.full_like(q, float("nan"))
                kern(q, k, v, out)
                if device == "cuda":
                    torch.cuda.synchronize()
                err = (out.float() - ref).abs().max().item()  # NaN fails the check below
                if not err < 2e-2:
                    print(f"{name:40s} FAILED max error {err:.3e}", flush=True)
                    continue
                ms = bench(lambda: kern(q, k, v, out))
                print(f"{name:40s} {ms:9.4f} {flops / ms / 1e9:8.1f} {base:9.4f} "
                      f"{base / ms:6.2f} {err:8.1e}   (compile {compile_s:.1f}s)", flush=True)
            except Exception as e:  # noqa: BLE001 - keep going: one failure must not hide the rest
                print(f"{name:40s} FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)


if __name__ == "__main__":
    main()
