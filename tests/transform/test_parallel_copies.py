"""Element-wise T.Parallel loads of a global tile into shared memory become copies (and so
get cp.async / TMA in pipelines); anything that is not exactly such a load stays a loop."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.ir.visitor import collect
from tilelang.runtime import compile_cuda, toolkit
from tilelang.transform.inline_lets import inline_pure_lets
from tilelang.transform.parallel_copies import recognise_parallel_copies

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")


def _kernel(load, K=256, N=192, BK=32, BN=64, dst_dtype="float16"):
    @T.prim_func
    def f(B: T.Tensor((K, N), "float16"), C: T.Tensor((BK, BN), "float32")):
        with T.Kernel(T.ceildiv(N, BN), threads=128) as bx:
            S = T.alloc_shared((BK, BN), dst_dtype)
            for ko in T.serial(T.ceildiv(K, BK)):
                load(S, B, ko, bx)
                for k, j in T.Parallel(BK, BN):
                    C[k, j] += S[k, j]
    return f


def _copies_after_pass(func):
    kernel = next(s for s in collect(func.body, lambda n: isinstance(n, ir.Kernel)))
    body = recognise_parallel_copies(inline_pure_lets(kernel.body))
    return collect(body, lambda n: isinstance(n, ir.Copy))


@T.macro
def straight(S, B, ko, bx):
    for k, j in T.Parallel(32, 64):
        S[k, j] = B[ko * 32 + k, bx * 64 + j]


def test_straight_load_becomes_one_copy_of_the_same_window():
    (copy,) = _copies_after_pass(_kernel(straight))
    assert copy.src.buffer.name == "B" and copy.dst.buffer.name == "S"
    assert [int(e) if isinstance(e, int) else e.value for e in copy.src.extents] == [32, 64]
    assert str(copy.src.starts[0]).replace(" ", "") in ("ko*32", "(ko*32)")


def test_casting_load_becomes_a_copy():
    assert len(_copies_after_pass(_kernel(straight, dst_dtype="float32"))) == 1


@T.macro
def transposed(S, B, ko, bx):
    for k, j in T.Parallel(32, 64):
        S[k, j] = B[bx * 64 + j, ko * 32 + k]


@T.macro
def scaled(S, B, ko, bx):
    for k, j in T.Parallel(32, 64):
        S[k, j] = B[ko * 32 + k, bx * 64 + j] * 2.0


@T.macro
def strided(S, B, ko, bx):
    for k, j in T.Parallel(32, 64):
        S[k, j] = B[ko * 32 + k, 2 * j]


@T.macro
def guarded(S, B, ko, bx):
    for k, j in T.Parallel(32, 64):
        if k < 16:
            S[k, j] = B[ko * 32 + k, bx * 64 + j]


@pytest.mark.parametrize("load", [transposed, scaled, strided, guarded])
def test_other_loops_are_left_as_written(load):
    assert _copies_after_pass(_kernel(load, K=256, N=256)) == []


@pytest.mark.parametrize("K,N", [(256, 192), (250, 190)])
def test_results_unchanged_on_ragged_sizes(K, N):
    import numpy as np
    import torch

    func = _kernel(straight, K=K, N=N)
    b = torch.randn(K, N).half()
    c = torch.full((32, 64), float("nan"))
    c.zero_()
    tilelang.compile(func, target="cpu")(b, c)
    bp = torch.zeros(((K + 31) // 32 * 32, (N + 63) // 64 * 64))
    bp[:K, :N] = b.float()
    ref = bp.reshape(-1, 32, bp.shape[1]).sum(0).reshape(32, -1, 64).sum(1)
    # every block adds into the same C: the interpreter runs blocks one after another
    np.testing.assert_allclose(c.numpy(), ref.numpy(), rtol=1e-3, atol=1e-2)


@requires_compiler
def test_pipelined_gemm_load_goes_through_tma_on_hopper():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "gemm"))
    import example_gemm_swizzle as ex

    src = tilelang.lower(ex.matmul_swizzle.get_tir(1000, 1000, 1000),
                         target="cuda -arch=sm_90a")
    assert src.count("tl::tma_load((&B_desc)") >= 1, "the T.Parallel B load was not a copy"
    compile_cuda(src, "sm_90a")
    src80 = tilelang.lower(ex.matmul_swizzle.get_tir(1000, 1000, 1000), target="cuda -arch=sm_80")
    assert "cp_async" in src80.split("B_shared")[-1] or src80.count("cp_async") >= 2
    compile_cuda(src80, "sm_80")


def test_intermediate_rounding_is_not_dropped():
    @T.prim_func
    def f(B: T.Tensor((64, 64), "float32"), C: T.Tensor((32, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((32, 64), "float32")
            for k, j in T.Parallel(32, 64):
                S[k, j] = T.cast(B[k, j], "float16")  # rounds to half, stored as float
            T.copy(S, C)

    assert [c.dst.buffer.name for c in _copies_after_pass(f)] == ["C"]
