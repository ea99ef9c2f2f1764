"""Run by test_autotuner_cpu.py in a fresh process: tunes a small CPU kernel and prints how
many configurations the factory was asked to build (1 on a disk-cache hit)."""

import sys

import tilelang
import tilelang.language as T

built = []
N = int(sys.argv[1]) if len(sys.argv) > 1 else 128
CONFIGS = [{"block": b} for b in (16, 32, 64, 48)]


# no ref_prog: a tuning checked by a user function is not cached (test_autotune_api.py)
@tilelang.autotune(configs=CONFIGS, warmup=0.1, rep=0.5)
@tilelang.jit(out_idx=[-1], target="cpu")
def axpy(n, block=32, dtype="float32"):
    built.append(block)
    assert n % block == 0, f"n={n} is not a multiple of block={block}"

    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
        with T.Kernel(n // block, threads=32) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] * 2 + B[bx * block + i]

    return main


if __name__ == "__main__":
    kernel = axpy(N)
    print(f"BUILT {len(built)} CONFIG {kernel.config['block']} LATENCY {kernel.latency:.6f}")
