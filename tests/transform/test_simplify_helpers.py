"""tilelang.transform.simplify (apply_simplify, simplify_prim_func): the reference's helpers
drop the buffer parameters a kernel never uses, so the kernel is called without them; the
results are unchanged (interpreter against torch, sm_90a build)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.runtime import compile_cuda, toolkit
from tilelang.transform import apply_simplify, simplify_prim_func


def axpy(n, with_bias):
    @T.prim_func
    def main(X: T.Tensor((n,), T.float32), Bias: T.Tensor((n,), T.float32),
             Unused: T.Tensor((4, 4), T.float16), alpha: T.float32,
             Y: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < n:
                    if with_bias:
                        Y[bx * 64 + i] = alpha * X[bx * 64 + i] + Bias[bx * 64 + i]
                    else:
                        Y[bx * 64 + i] = alpha * X[bx * 64 + i]

    return main


def _names(func):
    return [p.name for p in func.params]


@pytest.mark.parametrize("with_bias", [False, True])
def test_unused_buffers_are_dropped(with_bias):
    func = apply_simplify(axpy(100, with_bias))
    # scalars stay even when unused; buffers only when the body names them
    assert _names(func) == (["X", "Bias", "alpha", "Y"] if with_bias else ["X", "alpha", "Y"])
    x, bias = torch.randn(100), torch.randn(100)
    y = torch.full((100,), float("nan"))
    kernel = tilelang.compile(func, target="cpu")
    if with_bias:
        kernel(x, bias, 1.5, y)
        torch.testing.assert_close(y, 1.5 * x + bias)
    else:
        kernel(x, 1.5, y)
        torch.testing.assert_close(y, 1.5 * x)


def test_decorator_and_errors():
    make = simplify_prim_func(axpy)
    assert _names(make(100, False)) == ["X", "alpha", "Y"]
    with pytest.raises(TypeError, match="not a PrimFunc"):
        simplify_prim_func(lambda: 3)()
    with pytest.raises(TypeError, match="takes a PrimFunc"):
        apply_simplify("main")


@pytest.mark.skipif(toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
                    reason="no CUDA compiler (NVRTC or nvcc) installed")
def test_builds_for_sm90a():
    src = tilelang.lower(apply_simplify(axpy(100, False)), target="cuda -arch=sm_90a")
    assert "Bias" not in src and "Unused" not in src
    compile_cuda(src, "sm_90a")
