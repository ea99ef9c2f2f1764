"""Split-K GEMM: C += A @ B with the K dimension split over blocks and atomic adds.

    python examples/gemm/example_gemm_splitk.py

When M and N are small and K is large, a plain tiled GEMM has too few output tiles to fill
the GPU. Split-K adds a third grid dimension: block (bx, by, bz) multiplies its tile over the
bz-th slice of K only, and the partial tiles are summed into C with atomic adds. C must be
zeroed before the launch (the kernel accumulates into it), so it is an argument here, not an
`out_idx` output. Each slice is a whole number of block_K steps, so no K-step is counted by
two slices; steps past the end of K read zeros.

Choosing the split: enough blocks to fill the GPU once (1024x1024 in 128x256 tiles is 32
tiles; split 4 makes 128 blocks for 132 SMs) and no more, because every extra slice adds a
full tile of atomics. With `vector_atomics=True` the accumulator is first staged in shared
memory and each thread adds 4 consecutive floats with one `T.atomic_addx4` (a single
vector reduction on sm_90) instead of the 2 pairs the gemm's register layout gives it
(`T.atomic_add` of the fragment adds each pair with one 2-wide atomic); that needs N % 4 == 0 and
block_M * block_N * 4 bytes of shared memory on top of the pipeline.

With `cluster_sum=True` (sm_90) the split_k slices of a tile form a thread block cluster and
`T.store_cluster_sum` writes C = A @ B: the first slice stores its tile, the others add
theirs with the TMA unit once it is there, so C need not be zeroed first (split_k <= 8).
A cluster's blocks must run at once on one GPU processing cluster, though: at the bench
size the 32 clusters of four 128x256 tiles do not all fit, and the option is slower
(0.57x against 1.04x on an H200); the int4 example's clusters of two do fit.

Runs on the GPU when there is one, else on the CPU interpreter at a small size.
"""

import torch

import tilelang
import tilelang.language as T


@tilelang.jit
def matmul_splitk(M, N, K, split_k, block_M=128, block_N=256, block_K=64, num_stages=2,
                  threads=256, vector_atomics=True, tma_atomics=False, cluster_sum=False,
                  dtype="float16", accum_dtype="float32", out_dtype="float32"):
    k_steps = T.ceildiv(T.ceildiv(K, block_K), split_k)  # K-steps per slice (a Python int)
    assert not vector_atomics or N % 4 == 0, "4-wide atomics need rows of whole vectors"

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=threads,
                      cluster_dims=(1, 1, split_k) if cluster_sum else None) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(C_local)
            for ko in T.Pipelined(k_steps, num_stages=num_stages):
                k = bz * k_steps + ko
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)

            if cluster_sum:
                C_shared = T.alloc_shared((block_M, block_N), accum_dtype)
                T.annotate_layout({C_shared: tilelang.layout.make_swizzled_layout(C_shared)})
                T.copy(C_local, C_shared)
                T.store_cluster_sum(C[by * block_M, bx * block_N], C_shared)
            elif tma_atomics:
                # staged in shared memory (in the pipeline's dead stage buffers) and added by
                # the TMA unit: one thread issues the reduction (element-wise atomics where
                # there is no TMA)
                C_shared = T.alloc_shared((block_M, block_N), accum_dtype)
                T.annotate_layout({C_shared: tilelang.layout.make_swizzled_layout(C_shared)})
                T.copy(C_local, C_shared)
                T.atomic_add(C[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N],
                             C_shared, use_tma=True)
            elif vector_atomics:
                # the gemm's register layout gives a thread pairs of columns; shared memory
                # lets every thread pick up 4 consecutive ones
                C_shared = T.alloc_shared((block_M, block_N), accum_dtype)
                T.copy(C_local, C_shared)
                for i, j in T.Parallel(block_M, block_N // 4):
                    T.atomic_addx4(C[by * block_M + i, bx * block_N + j * 4], C_shared[i, j * 4])
            else:
                T.atomic_add(C[by * block_M, bx * block_N], C_local)

    return main


# (M, N, K, split_k, tile config)
SIZES = {
    "small": (100, 72, 500, 3, dict(block_M=64, block_N=64, block_K=32, num_stages=3,
                                    threads=128)),
    "medium": (520, 260, 7000, 4, dict(block_M=64, block_N=64, block_K=32, num_stages=3,
                                       threads=128)),
    # measured on an H200 (benchmarks/sweeps/gemm_examples.py, 2026-11-22): TMA reductions of
    # the staged tile 1.04x cuBLAS (C zeroed first), scalar atomics 0.95-0.96x, staged 4-wide
    # atomics 0.82x; cluster_sum 0.57x (split 8: 0.65x): not all 32 clusters of 4 blocks fit
    # on the GPU at once, so a second wave runs
    "bench": (1024, 1024, 32768, 4, dict(num_stages=3, tma_atomics=True)),
}
# Ampere has neither TMA nor vector float atomics: scalar atomics from the registers.
SM80_CONFIG = dict(vector_atomics=False, tma_atomics=False, cluster_sum=False, num_stages=3)


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def programs(size="bench", arch="sm_90a"):
    M, N, K, split_k, cfg = SIZES[size]
    if arch != "sm_90a":
        cfg = {**cfg, **SM80_CONFIG}
    return [("gemm_splitk", matmul_splitk.get_tir(M, N, K, split_k, **cfg))]


def run(device=None, size="small"):
    """Build the kernel, check it against torch on fresh random inputs, and return
    [{name, tilelang, baseline, baseline_name, flops, error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    M, N, K, split_k, cfg = SIZES[size]
    if device == "cuda" and torch.cuda.get_device_capability()[0] < 9:
        cfg = {**cfg, **SM80_CONFIG}
    kernel = matmul_splitk(M, N, K, split_k, **cfg)
    a = torch.randn(M, K, device=device, dtype=torch.float16)
    b = torch.randn(K, N, device=device, dtype=torch.float16)
    accumulates = not cfg.get("cluster_sum")  # else C = A @ B, its old contents ignored
    c = torch.zeros(M, N, device=device, dtype=torch.float32) if accumulates else \
        torch.full((M, N), float("nan"), device=device, dtype=torch.float32)
    kernel(a, b, c)
    err = check(c, a.double() @ b.double(), 1e-3)

    def tilelang_call():
        if accumulates:
            c.zero_()  # part of the operation: the kernel accumulates into C
        kernel(a, b, c)

    return [dict(name=f"split-K gemm fp16->fp32 {M}x{N}x{K} split={split_k}",
                 tilelang=tilelang_call, baseline=lambda: torch.matmul(a, b).float(),
                 baseline_name="torch.matmul (cuBLAS) + cast", flops=2.0 * M * N * K,
                 error=err)]


def main():
    gpu = torch.cuda.is_available()
    for case in run("cuda" if gpu else "cpu", "bench" if gpu else "small"):
        line = f"{case['name']}: relative error {case['error']:.1e}"
        if gpu:
            from tilelang.profiler import do_bench

            ms = do_bench(case["tilelang"], return_mode="median")
            ref_ms = do_bench(case["baseline"], return_mode="median")
            line += (f", {ms:.4f} ms ({case['flops'] / ms * 1e-9:.1f} TFLOP/s), "
                     f"{case['baseline_name']} {ref_ms:.4f} ms, speedup {ref_ms / ms:.2f}x")
        print(line)


if __name__ == "__main__":
    main()
