"""Tile-config sweep of the attention-forward examples (MHA, GQA) against torch SDPA.

    python benchmarks/sweeps/attention_examples.py [--only mha,gqa] [--mma-sync]  # H200: < 90 s
        [--head-groups 1,4] [--tiles 128/128,192/128] [--dim 64]
    python benchmarks/sweeps/attention_examples.py --cpu               # plumbing, tiny size

Each variant is the example's own kernel compiled with its pass configs (fast math; with
`--mma-sync` also `tl.disable_wgmma`, issue 4's FlashAttention-on-mma.sync target), run once on fresh random inputs (the allocator's block for the output is filled with
NaN first, since the factory allocates the output itself), checked against the
example's float64 reference on one sequence and two heads, and timed with
bench_core.bench_pair in alternating batches with SDPA on the same (contiguous) inputs. One line per variant:

    name  time_ms  TFLOP/s  sdpa_ms  ratio(sdpa / ours)  rel_err
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(ROOT))
import tilelang  # noqa: E402
from bench_core import wall_bench  # noqa: E402


def load(name: str):
    path = ROOT / "examples" / "flash_attention" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"sweep_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# (block_M, block_N, stages, threads)
VARIANTS = [(128, 128, 2, 256), (192, 128, 2, 384), (128, 64, 2, 256), (192, 64, 2, 384),
            (128, 64, 3, 256)]
# wider key tiles, which fit head dimension 64 only (half the output accumulator)
WIDE_VARIANTS = [(192, 192, 2, 384), (128, 256, 2, 256), (192, 128, 3, 384)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--only", default="mha,gqa")
    ap.add_argument("--mma-sync", action="store_true", help="no wgmma (sm_80 instructions)")
    ap.add_argument("--head-groups", default="4",
                    help="causal only: heads per scheduling group, comma-separated")
    ap.add_argument("--tiles", default="", help="only these block_M/block_N, e.g. 128/128")
    ap.add_argument("--dim", type=int, default=128, help="head dimension (GPU; default 128)")
    args = ap.parse_args()
    if args.cpu:
        B, H, S, D, device, variants, timer = 1, 4, 192, 64, "cpu", [(64, 64, 2, 128)], wall_bench
    else:
        from bench_core import bench as timer, bench_pair
        B, H, S, D, device, variants = 8, 32, 4096, args.dim, "cuda", VARIANTS
        variants = variants + (WIDE_VARIANTS if D <= 64 else [])
        print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    sdpa = torch.nn.functional.scaled_dot_product_attention
    print(f"{'name':44s} {'time_ms':>9s} {'TFLOP/s':>8s} {'sdpa_ms':>9s} {'ratio':>6s} "
          f"{'rel_err':>8s}", flush=True)
    for family in args.only.split(","):
        ex = load("example_mha_fwd" if family == "mha" else "example_gqa_fwd")
        groups = 1 if family == "mha" else 4
        torch.manual_seed(0)
        q = torch.randn(B, S, H, D, device=device, dtype=torch.float16)
        k, v = (torch.randn(B, S, H // groups, D, device=device, dtype=torch.float16)
                for _ in range(2))
        qt, kt, vt = (x.transpose(1, 2).contiguous() for x in (q, k, v))
        for causal in (False, True):
            flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
            extra = {} if groups == 1 else dict(enable_gqa=True)
            base = timer(lambda: sdpa(qt, kt, vt, is_causal=causal, **extra))
            ref = ex.ref_program(q[:1, :, :2 * groups], k[:1, :, :2], v[:1, :, :2], causal) \
                if groups > 1 else ex.ref_program(q[:1, :, :2], k[:1, :, :2], v[:1, :, :2],
                                                  causal)
            head_groups = [int(g) for g in args.head_groups.split(",")] if causal else [4]
            for (bm, bn, stages, threads), hg in ((v, g) for v in variants for g in head_groups):
                if args.tiles and f"{bm}/{bn}" not in args.tiles.split(","):
                    continue
                name = f"{family} {bm}/{bn} s{stages} t{threads} c={int(causal)}"
                name += f" hg{hg}" if causal else ""
                tiles = dict(block_M=bm, block_N=bn, num_stages=stages, threads=threads,
                             head_group=hg)
                configs = dict(ex.FAST_MATH)
                if args.mma_sync:
                    configs[tilelang.PassConfigKey.TL_DISABLE_WGMMA] = True
                    name += " mma.sync"
                try:
                    if groups == 1:
                        func = ex.flash_attention_fwd.get_tir(B, H, S, D, causal, **tiles)
                    else:
                        func = ex.flash_attention_gqa.get_tir(B, H, S, D, groups, causal,
                                                              **tiles)
                    kern = tilelang.compile(func, out_idx=[3], pass_configs=configs,
                                            target="cpu" if args.cpu else "auto")
                    poison = torch.full_like(q, float("nan"))
                    del poison  # the output below reuses this block
                    out = kern(q, k, v)
                    got = out[:1, :, :2 * groups] if groups > 1 else out[:1, :, :2]
                    err = ((got.double() - ref).norm() / ref.norm()).item()
                    if not err < 5e-3:  # NaN fails too
                        print(f"{name:44s} FAILED relative error {err:.2e}", flush=True)
                        continue
                    if args.cpu:
                        ms = timer(lambda: kern(q, k, v))
                    else:  # SDPA again, in alternating batches with this variant
                        ms, base = bench_pair(lambda: kern(q, k, v), lambda: sdpa(
                            qt, kt, vt, is_causal=causal, **extra))
                    print(f"{name:44s} {ms:9.4f} {flops / ms / 1e9:8.1f} {base:9.4f} "
                          f"{base / ms:6.2f} {err:8.1e}", flush=True)
                except Exception as e:  # noqa: BLE001 - one failure must not hide the rest
                    print(f"{name:44s} FAILED {type(e).__name__}: {str(e)[:200]}", flush=True)


if __name__ == "__main__":
    main()
