"""LayerNorm: Y = (X - mean) / sqrt(var + eps) * gamma + beta over the rows of a float16
(M x N) matrix.

    python examples/norm/example_layernorm.py

Each block normalises `block_M` whole rows held in registers. The mean comes from one
`T.reduce_sum`; the variance from a second one over the centred values (the two-pass form,
which does not lose precision when the mean is large), then one `T.rsqrt` per row and the
affine transform with gamma and beta, loaded once per block.

Runs on the GPU when there is one, else on the CPU interpreter at a small size.
"""

import torch

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[3])
def layer_norm(M, N, eps=1e-5, block_M=4, threads=128, dtype="float16", accum_dtype="float"):

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Gamma: T.Tensor((N,), dtype),
             Beta: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), accum_dtype)
            xc = T.alloc_fragment((block_M, N), accum_dtype)
            gamma = T.alloc_fragment((N,), accum_dtype)
            beta = T.alloc_fragment((N,), accum_dtype)
            mean = T.alloc_fragment((block_M,), accum_dtype)
            var = T.alloc_fragment((block_M,), accum_dtype)

            T.copy(X[bx * block_M, 0], x)
            T.copy(Gamma, gamma)
            T.copy(Beta, beta)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(block_M):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] - mean[i]
                xc[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(xc, var, dim=1)
            for i in T.Parallel(block_M):
                var[i] = T.rsqrt(var[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * var[i] * gamma[j] + beta[j]
            T.copy(x, Y[bx * block_M, 0])

    return main


# (M, N, config)
SIZES = {
    "small": (37, 320, dict()),
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
    return [("layer_norm", layer_norm.get_tir(M, N, **cfg))]


def run(device=None, size="small"):
    """Build the kernel, check it against torch (float64) on fresh random inputs, and return
    [{name, tilelang, baseline, baseline_name, bytes, error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    M, N, cfg = SIZES[size]
    eps = 1e-5
    kernel = layer_norm(M, N, eps, **cfg)
    x = torch.randn(M, N, device=device, dtype=torch.float16) + 3  # a mean far from 0
    g = torch.rand(N, device=device, dtype=torch.float16) + 0.5
    b = torch.randn(N, device=device, dtype=torch.float16)
    F = torch.nn.functional
    ref = F.layer_norm(x.double(), (N,), g.double(), b.double(), eps)
    err = check(kernel(x, g, b), ref, 2e-3)
    return [dict(name=f"layernorm fp16 {M}x{N}", tilelang=lambda: kernel(x, g, b),
                 baseline=lambda: F.layer_norm(x, (N,), g, b, eps),
                 baseline_name="torch layer_norm", bytes=2.0 * M * N * 2, error=err)]


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
