"""What a lazy-JIT call with a known specialisation key costs before the kernel runs: computing
the key from the arguments and finding the compiled kernel (docs/lazy_jit.md). No GPU needed.

    python benchmarks/lazy_dispatch.py

Prints the median and best of 50 batches of 2000 `fn.dispatch(A)` calls, in microseconds per
call, for a kernel with one `T.Tensor[[int, T.dyn], T.float32]` argument and two defaulted
compile-time parameters. tests/jit/test_lazy_specialize.py counts the calls of the same
dispatch (a bound that holds at any machine load); this script gives the time.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torch  # noqa: E402

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402


@tilelang.lazy_jit
def scale(A: T.Tensor[[int, T.dyn], T.float32], factor: float = 2.0, block: int = 64):
    M, N = A.shape
    B = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i, j in T.Parallel(M, block):
            B[i, bx * block + j] = A[i, bx * block + j] * factor
    return B


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(batches=50, n=2000):
    A = torch.randn(4, 64)
    scale(A)  # traces and compiles once
    for _ in range(n):
        scale.dispatch(A)
    times = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(n):
            scale.dispatch(A)
        times.append((time.perf_counter() - t0) / n * 1e6)
    print(f"{cpu_name()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, torch {torch.__version__}")
    print(f"lazy-JIT dispatch (cache hit): median {statistics.median(times):.2f} us, "
          f"best {min(times):.2f} us per call")


if __name__ == "__main__":
    main()
