"""Row softmax: Y = softmax(X, dim=1) for a float16 (M x N) matrix.

    python examples/softmax/example_softmax.py

Each block loads `block_M` whole rows into registers (float32), takes the row maximum with
`T.reduce_max`, exponentiates (exp2 with log2(e) folded in), sums with `T.reduce_sum` and
normalises, then stores the rows: one read and one write of the matrix, no intermediate
results in global memory. Rows must fit in registers (N up to a few thousand).

Runs on the GPU when there is one, else on the CPU interpreter at a small size.
"""

import torch

import tilelang
import tilelang.language as T

LOG2E = 1.4426950408889634


@tilelang.jit(out_idx=[1])
def softmax(M, N, block_M=4, threads=128, dtype="float16", accum_dtype="float"):

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            row_sum = T.alloc_fragment((block_M,), accum_dtype)

            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp2((x[i, j] - row_max[i]) * LOG2E)
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, Y[bx * block_M, 0])

    return main


# (M, N, config)
SIZES = {
    "small": (77, 320, dict()),
    "medium": (3001, 1000, dict()),
    "bench": (16384, 4096, dict(threads=256)),
}


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def programs(size="bench"):
    M, N, cfg = SIZES[size]
    return [("softmax", softmax.get_tir(M, N, **cfg))]


def run(device=None, size="small"):
    """Build the kernel, check it against torch on fresh random inputs, and return
    [{name, tilelang, baseline, baseline_name, bytes, error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    M, N, cfg = SIZES[size]
    kernel = softmax(M, N, **cfg)
    x = torch.randn(M, N, device=device, dtype=torch.float16) * 3
    err = check(kernel(x), torch.softmax(x.double(), dim=1), 2e-3)
    return [dict(name=f"softmax fp16 {M}x{N}", tilelang=lambda: kernel(x),
                 baseline=lambda: torch.softmax(x, dim=1), baseline_name="torch.softmax",
                 bytes=2.0 * M * N * 2, error=err)]


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
