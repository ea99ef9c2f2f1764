"""`__launch_bounds__` of generated kernels: the block's threads, with a minimum of one block
per SM for warp-specialised kernels (setmaxnreg needs the cap), for a constant grid no larger
than the SM count without a cp.async pipeline (each SM runs one block at most: ptxas may keep
more loads in flight; H200: the naive GEMV 83.5 -> 71.4 µs), and where the user asks
(`T.annotate_min_blocks_per_sm`)."""

import re

import tilelang
import tilelang.language as T

SM90 = "cuda -arch=sm_90a"


def _scale(min_blocks=None, blocks=256):
    """B = 2 A over `blocks` blocks of 128 threads (None: as many as a symbolic size needs)."""
    n = T.dynamic("n") if blocks is None else blocks * 128

    @T.prim_func
    def f(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
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


def test_a_grid_within_the_sms_runs_one_block_a_sm():
    assert _bounds(tilelang.lower(_scale(blocks=132), target=SM90)) == "128, 1"
    assert _bounds(tilelang.lower(_scale(blocks=133), target=SM90)) == "128"
    assert _bounds(tilelang.lower(_scale(blocks=108), target="cuda -arch=sm_80")) == "128, 1"
    assert _bounds(tilelang.lower(_scale(blocks=109), target="cuda -arch=sm_80")) == "128"


def test_a_grid_sized_at_launch_names_only_its_threads():
    assert _bounds(tilelang.lower(_scale(blocks=None), target=SM90)) == "128"


def test_a_small_cp_async_pipeline_keeps_its_occupancy_bound():
    """The pipelined GEMV of 32 blocks went 16.1 -> 16.8 µs with the bound (ptxas moved its
    load of x after the stage refill): a cp.async pipeline does not take it."""
    @T.prim_func
    def f(A: T.Tensor((4096,), "float16"), W: T.Tensor((128, 4096), "float16"),
          C: T.Tensor((128,), "float32")):
        with T.Kernel(4, threads=128) as bx:
            acc = T.alloc_fragment((32,), "float32")
            T.clear(acc)
            for k in T.Pipelined(32, num_stages=2):
                Ws = T.alloc_shared((32, 128), "float16")
                T.copy(W[bx * 32, k * 128], Ws)
                for i, j in T.Parallel(32, 128):
                    acc[i] += Ws[i, j] * A[k * 128 + j]
            T.copy(acc, C[bx * 32])

    src = tilelang.lower(f, target="cuda -arch=sm_80")
    assert "tl::cp_async" in src
    assert _bounds(src) == "128"
