"""Tile-config sweep of the implicit-GEMM convolution (examples/convolution) against cuDNN.

    python benchmarks/sweeps/conv.py          # H200: the example's bench size, < 60 s
    python benchmarks/sweeps/conv.py --cpu    # plumbing only: tiny size on the CPU interpreter

Each variant is built, checked on fresh random inputs against torch conv2d in float64 (the
output is poisoned with NaN first), and timed with bench_core.bench_pair (CUDA events, L2
flush, median, alternating batches) against torch.nn.functional.conv2d on channels_last fp16
tensors.
One line per variant:  name  time_ms  rate(TFLOP/s)  baseline_ms  ratio(baseline/time)  max_err
A variant that fails to build or check prints FAILED and the reason; the sweep goes on.
"""

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "examples" / "convolution"))

import example_convolution as ex  # noqa: E402
from bench_core import wall_bench  # noqa: E402

# block_M, block_N, block_K, num_stages, threads[, options]: the old default first, then
# wgmma-sized tiles; options: "overlap": False keeps each gemm synchronous
# (tl.disable_wgmma_overlap), "persistent": True launches one block per multiprocessor
# walking the tiles (T.Persistent) instead of one block per tile
VARIANTS = [
    (128, 128, 32, 2, 128),
    (128, 128, 32, 4, 128, {"overlap": False}),
    (128, 128, 32, 4, 128),
    (128, 128, 64, 4, 128),
    (128, 128, 64, 3, 128),
    (128, 128, 64, 4, 256),
    (128, 256, 32, 4, 256),
    (128, 256, 64, 3, 256),
    (128, 256, 64, 4, 256),
    (256, 128, 64, 3, 256),
    (64, 256, 64, 4, 128),
    (128, 256, 64, 3, 256, {"persistent": True}),
    (128, 256, 64, 4, 256, {"persistent": True}),
    (128, 256, 32, 4, 256, {"persistent": True}),
    (128, 128, 64, 4, 256, {"persistent": True}),
    (256, 128, 64, 3, 256, {"persistent": True}),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true", help="tiny size on the CPU interpreter")
    args = ap.parse_args()
    if not args.cpu and not torch.cuda.is_available():
        sys.exit("benchmarks/sweeps/conv.py needs a CUDA GPU (or --cpu for a plumbing check)")
    dev = "cpu" if args.cpu else "cuda"
    if args.cpu:
        N, C, H, W, F, KH, KW, s, p, d = 1, 16, 5, 6, 24, 3, 3, 1, 1, 1
        target = "cpu"

        def pair(fn, base):
            return wall_bench(fn), wall_bench(base)
    else:
        N, C, H, W, F, KH, KW, s, p, d, _ = ex.SIZES["bench"]
        from bench_core import bench_pair as pair
        target = "cuda"
    OH = (H + 2 * p - d * (KH - 1) - 1) // s + 1
    OW = (W + 2 * p - d * (KW - 1) - 1) // s + 1
    flops = 2.0 * N * OH * OW * F * KH * KW * C
    torch.manual_seed(0)
    x = torch.randn(N, H, W, C, device=dev, dtype=torch.float16)          # NHWC
    w = torch.randn(KH, KW, C, F, device=dev, dtype=torch.float16)        # HWIO
    x_nchw, w_oihw = x.permute(0, 3, 1, 2), w.permute(3, 2, 0, 1)        # channels-last views
    ref = torch.nn.functional.conv2d(x_nchw.double(), w_oihw.double(), stride=s, padding=p,
                                     dilation=d).permute(0, 2, 3, 1)
    w_cl = w_oihw.contiguous(memory_format=torch.channels_last)
    if args.cpu:
        x_base, w_base = x_nchw.float(), w_cl.float()   # no fp16 conv2d on the CPU
    else:
        x_base, w_base = x_nchw, w_cl
    def baseline():
        return torch.nn.functional.conv2d(x_base, w_base, stride=s, padding=p, dilation=d)

    print(f"conv2d fp16 N{N} {H}x{W} C{C}->F{F} {KH}x{KW} s{s} p{p} d{d}; baseline torch "
          f"conv2d (cuDNN, channels_last), timed in alternating batches with each variant",
          flush=True)
    print(f"{'name':40s} {'time_ms':>9s} {'TFLOP/s':>8s} {'baseline_ms':>11s} {'ratio':>6s} "
          f"{'max_err':>8s}", flush=True)
    w_flat = w.reshape(KH * KW * C, F)
    blocks = 4 if args.cpu else torch.cuda.get_device_properties(0).multi_processor_count
    for bm, bn, bk, stages, threads, *options in VARIANTS:
        options = options[0] if options else {}
        overlap, persistent = options.get("overlap", True), options.get("persistent", False)
        name = (f"conv {bm}x{bn}x{bk} s{stages} t{threads}" + ("" if overlap else " no overlap")
                + (f" persistent b{blocks}" if persistent else ""))
        configs = {} if overlap else {"tl.disable_wgmma_overlap": True}
        try:
            func = ex.convolution.get_tir(N, C, H, W, F, KH, KW, s, p, d, block_M=bm,
                                          block_N=bn, block_K=bk, num_stages=stages,
                                          threads=threads,
                                          num_blocks=blocks if persistent else None)
            kernel = ex.tilelang.compile(func, target=target, pass_configs=configs)
            out = torch.full((N, OH, OW, F), float("nan"), device=dev, dtype=torch.float16)
            xs = torch.randn_like(x)          # fresh inputs for the check
            ws = torch.randn_like(w)
            kernel(xs, ws.reshape(KH * KW * C, F), out)
            check = torch.nn.functional.conv2d(
                xs.permute(0, 3, 1, 2).double(), ws.permute(3, 2, 0, 1).double(), stride=s,
                padding=p, dilation=d).permute(0, 2, 3, 1)
            if torch.isnan(out).any():
                raise AssertionError("NaN in the output (unwritten elements)")
            err = ((out.double() - check).abs().max() / check.abs().max()).item()
            if err > 2e-3:
                raise AssertionError(f"max relative error {err:.2e}")
            ms, base_ms = pair(lambda: kernel(x, w_flat, out), baseline)
            print(f"{name:40s} {ms:9.4f} {flops / ms * 1e-9:8.1f} {base_ms:11.4f} "
                  f"{base_ms / ms:6.2f} {err:8.1e}", flush=True)
        except Exception as e:  # noqa: BLE001 - one failed variant must not stop the sweep
            msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
            print(f"{name:40s} FAILED {type(e).__name__}: {msg[:160]}", flush=True)
    del ref


if __name__ == "__main__":
    main()
