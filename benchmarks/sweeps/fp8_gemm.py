"""FP8 GEMM tile sweep: examples/gemm/example_gemm_fp8.py's kernel (e4m3 x e4m3 -> f32
accumulators -> bf16, wgmma on sm_90a) over tile configs at 8192^3, against
torch._scaled_mm (cuBLASLt, scales 1.0, bf16 out) in the same run.

    python benchmarks/sweeps/fp8_gemm.py          # on a GPU (H200: under 60 s)
    python benchmarks/sweeps/fp8_gemm.py --cpu    # plumbing only: tiny size, CPU interpreter

Each variant is built, run once on fresh random fp8 inputs into a NaN-poisoned output and
checked against a float32 product of the dequantised inputs (max |err| / max |ref|; bf16
rounding alone is up to 2^-8), then timed with bench_core.bench (CUDA events, L2 flushed,
median).
Prints one line per variant:

    name  time_ms  rate(TFLOP/s)  baseline_ms  ratio(baseline/ours)  max_err

A variant that fails prints FAILED with the reason and the sweep goes on.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))                       # bench_core
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "gemm"))
sys.path.insert(0, os.path.join(HERE, "..", ".."))                 # tilelang from the tree

import tilelang  # noqa: E402
from bench_core import wall_bench  # noqa: E402
from example_gemm_fp8 import matmul_fp8  # noqa: E402

FP8 = torch.float8_e4m3fn
# max |err| / max |ref|: bf16 output rounding (up to 2^-8 relative) plus the FP8 tensor cores'
# ~14-bit accumulation over K = 8192 without promotion to fp32 (8.6e-3 measured on an H200;
# torch._scaled_mm promotes, 2e-3). A wrong layout gives errors of order 1.
TOL = 2e-2

# (block_M, block_N, block_K, num_stages, threads); the example's bench default is marked
VARIANTS = [
    (128, 256, 128, 4, 256),  # example default: 2 consumer warpgroups x m64n256k32
    (128, 256, 128, 3, 256),
    (128, 256, 64, 6, 256),
    (256, 128, 128, 4, 256),
    (256, 128, 128, 3, 256),
    (128, 192, 128, 4, 256),
    (128, 128, 128, 4, 256),
    (128, 128, 128, 4, 128),
    (128, 128, 128, 3, 128),
]


def name_of(v):
    bm, bn, bk, s, t = v
    return f"fp8 {bm}x{bn}x{bk} s{s} t{t}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu", action="store_true", help="tiny size on the CPU interpreter")
    ap.add_argument("--size", type=int, default=None, help="M = N = K (default 8192)")
    args = ap.parse_args(argv)
    cpu = args.cpu or not torch.cuda.is_available()
    dev = "cpu" if cpu else "cuda"
    size = args.size or (256 if cpu else 8192)
    M = N = K = size
    target = "cpu" if cpu else "cuda"
    if cpu:
        timer = wall_bench
    else:
        from bench_core import bench as timer

        torch.backends.cuda.matmul.allow_tf32 = False  # the reference product stays fp32

    # fresh random inputs every run; values stay inside e4m3's range (|x| <= 448)
    seed = int(time.time_ns() % (1 << 31))
    gen = torch.Generator(device=dev).manual_seed(seed)
    a = (torch.randn(M, K, generator=gen, device=dev) * 8).to(FP8)
    b = (torch.randn(N, K, generator=gen, device=dev) * 8).to(FP8)
    ref = a.float() @ b.float().t()
    ref_max = ref.abs().max().item()
    one = torch.ones((), device=dev)
    if cpu:
        def baseline():
            return (a.float() @ b.float().t()).to(torch.bfloat16)
        base_name = "torch fp32 matmul (CPU stand-in)"
    else:
        def baseline():
            return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one,
                                    out_dtype=torch.bfloat16)
        base_name = "torch._scaled_mm"
    base_ms = timer(baseline)
    base_err = (baseline().float() - ref).abs().max().item() / ref_max
    flops = 2.0 * M * N * K
    print(f"# {M}x{N}x{K} e4m3 -> bf16 on {dev}, seed {seed}; baseline {base_name} "
          f"{base_ms:.4f} ms ({flops / base_ms * 1e-9:.1f} TFLOP/s, max_err {base_err:.1e})",
          flush=True)
    print(f"{'name':28s} {'time_ms':>9s} {'TFLOP/s':>9s} {'baseline_ms':>11s} {'ratio':>6s} "
          f"{'max_err':>8s}", flush=True)
    t_start = time.time()
    for v in VARIANTS:
        bm, bn, bk, s, t = v
        try:
            func = matmul_fp8.get_tir(M, N, K, block_M=bm, block_N=bn, block_K=bk,
                                      num_stages=s, threads=t)
            kernel = tilelang.compile(func, target=target)
            c = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device=dev)
            kernel(a, b, c, 1.0)
            if not cpu:
                torch.cuda.synchronize()
            if torch.isnan(c).any():
                raise AssertionError("NaN left in the output (not fully written)")
            err = (c.float() - ref).abs().max().item() / ref_max
            if err > TOL:
                raise AssertionError(f"max_err {err:.2e} > {TOL:.0e}")
            ms = timer(lambda: kernel(a, b, c, 1.0))
            print(f"{name_of(v):28s} {ms:9.4f} {flops / ms * 1e-9:9.1f} {base_ms:11.4f} "
                  f"{base_ms / ms:6.2f} {err:8.1e}", flush=True)
        except Exception as e:  # keep sweeping; say why this one failed
            reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            print(f"{name_of(v):28s} FAILED {reason}", flush=True)
            if os.environ.get("SWEEP_TRACEBACK"):
                traceback.print_exc()
    print(f"# {len(VARIANTS)} variants in {time.time() - t_start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
