"""`__launch_bounds__` of generated kernels: the block's threads, with a minimum of one block
per SM for warp-specialised kernels (setmaxnreg needs the cap) and where the user asks
(`T.annotate_min_blocks_per_sm`)."""

import re

import tilelang
import tilelang.language as T

SM90 = "cuda -arch=sm_90a"


def _scale(min_blocks=None):
    @T.prim_func
    def f(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
        with T.Kernel(8, threads=128) as bx:
            if min_blocks is not None:
                T.annotate_min_blocks_per_sm(min_blocks)
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * 2.0
    return f


def _bounds(src):
    return re.search(r"__launch_bounds__\(([^)]*)\)", src).group(1)


def test_plain_kernels_name_only_their_threads():
    assert _bounds(tilelang.lower(_scale(), target=SM90)) == "128"


def test_the_users_minimum_blocks():
    assert _bounds(tilelang.lower(_scale(3), target=SM90)) == "128, 3"
