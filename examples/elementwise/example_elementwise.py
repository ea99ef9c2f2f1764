"""Element-wise kernels: vector add, GELU, and a fused bias-add + GELU.

    python examples/elementwise/example_elementwise.py

Each block takes a tile of the tensor and a `T.Parallel` loop computes one element per
iteration; the compiler spreads the iterations over the threads and vectorises the loads.
Accesses past the end of the tensor are guarded (loads give 0, stores are dropped), so sizes
need not be multiples of the tile. Math runs in float32 and is rounded once on the store.

Runs on the GPU when there is one, else on the CPU interpreter at a small size.
"""

import torch

import tilelang
import tilelang.language as T


# 2048 elements on 256 threads: one 16-byte vector of each operand per thread (H200,
# benchmarks/sweeps/elementwise.py: 4136 GB/s, 1.00x torch; 1024 elements, 8-byte vectors: 0.98x)
@tilelang.jit(out_idx=[2])
def vector_add(N, block_N=2048, threads=256, dtype="float16"):

    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), threads=threads) as bx:
            for i in T.Parallel(block_N):
                C[bx * block_N + i] = A[bx * block_N + i] + B[bx * block_N + i]

    return main


@T.macro
def gelu(x):
    # the exact (erf) form, as torch.nn.functional.gelu(approximate="none")
    return 0.5 * x * (1.0 + T.erf(x * 0.7071067811865476))


@tilelang.jit(out_idx=[1])
def gelu_2d(M, N, block_M=32, block_N=256, threads=256, dtype="float16"):

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                x = T.cast(X[by * block_M + i, bx * block_N + j], "float32")
                Y[by * block_M + i, bx * block_N + j] = gelu(x)

    return main


@tilelang.jit(out_idx=[2])
def bias_gelu(M, N, block_M=32, block_N=256, threads=256, dtype="float16"):
    """Y = gelu(X + bias[None, :]): the tile is staged through registers with T.copy."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Bias: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            x = T.alloc_fragment((block_M, block_N), "float32")
            b = T.alloc_fragment((block_N,), "float32")
            T.copy(X[by * block_M, bx * block_N], x)
            T.copy(Bias[bx * block_N], b)
            for i, j in T.Parallel(block_M, block_N):
                x[i, j] = gelu(x[i, j] + b[j])
            T.copy(x, Y[by * block_M, bx * block_N])

    return main


SIZES = {
    "small": dict(N=5000, M=100, K=300),
    "medium": dict(N=1_000_003, M=1000, K=1000),
    "bench": dict(N=1 << 26, M=8192, K=8192),
}


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def programs(size="bench"):
    s = SIZES[size]
    return [("vector_add", vector_add.get_tir(s["N"])),
            ("gelu", gelu_2d.get_tir(s["M"], s["K"])),
            ("bias_gelu", bias_gelu.get_tir(s["M"], s["K"]))]


def run(device=None, size="small"):
    """Build the kernels, check them against torch on fresh random inputs, and return one
    case per kernel: {name, tilelang, baseline, baseline_name, bytes, error}."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    s = SIZES[size]
    N, M, K = s["N"], s["M"], s["K"]
    a = torch.randn(N, device=device, dtype=torch.float16)
    b = torch.randn(N, device=device, dtype=torch.float16)
    x = torch.randn(M, K, device=device, dtype=torch.float16)
    bias = torch.randn(K, device=device, dtype=torch.float16)
    k_add, k_gelu, k_bias = vector_add(N), gelu_2d(M, K), bias_gelu(M, K)

    err_add = check(k_add(a, b), a.double() + b.double(), 1e-3)
    err_gelu = check(k_gelu(x), torch.nn.functional.gelu(x.double()), 1e-3)
    err_bias = check(k_bias(x, bias), torch.nn.functional.gelu(x.double() + bias.double()), 1e-3)

    F = torch.nn.functional
    return [
        dict(name=f"vector add fp16 N={N}", tilelang=lambda: k_add(a, b),
             baseline=lambda: a + b, baseline_name="torch eager", bytes=3 * N * 2,
             error=err_add),
        dict(name=f"gelu fp16 {M}x{K}", tilelang=lambda: k_gelu(x),
             baseline=lambda: F.gelu(x), baseline_name="torch eager", bytes=2 * M * K * 2,
             error=err_gelu),
        dict(name=f"bias+gelu fp16 {M}x{K}", tilelang=lambda: k_bias(x, bias),
             baseline=lambda: F.gelu(x + bias), baseline_name="torch eager (2 kernels)",
             bytes=2 * M * K * 2, error=err_bias),
    ]


def main():
    gpu = torch.cuda.is_available()
    for case in run("cuda" if gpu else "cpu", "bench" if gpu else "small"):
        line = f"{case['name']}: relative error {case['error']:.1e}"
        if gpu:
            from tilelang.profiler import do_bench

            ms = do_bench(case["tilelang"], return_mode="median")
            ref_ms = do_bench(case["baseline"], return_mode="median")
            line += (f", {ms:.4f} ms ({case['bytes'] / ms * 1e-6:.0f} GB/s), "
                     f"{case['baseline_name']} {ref_ms:.4f} ms, speedup {ref_ms / ms:.2f}x")
        print(line)


if __name__ == "__main__":
    main()
