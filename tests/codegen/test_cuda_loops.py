"""Loops in the generated CUDA: the variable of a loop with a symbolic trip count is known to
lie in [start, start + trip count), so floor division and modulo by positive constants print
as C's plain operators (a shift / mask for a power of two, `/` and `%` otherwise), not the
sign-correcting tl::floordiv / tl::floormod."""

import re

import tilelang
import tilelang.language as T


def _rolling_sum():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(8, threads=32) as bx:
            for i in T.Parallel(8):
                for k in T.serial(bx + 1):  # a trip count only known at run time
                    B[bx * 8 + i] += A[(bx * 8 + i + k // 2 + k % 3) % 64]

    return main


def test_symbolic_trip_count_keeps_plain_division():
    src = tilelang.lower(_rolling_sum(), target="cuda -arch=sm_90a")
    loop = src[src.index("for (int k"):]
    assert re.search(r"\(k >> 1\)", loop) and re.search(r"k % 3", loop), loop
    assert "tl::floordiv" not in loop and "tl::floormod" not in loop


def test_same_results_on_the_interpreter():
    import torch

    a = torch.randn(64)
    b = torch.randn(64)
    want = b.clone()
    for bx in range(8):
        for i in range(8):
            for k in range(bx + 1):
                want[bx * 8 + i] += a[(bx * 8 + i + k // 2 + k % 3) % 64]
    tilelang.compile(_rolling_sum(), target="cpu")(a, b)
    torch.testing.assert_close(b, want)
