"""L2-friendly GEMM: block rasterisation with `T.use_swizzle` (seed document 004).

    python examples/gemm/example_gemm_swizzle.py

Blocks of a grid are launched in blockIdx order. In a large GEMM that means one row of C tiles
after another: every block of the row needs a different slice of B, so by the time the next
row starts, the slices of B it needs have left the L2 cache. `T.use_swizzle(panel_size=p)`
renumbers the blocks so that they walk the grid in panels `p` tiles wide; consecutive blocks
then share tiles of both A and B while they are still in L2. Results are unchanged (every tile
is still computed exactly once); only the order changes, and whether it helps depends on the
shape, so the panel size is best treated as a tuning knob (`panel_size=0` turns it off).

As in the seed document, the B tile is loaded by an element-wise `T.Parallel` loop rather
than `T.copy`: both forms are tile-level loads the compiler maps onto the threads (a loop that
only copies a global window into shared memory is pipelined like a `T.copy`, by TMA on
Hopper). The "bench" size uses the tile of example_gemm.py's large GEMM: 128 x 256 x 64 on
two wgmma warpgroups (256 threads), 3 stages.

Runs on the GPU when there is one, else on the CPU interpreter at a small size.
"""

import torch

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def matmul_swizzle(M, N, K, block_M=128, block_N=128, block_K=32, panel_size=10,
                   num_stages=3, threads=128, dtype="float16", accum_dtype="float"):

    @T.prim_func
    def gemm_schedule(
            A: T.Tensor((M, K), dtype),
            B: T.Tensor((K, N), dtype),
            C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            T.use_swizzle(panel_size=panel_size)  # panel_size=0: launch order unchanged
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                for k, j in T.Parallel(block_K, block_N):
                    B_shared[k, j] = B[ko * block_K + k, bx * block_N + j]
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_schedule


SIZES = {
    "small": (260, 200, 96, dict(block_M=64, block_N=64), (0, 2)),
    "medium": (1500, 1300, 700, dict(), (0, 4)),
    "bench": (16384, 16384, 16384, dict(block_M=128, block_N=256, block_K=64, threads=256),
              (0, 10)),
}


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def programs(size="bench"):
    M, N, K, cfg, panels = SIZES[size]
    return [(f"gemm_swizzle_p{p}", matmul_swizzle.get_tir(M, N, K, panel_size=p, **cfg))
            for p in panels]


def run(device=None, size="small"):
    """Build the kernel without and with swizzling, check both against torch on fresh random
    inputs, and return [{name, tilelang, baseline, baseline_name, flops, error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    M, N, K, cfg, panels = SIZES[size]
    a = torch.rand(M, K, device=device, dtype=torch.float16) - 0.5
    b = torch.rand(K, N, device=device, dtype=torch.float16) - 0.5
    ref = a.double() @ b.double()
    cases = []
    for p in panels:
        kernel = matmul_swizzle(M, N, K, panel_size=p, **cfg)
        err = check(kernel(a, b), ref, 2e-3)
        cases.append(dict(name=f"gemm fp16 {M}x{N}x{K} panel_size={p}",
                          tilelang=lambda kernel=kernel: kernel(a, b),
                          baseline=lambda: torch.matmul(a, b),
                          baseline_name="torch.matmul (cuBLAS)", flops=2.0 * M * N * K,
                          error=err))
    return cases


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
