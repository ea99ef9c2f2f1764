"""Config sweep of the FlashAttention backward example (examples/flash_attention) against the
backward pass of torch SDPA.

    python benchmarks/sweeps/mha_bwd.py          # H200: B8 H32 S4096 D128 fp16, < 60 s
    python benchmarks/sweeps/mha_bwd.py --dim 64 # the same at head dimension 64
    python benchmarks/sweeps/mha_bwd.py --cpu    # plumbing only: tiny size on the CPU interpreter

For each mask (full, causal) the forward kernel of the example gives O and lse once, and torch
SDPA's backward on the same Q, K, V, dO gives the reference gradients and the baseline time.
Each variant of the main kernel is built with the preprocess and postprocess kernels (those are
shared by all variants), all with the example's pass configs (fast math), run on fresh random inputs with every output and workspace poisoned
with NaN first, and checked against autograd of plain attention in float64 on one sequence and
two heads; then the whole backward pass (preprocess + main + postprocess) is timed with
bench_core.bench (CUDA events, L2 flush, median) next to torch. One line per variant:

    name  time_ms  TFLOP/s  baseline_ms  ratio(baseline/time)  max_err  main_ms

max_err is the largest of max|ours - ref| / max|ref| over dQ, dK, dV; main_ms is the main
kernel alone. A variant that fails to build or check prints FAILED and the reason; the sweep
goes on.
"""

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "examples" / "flash_attention"))

import example_mha_bwd as ex  # noqa: E402
from bench_core import wall_bench  # noqa: E402

# (name, flash_bwd options; "pass_configs": added to the example's fast math); the example's
# default first
NO_DEFERRED_WAIT = {"tl.disable_deferred_store_wait": True}
VARIANTS = [
    ("example default", dict()),
    ("128x80 t256 s2 tma sync", dict(block_N=80, overlap=False)),
    ("128x64 t256 s2 tma overlap", dict(block_N=64)),
    ("128x64 t256 s2 tma overlap, dQ not transposed", dict(block_N=64, dq_transposed=False)),
    ("128x80 t256 s2 tma overlap, wait at issue", dict(block_N=80,
                                                       pass_configs=NO_DEFERRED_WAIT)),
    ("128x80 t256 s2 tma overlap", dict(block_N=80)),
    ("128x80 t256 s2 shared overlap", dict(block_N=80, dq_mode="shared")),
    ("128x64 t256 s3 tma overlap", dict(block_N=64, num_stages=3)),
    ("128x64 t256 s2 atomic2 overlap", dict(block_N=64, dq_mode="atomic2",
                                            dq_transposed=False)),
    ("128x32 t256 s2 atomic2 overlap", dict(block_N=32, dq_mode="atomic2",
                                            dq_transposed=False)),
    ("64x64 t128 s2 atomic2 overlap", dict(block_M=64, block_N=64, threads=128,
                                           dq_mode="atomic2", dq_transposed=False)),
    ("64x32 t128 s2 atomic (old tiles)", dict(block_M=64, block_N=32, threads=128,
                                               dq_mode="atomic", overlap=False,
                                               dq_transposed=False)),
]
CAUSAL_VARIANTS = VARIANTS[:6]
# wide query steps, which fit head dimension 64 only (dK, dV take half the registers)
WIDE_VARIANTS = [
    ("128x128 t256 s2 tma overlap", dict(block_N=128)),
    ("128x128 t256 s2 tma overlap, dQ not transposed", dict(block_N=128,
                                                             dq_transposed=False)),
]
TOL = 2e-2  # float16 gradients against float64: the example's own check is 1e-2 (norm-wise)


def nan_like(x, dtype=None):
    return torch.full(x.shape, float("nan"), device=x.device, dtype=dtype or x.dtype)


def max_err(outs, refs):
    errs = []
    for out, ref in zip(outs, refs):
        if torch.isnan(out).any():
            raise AssertionError("NaN in an output (elements left unwritten)")
        errs.append(((out.double() - ref).abs().max() / ref.abs().max()).item())
    return max(errs)


def sweep_mask(causal, shape, variants, compiled, timer, dev):
    B, H, S, D = shape
    flops = 2.5 * 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)  # 5 GEMMs
    prep, post = compiled["prep"], compiled["post"]

    def inputs():
        q, k, v, do = (torch.randn(B, S, H, D, device=dev, dtype=torch.float16)
                       for _ in range(4))
        o, lse = compiled[("fwd", causal)](q, k, v)
        return q, k, v, do, o, lse

    # the baseline: torch's fused attention backward (its forward is done once, outside)
    q, k, v, do, o, lse = inputs()
    dtype = torch.float16 if dev == "cuda" else torch.float32  # no fp16 SDPA on the CPU
    qt, kt, vt = (x.transpose(1, 2).to(dtype).contiguous().requires_grad_() for x in (q, k, v))
    ot = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    dot = do.transpose(1, 2).contiguous().to(dtype)
    base_ms = timer(lambda: torch.autograd.grad(ot, (qt, kt, vt), dot, retain_graph=True))
    print(f"mha bwd fp16 B{B} H{H} S{S} D{D}{' causal' if causal else ''}; baseline torch SDPA "
          f"backward {base_ms:.4f} ms", flush=True)
    print(f"{'name':40s} {'time_ms':>9s} {'TFLOP/s':>8s} {'baseline_ms':>11s} {'ratio':>6s} "
          f"{'max_err':>8s} {'main_ms':>9s}", flush=True)

    def run_bwd(main, q, k, v, do, o, lse, delta, dq_acc, dq, dk, dv):
        prep(o, do, delta, dq_acc)
        main(q, k, v, do, lse, delta, dq_acc, dk, dv)
        post(dq_acc, dq)

    for name, _ in variants:
        name = f"{'causal ' if causal else ''}{name}"
        try:
            main = compiled[(name, causal)]
            if isinstance(main, Exception):
                raise main
            # check on fresh inputs, every output and workspace poisoned first
            q2, k2, v2, do2, o2, lse2 = inputs()
            delta = torch.full((B, H, S), float("nan"), device=dev)
            dq_acc = nan_like(q2, torch.float32)
            dq, dk, dv = nan_like(q2), nan_like(k2), nan_like(v2)
            run_bwd(main, q2, k2, v2, do2, o2, lse2, delta, dq_acc, dq, dk, dv)
            b, h = 1, min(H, 2)  # float64 autograd on one sequence and two heads
            refs = ex.ref_grads(*(x[:b, :, :h] for x in (q2, k2, v2, do2)), causal)[1:]
            err = max_err([x[:b, :, :h] for x in (dq, dk, dv)], refs)
            if not err < TOL:
                raise AssertionError(f"max relative error {err:.2e} > {TOL:.0e}")
            del q2, k2, v2, do2, o2, lse2
            ms = timer(lambda: run_bwd(main, q, k, v, do, o, lse, delta, dq_acc, dq, dk, dv))
            main_ms = timer(lambda: main(q, k, v, do, lse, delta, dq_acc, dk, dv))
            print(f"{name:40s} {ms:9.4f} {flops / ms * 1e-9:8.1f} {base_ms:11.4f} "
                  f"{base_ms / ms:6.2f} {err:8.1e} {main_ms:9.4f}", flush=True)
        except Exception as e:  # noqa: BLE001 - one failed variant must not stop the sweep
            msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
            print(f"{name:40s} FAILED {type(e).__name__}: {msg[:160]}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true", help="tiny size on the CPU interpreter")
    ap.add_argument("--dim", type=int, default=None, help="head dimension (default: the "
                    "example's bench size, 128)")
    args = ap.parse_args()
    if not args.cpu and not torch.cuda.is_available():
        sys.exit("benchmarks/sweeps/mha_bwd.py needs a CUDA GPU (or --cpu for a plumbing check)")
    t0 = time.perf_counter()
    if args.cpu:
        dev, target, timer = "cpu", "cpu", wall_bench
        B, H, S, D, fcfg = 1, 2, 136, 64, dict()
        variants, causal_variants = VARIANTS[:3], CAUSAL_VARIANTS[:1]
    else:
        from bench_core import bench

        dev, target = "cuda", "cuda"
        timer = lambda fn: bench(fn, warmup=5, rep=20)  # noqa: E731 - ~15 ms per call
        B, H, S, D, fcfg, _ = ex.SIZES["bench"]
        D = args.dim or D
        arch = "sm_%d%d" % torch.cuda.get_device_capability()
        wide = WIDE_VARIANTS if D <= 64 else []
        variants = [(n, ex.fit_config(cfg, arch)) for n, cfg in VARIANTS + wide]
        causal_variants = [(n, ex.fit_config(cfg, arch)) for n, cfg in CAUSAL_VARIANTS + wide]
    shape = (B, H, S, D)

    # build everything first, in threads (lowering is Python, NVRTC runs in parallel)
    # (prim_func thunk, out_idx, pass configs besides the example's fast math)
    jobs = {"prep": (lambda: ex.bwd_preprocess.get_tir(*shape), None, {}),
            "post": (lambda: ex.bwd_postprocess.get_tir(*shape), None, {})}
    for causal, vs in ((False, variants), (True, causal_variants)):
        jobs[("fwd", causal)] = (lambda c=causal: ex.flash_fwd.get_tir(*shape, c, **fcfg),
                                 [3, 4], {})
        for name, cfg in vs:
            name = f"{'causal ' if causal else ''}{name}"
            cfg = dict(cfg)
            extra = cfg.pop("pass_configs", {})
            jobs[(name, causal)] = (lambda c=causal, cfg=cfg:
                                    ex.flash_bwd.get_tir(*shape, c, **cfg), None, extra)

    def build(job):
        func, out_idx, extra = job
        try:
            return ex.tilelang.compile(func(), out_idx=out_idx, target=target,
                                       pass_configs={**ex.FAST_MATH, **extra})
        except Exception as e:  # noqa: BLE001 - reported by the variant's line
            return e

    with ThreadPoolExecutor(max_workers=8) as pool:
        compiled = dict(zip(jobs, pool.map(build, jobs.values())))
    for key in ("prep", "post", ("fwd", False), ("fwd", True)):
        if isinstance(compiled[key], Exception):
            raise compiled[key]
    print(f"built {len(compiled)} kernels in {time.perf_counter() - t0:.1f} s", flush=True)
    torch.manual_seed(int(time.time()))
    sweep_mask(False, shape, variants, compiled, timer, dev)
    sweep_mask(True, shape, causal_variants, compiled, timer, dev)
    print(f"total {time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
