"""`par_compile` for lazy-JIT functions and `@tilelang.jit` factories: elaborate, compile in a
thread pool, return kernels in config order (cached like ordinary compiles)."""

import pytest
import torch

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def add_factory(N, block, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=32) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i] * block
    return main


def test_factory_par_compile_in_config_order(capsys):
    configs = [{"N": 64, "block": b} for b in (8, 16, 32, 64)]
    kernels = add_factory.par_compile(configs, num_workers=3)
    err = capsys.readouterr().err
    assert "Elaborating" in err and "Parallel Compiling" in err
    a, b = torch.randn(64), torch.randn(64)
    for cfg, k in zip(configs, kernels):
        torch.testing.assert_close(k(a, b), a + b * cfg["block"])
        assert add_factory(**cfg) is k  # landed in the factory cache
    assert add_factory.par_compile([(64, 8)])[0] is add_factory(64, 8)  # positional config


def test_factory_par_compile_ignore_error():
    with pytest.warns(UserWarning):
        kernels = add_factory.par_compile([{"N": 64, "block": 16}, {"N": 64, "block": "x"}],
                                          ignore_error=True)
    assert kernels[0] is not None and kernels[1] is None
    with pytest.raises(Exception):
        add_factory.par_compile([{"N": 64, "block": "x"}])


def test_lazy_par_compile_placeholders_and_reuse():
    @tilelang.lazy_jit
    def axpy(X: T.Tensor[[int], T.float32], Y: T.Tensor[[int], T.float32], a: float = 1.0):
        (N,) = X.shape
        Z = T.empty((N,), T.float32)
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(N):
                Z[i] = X[i] * a + Y[i]
        return Z

    cfgs = [{"X": T.Tensor((n,), T.float32), "Y": T.Tensor((n,), T.float32), "a": a}
            for n, a in ((16, 1.0), (32, 2.0), (16, 3.0))]
    kernels = axpy.par_compile(cfgs)
    assert axpy.trace_count == 3
    for cfg, k in zip(cfgs, kernels):
        n = cfg["X"].shape[0]
        x, y = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(axpy(x, y, cfg["a"]), x * cfg["a"] + y)
        torch.testing.assert_close(k(x, y), x * cfg["a"] + y)
    assert axpy.trace_count == 3  # the calls hit the par_compiled kernels


def _scale(factor):
    @T.prim_func
    def scale(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = A[i] * factor
    return scale


def test_top_level_par_compile_of_prim_funcs_in_order():
    kernels = tilelang.par_compile([_scale(f) for f in (1.0, 2.0, 3.0)], target="cpu",
                                   num_workers=2)
    a = torch.randn(64)
    for factor, kernel in zip((1.0, 2.0, 3.0), kernels):
        b = torch.full((64,), float("nan"))
        kernel(a, b)
        torch.testing.assert_close(b, a * factor)


def test_top_level_par_compile_with_out_idx_and_ignore_error():
    @T.prim_func
    def bad(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=4):
            for i in T.Parallel(4):
                A[i] = A[i + 8]  # refused when compiled (and has no parameter 1)

    with pytest.warns(UserWarning):
        kernels = tilelang.par_compile([_scale(2.0), bad], out_idx=[1], target="cpu",
                                       ignore_error=True)
    a = torch.randn(64)
    torch.testing.assert_close(kernels[0](a), a * 2.0)
    assert kernels[1] is None
