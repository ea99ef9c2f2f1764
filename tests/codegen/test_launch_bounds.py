"""`__launch_bounds__` of generated kernels: the block's threads, with a minimum of one block
per SM for warp-specialised kernels (setmaxnreg needs the cap) and where the user asks
(`T.annotate_min_blocks_per_sm`); the experiment TL_EXPERIMENT=min_blocks_1 writes the 1 on
every kernel, as the reference does, for a timing of both forms in one GPU run."""

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


def test_plain_kernels_name_only_their_threads(monkeypatch):
    monkeypatch.delenv("TL_EXPERIMENT", raising=False)
    assert _bounds(tilelang.lower(_scale(), target=SM90)) == "128"


def test_the_experiment_asks_for_one_block_per_sm(monkeypatch):
    monkeypatch.setenv("TL_EXPERIMENT", "min_blocks_1")
    assert _bounds(tilelang.lower(_scale(), target=SM90)) == "128, 1"
    # the user's own minimum still wins
    assert _bounds(tilelang.lower(_scale(3), target=SM90)) == "128, 3"
