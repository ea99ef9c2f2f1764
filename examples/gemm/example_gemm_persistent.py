"""Persistent GEMM: one block per multiprocessor, each walking a list of output tiles.

    python examples/gemm/example_gemm_persistent.py

The same tiled GEMM as example_gemm.py, launched with as many blocks as the GPU has
multiprocessors instead of one block per tile:

    for by, bx in T.Persistent([tiles along M, tiles along N], num_blocks, block_id):
        ... one output tile ...

Block b computes tiles b, b + num_blocks, b + 2 num_blocks, ..., visited `group_size` tile
rows at a time (column by column within a group), so the tiles in flight at once share rows
of A and columns of B in L2. On Hopper the K loop inside keeps its TMA producer warpgroup:
the producer runs the tile loop too and loads the next tile's first K steps while the
consumers store this tile's result (the mbarrier ring position counts the K steps of all the
tiles before). Ragged M, N, K are fine: the last wave of tiles may be partial, edge tiles read
zeros and store only their inside.

Runs on the GPU when there is one, else on the CPU interpreter at a small size.
"""

import torch

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def matmul_persistent(M, N, K, num_blocks, block_M=128, block_N=128, block_K=32,
                      num_stages=3, threads=128, group_size=8, dtype="float16",
                      accum_dtype="float32"):

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(num_blocks, threads=threads) as block_id:
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            for by, bx in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(N, block_N)],
                                       num_blocks, block_id, group_size=group_size):
                T.clear(C_local)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                    T.copy(A[by * block_M, k * block_K], A_shared)
                    T.copy(B[k * block_K, bx * block_N], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
                T.copy(C_local, C[by * block_M, bx * block_N])

    return main


# (M, N, K, blocks, tile config); "small" is ragged on purpose (15 tiles on 4 blocks).
# "bench": H200, benchmarks/sweeps/gemm.py: 128/256/64 s3, groups of 8 tile rows, 0.97x cuBLAS
# at 4096^3 and 0.99x at 8192^3 (row-major order 0.95x / 0.99x; on cp.async 0.68x / 0.62x);
# 1.00x at 4096^3 in run_all since the uniform wgmma descriptors (docs/perf.md).
SIZES = {
    "small": (200, 136, 72, 4, dict(block_M=64, block_N=32, block_K=32)),
    "medium": (1000, 1000, 1000, 16, dict()),
    "bench": (4096, 4096, 4096, 132, dict(block_M=128, block_N=256, block_K=64, num_stages=3,
                                          threads=256)),
}


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def programs(size="bench"):
    M, N, K, blocks, cfg = SIZES[size]
    return [("gemm_persistent", matmul_persistent.get_tir(M, N, K, blocks, **cfg))]


def run(device=None, size="small"):
    """Build the kernel, check it against torch on fresh random inputs, and return
    [{name, tilelang, baseline, baseline_name, flops, error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    M, N, K, blocks, cfg = SIZES[size]
    if device == "cuda" and size == "bench":  # one block per multiprocessor
        blocks = torch.cuda.get_device_properties(0).multi_processor_count
    kernel = matmul_persistent(M, N, K, blocks, **cfg)
    a = torch.randn(M, K, device=device, dtype=torch.float16)
    b = torch.randn(K, N, device=device, dtype=torch.float16)
    err = check(kernel(a, b), a.double() @ b.double(), 2e-3)
    return [dict(name=f"gemm persistent fp16 {M}x{N}x{K} ({blocks} blocks)",
                 tilelang=lambda: kernel(a, b), baseline=lambda: a @ b,
                 baseline_name="torch.matmul (cuBLAS)", flops=2.0 * M * N * K, error=err)]


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
