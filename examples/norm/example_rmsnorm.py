"""RMSNorm: Y = X / sqrt(mean(X^2, dim=1) + eps) * weight, for a float16 (M x N) matrix.

    python examples/norm/example_rmsnorm.py

Each block normalises `block_M` whole rows held in registers: square, `T.reduce_sum` along
the row, one `T.rsqrt` per row, scale by the weight vector (loaded once per block), store.
The matrix is read once and written once.

Runs on the GPU when there is one, else on the CPU interpreter at a small size.
"""

import torch

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def rms_norm(M, N, eps=1e-6, block_M=4, threads=128, dtype="float16", accum_dtype="float"):

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Weight: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), accum_dtype)
            x2 = T.alloc_fragment((block_M, N), accum_dtype)
            w = T.alloc_fragment((N,), accum_dtype)
            sum_sq = T.alloc_fragment((block_M,), accum_dtype)

            T.copy(X[bx * block_M, 0], x)
            T.copy(Weight, w)
            for i, j in T.Parallel(block_M, N):
                x2[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(x2, sum_sq, dim=1)
            for i in T.Parallel(block_M):
                sum_sq[i] = T.rsqrt(sum_sq[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * sum_sq[i] * w[j]
            T.copy(x, Y[bx * block_M, 0])

    return main


def torch_rms_norm(x, weight, eps):
    F = torch.nn.functional
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * weight


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
    return [("rms_norm", rms_norm.get_tir(M, N, **cfg))]


def run(device=None, size="small"):
    """Build the kernel, check it against a float64 reference on fresh random inputs, and
    return [{name, tilelang, baseline, baseline_name, bytes, error}]."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    M, N, cfg = SIZES[size]
    eps = 1e-6
    kernel = rms_norm(M, N, eps, **cfg)
    x = torch.randn(M, N, device=device, dtype=torch.float16)
    w = torch.rand(N, device=device, dtype=torch.float16) + 0.5
    xd = x.double()
    ref = xd * torch.rsqrt(xd.pow(2).mean(dim=1, keepdim=True) + eps) * w.double()
    err = check(kernel(x, w), ref, 2e-3)
    return [dict(name=f"rmsnorm fp16 {M}x{N}", tilelang=lambda: kernel(x, w),
                 baseline=lambda: torch_rms_norm(x, w, eps),
                 baseline_name="torch rms_norm", bytes=2.0 * M * N * 2, error=err)]


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
