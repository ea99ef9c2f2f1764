"""A child process of the cache tests: compiles named kernels with `tilelang.compile` for a CUDA
architecture (no GPU needed) and prints one JSON line per kernel: cache hit, key, cubin digest.

    python cache_child.py sm_90a [--perturb] [--modules] gemm softmax ...

`--perturb` first traces and compiles unrelated kernels, so any process-local counter or name
that leaked into the generated code (and so into the cache key) would differ from a fresh
process. `--modules` ends with a JSON line listing the tilelang modules the process imported.
"""

import hashlib
import json
import sys

import tilelang
import tilelang.language as T


def gemm():
    @T.prim_func
    def gemm(A: T.Tensor((96, 64), "float16"), B: T.Tensor((64, 80), "float16"),
             C: T.Tensor((96, 80), "float32")):
        with T.Kernel(T.ceildiv(80, 32), T.ceildiv(96, 64), threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 32), "float16")
            C_l = T.alloc_fragment((64, 32), "float32")
            T.clear(C_l)
            for k in T.Pipelined(2, num_stages=2):
                T.copy(A[by * 64, k * 32], A_s)
                T.copy(B[k * 32, bx * 32], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 64, bx * 32])
    return gemm


def softmax():
    @T.prim_func
    def softmax(X: T.Tensor((128, 64), "float32"), Y: T.Tensor((128, 64), "float32")):
        with T.Kernel(T.ceildiv(128, 8), threads=128) as bx:
            x = T.alloc_fragment((8, 64), "float32")
            m = T.alloc_fragment((8,), "float32")
            s = T.alloc_fragment((8,), "float32")
            T.copy(X[bx * 8, 0], x)
            T.reduce_max(x, m, dim=1)
            for i, j in T.Parallel(8, 64):
                x[i, j] = T.exp(x[i, j] - m[i])
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(8, 64):
                x[i, j] = x[i, j] / s[i]
            T.copy(x, Y[bx * 8, 0])
    return softmax


def axpy(scale=2.0):
    n = T.dynamic("n")

    @T.prim_func
    def axpy(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 256), threads=128) as bx:
            for i in T.Parallel(256):
                Y[bx * 256 + i] = Y[bx * 256 + i] + X[bx * 256 + i] * scale
    return axpy


KERNELS = {"gemm": gemm, "softmax": softmax, "axpy": axpy}


def compile_one(name: str, arch: str, pass_configs=None) -> dict:
    k = tilelang.compile(KERNELS[name](), target=f"cuda -arch={arch}",
                         pass_configs=pass_configs)
    c = k.adapter.compiled
    return {"name": name, "hit": bool(c.cache_hit), "key": c.key,
            "sha": hashlib.sha256(c.cubin).hexdigest(),
            "program_hit": bool(k.adapter.program_cache_hit),
            "source": hashlib.sha256(k.adapter.source.encode()).hexdigest()}


def perturb(arch: str):
    for scale in (3.0, 4.0, 5.0):
        tilelang.compile(axpy(scale), target=f"cuda -arch={arch}")
    for _ in range(3):
        tilelang.compile(softmax(), target="cpu")


def main(argv):
    arch = argv[0]
    names = [a for a in argv[1:] if not a.startswith("--")]
    if "--perturb" in argv:
        perturb(arch)
    for name in names:
        print(json.dumps(compile_one(name, arch)), flush=True)
    if "--modules" in argv:
        print(json.dumps({"modules": sorted(m for m in sys.modules if m.startswith("tilelang"))}))


if __name__ == "__main__":
    main(sys.argv[1:])
