"""Tile-config sweep of the GEMM-family examples against their run_all.py baselines.

    python benchmarks/sweeps/gemm_examples.py [--only gemm,swizzle,splitk,dequant,dequant_rs]
                                              [--rep 50]
    python benchmarks/sweeps/gemm_examples.py --cpu     # plumbing check, tiny sizes

For each kernel family (examples/gemm/example_gemm.py at 8192^3, example_gemm_swizzle.py at
16384^3, example_gemm_splitk.py at 1024x1024x32768, dequantize_gemm/example_dequant_gemm_int4.py
at 256x8192x8192 group 128, through shared memory and, as dequant_rs, in registers) a
handful of configs is built from the example's own kernel
function, run once on fresh random inputs (outputs poisoned with NaN first, or zeroed where
the kernel accumulates) and checked against a float32 torch reference, then timed with
bench_core.bench_pair (CUDA events, L2 flushed, median; the variant and the baseline that
run_all.py uses in alternating batches, so each ratio compares like with like).
The first variant of each family is the config the example used before this sweep existed,
the one marked "*" is the example's current default. One line per variant:

    name  time_ms  rate  baseline_ms  ratio  max_err

ratio = baseline / ours (above 1: faster than the baseline); max_err = max |ours - ref| /
max |ref|. A variant that fails to build, run or check prints FAILED and the sweep goes on.
`--cpu` runs tiny sizes on the CPU interpreter with wall-clock times: it only checks the
plumbing.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(ROOT))
import tilelang  # noqa: E402
from bench_core import wall_bench  # noqa: E402


def load(rel: str):
    path = ROOT / rel
    spec = importlib.util.spec_from_file_location(f"sweep_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cfg(bm, bn, bk, stages, threads, **extra):
    return dict(block_M=bm, block_N=bn, block_K=bk, num_stages=stages, threads=threads, **extra)


def tag(c):
    extra = "".join(f" {k}={v}" for k, v in c.items()
                    if k not in ("block_M", "block_N", "block_K", "num_stages", "threads"))
    return (f"{c['block_M']}/{c['block_N']}/{c['block_K']} s{c['num_stages']} "
            f"t{c['threads']}{extra}")


# ---- the families: sizes, variants (first = previous default), the example's default -------

def gemm_family(cpu):
    ex = load("examples/gemm/example_gemm.py")
    sw = load("examples/gemm/example_gemm_swizzle.py")
    M = N = K = 256 if cpu else 8192
    variants = [
        ("gemm", ex.matmul, cfg(128, 256, 32, 3, 256)),
        ("gemm", ex.matmul, cfg(128, 256, 64, 3, 256)),
        ("gemm", ex.matmul, cfg(128, 256, 64, 4, 256)),
        ("gemm", ex.matmul, cfg(256, 128, 64, 3, 256)),
        ("gemm+swizzle", sw.matmul_swizzle, cfg(128, 256, 64, 3, 256, panel_size=8)),
        ("gemm+swizzle", sw.matmul_swizzle, cfg(128, 256, 64, 3, 256, panel_size=16)),
        ("gemm+swizzle", sw.matmul_swizzle, cfg(256, 128, 64, 3, 256, panel_size=8)),
        ("gemm", ex.matmul, cfg(128, 256, 64, 3, 256)),   # again: the spread within one run
    ]
    return dict(title=f"gemm fp16 {M}x{N}x{K}", shape=(M, N, K), variants=variants,
                default=ex.SIZES["bench"][3], kind="gemm", baseline_name="cuBLAS")


def swizzle_family(cpu):
    sw = load("examples/gemm/example_gemm_swizzle.py")
    M = N = K = 256 if cpu else 16384
    variants = [
        ("swizzle", sw.matmul_swizzle, cfg(128, 128, 32, 3, 128, panel_size=10)),
        ("swizzle", sw.matmul_swizzle, cfg(128, 256, 64, 3, 256, panel_size=0)),
        ("swizzle", sw.matmul_swizzle, cfg(128, 256, 64, 3, 256, panel_size=10)),
        ("swizzle", sw.matmul_swizzle, cfg(128, 256, 64, 4, 256, panel_size=4)),
    ]
    default = dict(sw.SIZES["bench"][3], panel_size=sw.SIZES["bench"][4][-1])
    return dict(title=f"gemm (T.Parallel B load) fp16 {M}x{N}x{K}", shape=(M, N, K),
                variants=variants, default=default, kind="gemm", baseline_name="cuBLAS",
                rep=20)


def splitk_family(cpu):
    ex = load("examples/gemm/example_gemm_splitk.py")
    M, N, K = (128, 256, 1024) if cpu else (1024, 1024, 32768)
    f = ex.matmul_splitk
    variants = [
        ("splitk", f, cfg(128, 128, 32, 3, 128, split_k=8, vector_atomics=False)),
        ("splitk", f, cfg(128, 256, 64, 3, 256, split_k=4, vector_atomics=False)),
        ("splitk", f, cfg(128, 256, 64, 2, 256, split_k=4, vector_atomics=True)),
        ("splitk", f, cfg(128, 256, 32, 3, 256, split_k=4, vector_atomics=True)),
        ("splitk", f, cfg(128, 128, 64, 3, 256, split_k=4, vector_atomics=True)),
        ("splitk", f, cfg(128, 256, 64, 3, 256, split_k=8, vector_atomics=False)),
        ("splitk", f, cfg(128, 256, 64, 3, 256, split_k=4, tma_atomics=True)),
        ("splitk", f, cfg(128, 256, 64, 3, 256, split_k=8, tma_atomics=True)),
        ("splitk", f, cfg(128, 128, 64, 4, 256, split_k=4, tma_atomics=True)),
        # the slices of a tile as a cluster storing their sum: no zeroing of C
        ("splitk", f, cfg(128, 256, 64, 3, 256, split_k=4, cluster_sum=True)),
        ("splitk", f, cfg(128, 256, 64, 3, 256, split_k=8, cluster_sum=True)),
    ]
    default = dict(_defaults(f), split_k=ex.SIZES["bench"][3], **ex.SIZES["bench"][4])
    return dict(title=f"split-K gemm fp16->fp32 {M}x{N}x{K}", shape=(M, N, K),
                variants=variants, default=default, kind="splitk",
                baseline_name="cuBLAS + cast")


def dequant_family(cpu):
    ex = load("examples/dequantize_gemm/example_dequant_gemm_int4.py")
    M, N, K, G = (64, 128, 256, 128) if cpu else (256, 8192, 8192, 128)
    f = ex.dequant_gemm_int4
    variants = [
        ("dequant", f, cfg(128, 128, 128, 3, 256)),
        ("dequant", f, cfg(128, 128, 64, 4, 256)),
        ("dequant", f, cfg(256, 64, 128, 2, 256)),
        ("dequant", f, cfg(256, 64, 128, 2, 256, wgmma_overlap=False)),
        ("dequant", f, cfg(256, 64, 64, 3, 256)),
        ("dequant", f, cfg(128, 64, 128, 3, 256)),
        ("dequant", f, cfg(64, 128, 128, 3, 128)),
        ("dequant", f, cfg(256, 64, 64, 4, 256)),
        ("dequant", f, cfg(256, 64, 64, 4, 256, wgmma_overlap=False)),
        ("dequant", f, cfg(128, 128, 64, 3, 256)),
        ("dequant", f, cfg(128, 128, 128, 2, 256)),
        # split-K: half of A per block, twice the N per block (A is re-read by every block)
        ("dequant", f, cfg(256, 128, 64, 3, 256, split_k=2)),
        ("dequant", f, cfg(256, 128, 64, 4, 256, split_k=2)),
        ("dequant", f, cfg(256, 128, 128, 2, 256, split_k=2)),
        ("dequant", f, cfg(256, 128, 64, 3, 256, split_k=2, wgmma_overlap=False)),
        ("dequant", f, cfg(256, 64, 128, 2, 256, split_k=2)),
        # four consumer warpgroups of 64 rows: half the expansion per thread, twice the warps
        # to hide its latency (96 registers a thread: 64 accumulators)
        ("dequant", f, cfg(256, 128, 64, 3, 512, split_k=2)),
        ("dequant", f, cfg(256, 128, 64, 4, 512, split_k=2)),
        ("dequant", f, cfg(256, 64, 64, 4, 512)),
        # clusters: A (all of M) multicast to the blocks of a cluster along N
        ("dequant", f, cfg(256, 64, 128, 2, 256, cluster=2)),
        ("dequant", f, cfg(256, 64, 64, 4, 256, cluster=2)),
        ("dequant", f, cfg(256, 64, 64, 3, 256, cluster=4)),
        ("dequant", f, cfg(256, 128, 64, 3, 256, split_k=2, cluster=2)),
        ("dequant", f, cfg(256, 128, 64, 3, 256, split_k=2, cluster=4)),
        ("dequant", f, cfg(256, 64, 128, 2, 256, split_k=2, cluster=2)),
    ]
    return dict(title=f"int4 dequant gemm (group {G}) {M}x{N}x{K}", shape=(M, N, K, G),
                variants=variants, default=dict(_defaults(f), **ex.SIZES["bench"][4]),
                kind="dequant", module=ex, baseline_name="cuBLAS fp16 on dequantised W",
                note="(before this sweep the example took 0.440 ms with a per-element "
                     "expansion that read scales from global memory)")


def dequant_rs_family(cpu):
    """The register-operand kernel (dequant_gemm_int4_rs): weights expanded into the wgmma's
    A fragment, codes in fragment order."""
    ex = load("examples/dequantize_gemm/example_dequant_gemm_int4.py")
    M, N, K, G = (64, 128, 256, 128) if cpu else (256, 8192, 8192, 128)
    f = ex.dequant_gemm_int4_rs
    small = dict(block_M=64, block_N=64, block_K=64, threads=128) if cpu else {}

    def rs(bm, bn, bk, stages, threads, **extra):
        return ("dequant_rs", f, dict(cfg(bm, bn, bk, stages, threads, **extra), **small))

    variants = [
        rs(256, 128, 64, 4, 256, split_k=2),
        rs(256, 128, 64, 3, 256, split_k=2),
        rs(256, 128, 64, 4, 256, split_k=2, wgmma_overlap=False),
        rs(256, 128, 64, 3, 256, split_k=2, wgmma_overlap=False),
        rs(256, 128, 128, 2, 256, split_k=2),
        rs(256, 128, 64, 4, 256, split_k=4),
        rs(256, 64, 64, 4, 128, split_k=1),
        rs(256, 128, 64, 5, 256, split_k=2),
        rs(128, 256, 64, 4, 256, split_k=2),
        rs(128, 128, 64, 4, 256, split_k=1),
        rs(128, 128, 64, 4, 256, split_k=2),
    ]
    return dict(title=f"int4 dequant gemm, weights in registers (group {G}) {M}x{N}x{K}",
                shape=(M, N, K, G), variants=variants,
                default=dict(_defaults(f), **ex.RS_SIZES["bench"][4]), kind="dequant_rs",
                module=ex, baseline_name="cuBLAS fp16 on dequantised W")


FAMILIES = {"gemm": gemm_family, "swizzle": swizzle_family, "splitk": splitk_family,
            "dequant": dequant_family, "dequant_rs": dequant_rs_family}


def _defaults(jit_fn):
    import inspect

    fn = getattr(jit_fn, "func", None) or getattr(jit_fn, "__wrapped__", None) or jit_fn
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    return {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty}


# ---- one variant ---------------------------------------------------------------------------

def setup(family, device):
    """Inputs, the reference, the output buffer and the baseline call for a family."""
    kind = family["kind"]
    g = torch.Generator(device=device)
    g.seed()  # fresh inputs every run

    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device)

    if kind in ("gemm", "splitk"):
        M, N, K = family["shape"]
        a, b = randn(M, K).half(), randn(K, N).half()
        ref = a.float() @ b.float()
        if kind == "gemm":
            return dict(args=(a, b), ref=ref, out_dtype=torch.float16,
                        baseline=lambda: a @ b, flops=2.0 * M * N * K, shape=(M, N))
        return dict(args=(a, b), ref=ref, out_dtype=torch.float32,
                    baseline=lambda: torch.matmul(a, b).float(), flops=2.0 * M * N * K,
                    shape=(M, N))
    M, N, K, G = family["shape"]
    ex = family["module"]
    a = randn(M, K).half()
    packed, scale = ex.quantize_int4(randn(N, K), G)
    w = ex.dequantize_int4(packed, scale, G)
    ref = a.float() @ w.float().t()
    words = ex.fragment_words(packed) if kind == "dequant_rs" else packed.view(torch.int32)
    return dict(args=(a, words, scale), ref=ref, out_dtype=torch.float16,
                baseline=lambda: a @ w.t(), flops=2.0 * M * N * K, shape=(M, N))


def build(family, jit_fn, c, target):
    c = dict(c)
    configs = {} if c.pop("wgmma_overlap", True) else {"tl.disable_wgmma_overlap": True}
    if family["kind"] == "splitk":
        M, N, K = family["shape"]
        func = jit_fn.get_tir(M, N, K, c.pop("split_k"), **c)
    elif family["kind"] in ("dequant", "dequant_rs"):
        M, N, K, G = family["shape"]
        func = jit_fn.get_tir(M, N, K, G, **c)
    else:
        M, N, K = family["shape"]
        func = jit_fn.get_tir(M, N, K, **c)
    # no out_idx: the sweep owns (and poisons) the output
    return tilelang.compile(func, target=target, pass_configs=configs)


def accumulates(family, c) -> bool:
    """Whether the kernel adds into C (zeroed before each call, inside the timing): split-K
    kernels, except those whose K slices store their cluster's sum (`T.store_cluster_sum`:
    the register int4 kernel, `cluster_sum=True`)."""
    if family["kind"] == "dequant_rs" or c.get("cluster_sum"):
        return False
    return family["kind"] == "splitk" or c.get("split_k", 1) > 1


def run_variant(family, data, name, jit_fn, c, target, timer, rep, base_ms, pair=None):
    kernel = build(family, jit_fn, c, target)
    out = torch.empty(*data["shape"], dtype=data["out_dtype"], device=data["ref"].device)
    if accumulates(family, c):
        out.zero_()  # the kernel accumulates into C

        def call():
            out.zero_()
            kernel(*data["args"], out)
    else:
        out.fill_(float("nan"))

        def call():
            kernel(*data["args"], out)
    kernel(*data["args"], out)
    ref = data["ref"]
    got = out.float()
    if torch.isnan(got).any():
        raise AssertionError("NaN in the output (unwritten or wrong elements)")
    rel = ((got - ref).norm() / ref.norm()).item()
    max_err = ((got - ref).abs().max() / ref.abs().max()).item()
    if rel > 2e-3:
        raise AssertionError(f"relative error {rel:.2e} exceeds 2e-3")
    if pair is None:
        return timer(call, rep), base_ms, max_err
    return (*pair(call, data["baseline"], rep=rep), max_err)  # same clocks for both sides


def sweep(key, cpu, rep):
    family = FAMILIES[key](cpu)
    device = "cpu" if cpu else "cuda"
    target = "cpu" if cpu else "cuda"
    pair = None
    if cpu:
        timer = lambda fn, rep: wall_bench(fn, warmup=1)  # noqa: E731
    else:
        from bench_core import bench, bench_pair as pair

        timer = lambda fn, rep: bench(fn, rep=rep)  # noqa: E731
    rep = family.get("rep", rep)
    print(f"# {family['title']}  baseline: {family['baseline_name']} "
          f"{family.get('note', '')}", flush=True)
    try:
        data = setup(family, device)
        base_ms = timer(data["baseline"], rep)
    except Exception as e:  # no inputs or baseline: nothing to compare with
        print(f"{key}: FAILED setting up: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        return
    default = family["default"]
    for name, jit_fn, c in family["variants"]:
        is_default = name != "gemm+swizzle" and all(default.get(k) == v for k, v in c.items())
        label = f"{name} {tag(c)}{' *' if is_default else ''}"
        t0 = time.perf_counter()
        try:
            ms, base_ms, max_err = run_variant(family, data, name, jit_fn, c, target, timer,
                                               rep, base_ms, pair)
        except Exception as e:  # one failing config must not hide the others
            msg = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
            print(f"{label:52s} FAILED {type(e).__name__}: {msg}", flush=True)
            continue
        rate = data["flops"] / (ms * 1e-3) / 1e12
        print(f"{label:52s} {ms:9.4f} {rate:7.1f}TF {base_ms:9.4f} {base_ms / ms:6.2f}x "
              f"{max_err:8.1e}   ({time.perf_counter() - t0:.1f} s)", flush=True)
        if not cpu:
            torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated families: "
                    + ",".join(FAMILIES))
    ap.add_argument("--rep", type=int, default=50, help="timed runs per measurement")
    ap.add_argument("--cpu", action="store_true", help="plumbing check on the CPU interpreter")
    args = ap.parse_args()
    if not args.cpu and not torch.cuda.is_available():
        sys.exit("gemm_examples.py needs a CUDA GPU (or --cpu for a plumbing check)")
    print("device: " + ("CPU interpreter (plumbing check: times are meaningless)" if args.cpu
                        else torch.cuda.get_device_name()), flush=True)
    print(f"{'name':52s} {'time_ms':>9s} {'rate':>9s} {'base_ms':>9s} {'ratio':>7s} "
          f"{'max_err':>8s}", flush=True)
    t0 = time.perf_counter()
    for key in FAMILIES:
        if args.only and key not in args.only.split(","):
            continue
        sweep(key, args.cpu, args.rep)
    print(f"total {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
