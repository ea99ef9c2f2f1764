"""Reductions and scans on the interpreter: every reduce kind with clear=True/False along both
dims (and the keep-dim output shape), dtype conversion before combining, NaN rules, and
cumsum/cummax in both directions and dims."""

import numpy as np
import pytest
import torch

import tilelang.language as T
from interp_testutil import f64, poisoned, run, tensor

M, N = 8, 24

_REF = {
    "sum": lambda x, d: x.sum(axis=d),
    "abssum": lambda x, d: np.abs(x).sum(axis=d),
    "max": lambda x, d: x.max(axis=d),
    "min": lambda x, d: x.min(axis=d),
    "absmax": lambda x, d: np.abs(x).max(axis=d),
    "bitand": lambda x, d: np.bitwise_and.reduce(x, axis=d),
    "bitor": lambda x, d: np.bitwise_or.reduce(x, axis=d),
    "bitxor": lambda x, d: np.bitwise_xor.reduce(x, axis=d),
}
_COMBINE = {"sum": np.add, "abssum": np.add, "max": np.maximum, "min": np.minimum,
            "absmax": np.maximum, "bitand": np.bitwise_and, "bitor": np.bitwise_or,
            "bitxor": np.bitwise_xor}


def _reduce_kernel(kind, dim, clear, src_dt, dst_dt, keepdim):
    out_len = N if dim == 0 else M
    dst_shape = ((1, N) if dim == 0 else (M, 1)) if keepdim else (out_len,)
    red = getattr(T, f"reduce_{kind}")

    @T.prim_func
    def k(A: T.Tensor((M, N), src_dt), D: T.Tensor(dst_shape, dst_dt)):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((M, N), src_dt)
            R = T.alloc_shared(dst_shape, dst_dt)
            T.copy(A, S)
            T.copy(D, R)
            if kind == "abssum":
                red(S, R, dim=dim)
            else:
                red(S, R, dim=dim, clear=clear)
            T.copy(R, D)
    return k


@pytest.mark.parametrize("kind", ["sum", "abssum", "max", "min", "absmax"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("clear", [True, False])
@pytest.mark.parametrize("src_dt,dst_dt", [("float32", "float32"), ("float16", "float32"),
                                           ("bfloat16", "float32"), ("float16", "float16")])
def test_float_reductions(rng, kind, dim, clear, src_dt, dst_dt):
    d = dim % 2
    k = _reduce_kernel(kind, d, clear, src_dt, dst_dt, keepdim=False)
    a = tensor(rng, (M, N), src_dt)
    old = tensor(rng, (N if d == 0 else M,), dst_dt)
    dst = old.clone()
    run(k, a, dst)
    expect = _REF[kind](f64(a), d)
    if not clear and kind != "abssum":
        expect = _COMBINE[kind](f64(old), expect)
    tol = 2e-2 if dst_dt == "float16" else 1e-5
    np.testing.assert_allclose(f64(dst), expect, rtol=tol, atol=tol)


@pytest.mark.parametrize("kind", ["sum", "max", "min", "bitand", "bitor", "bitxor", "absmax"])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("clear", [True, False])
def test_int_reductions(rng, kind, dim, clear):
    k = _reduce_kernel(kind, dim, clear, "int32", "int32", keepdim=False)
    a = tensor(rng, (M, N), "int32", -1000, 1000)
    old = tensor(rng, (N if dim == 0 else M,), "int32", -1000, 1000)
    dst = old.clone()
    run(k, a, dst)
    expect = _REF[kind](a.numpy().astype(np.int64), dim)
    if not clear:
        expect = _COMBINE[kind](old.numpy().astype(np.int64), expect)
    assert np.array_equal(dst.numpy(), expect)


def test_int8_sum_into_int32_converts_first(rng):
    k = _reduce_kernel("sum", 1, True, "int8", "int32", keepdim=False)
    a = tensor(rng, (M, N), "int8", -128, 128)
    dst = poisoned((M,), "int32")
    run(k, a, dst)
    assert np.array_equal(dst.numpy(), a.numpy().astype(np.int64).sum(1))  # no int8 wrap


@pytest.mark.parametrize("dim", [0, 1])
def test_keepdim_output_shape(rng, dim):
    k = _reduce_kernel("max", dim, True, "float32", "float32", keepdim=True)
    a = tensor(rng, (M, N), "float32")
    dst = poisoned((1, N) if dim == 0 else (M, 1), "float32")
    run(k, a, dst)
    assert np.array_equal(f64(dst), f64(a).max(axis=dim, keepdims=True))


def test_max_ignores_nan_unless_propagating(rng):
    @T.prim_func
    def k(A: T.Tensor((4, 8), "float16"), D: T.Tensor((4,), "float16"),
          P: T.Tensor((4,), "float16")):
        with T.Kernel(1, threads=32):
            F = T.alloc_fragment((4, 8), "float16")
            R = T.alloc_fragment((4,), "float16")
            Q = T.alloc_fragment((4,), "float16")
            T.copy(A, F)
            T.reduce_max(F, R, dim=1)
            T.reduce_max(F, Q, dim=1, nan_propagate=True)
            T.copy(R, D)
            T.copy(Q, P)

    a = tensor(rng, (4, 8), "float16")
    a[1, 3] = float("nan")
    a[2, :] = float("nan")
    d, p = poisoned((4,), "float16"), poisoned((4,), "float16")
    run(k, a, d, p)
    ref = f64(a)
    assert f64(d)[0] == ref[0].max() and f64(d)[3] == ref[3].max()
    assert f64(d)[1] == np.nanmax(ref[1])
    assert f64(d)[2] == -np.inf  # all NaN: the -inf initial value remains
    assert np.isnan(f64(p)[1]) and np.isnan(f64(p)[2]) and f64(p)[0] == ref[0].max()


def test_reduce_in_parallel_softmax(rng):
    # the online-softmax pattern: reduce into a fragment, then broadcast it in T.Parallel
    @T.prim_func
    def k(A: T.Tensor((16, 32), "float32"), O: T.Tensor((16, 32), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_fragment((16, 32), "float32")
            m = T.alloc_fragment((16,), "float32")
            s = T.alloc_fragment((16,), "float32")
            T.copy(A, S)
            T.reduce_max(S, m, dim=1)
            for i, j in T.Parallel(16, 32):
                S[i, j] = T.exp(S[i, j] - m[i])
            T.reduce_sum(S, s, dim=1)
            for i, j in T.Parallel(16, 32):
                S[i, j] = S[i, j] / s[i]
            T.copy(S, O)

    a, o = tensor(rng, (16, 32), "float32"), poisoned((16, 32), "float32")
    run(k, a, o)
    np.testing.assert_allclose(f64(o), torch.softmax(a.double(), 1).numpy(), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_cumsum(rng, dim, reverse, dtype):
    @T.prim_func
    def k(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((M, N), dtype)
            T.copy(A, S)
            T.cumsum(S, dim=dim, reverse=reverse)
            T.copy(S, B)

    a, b = tensor(rng, (M, N), dtype), poisoned((M, N), dtype)
    run(k, a, b)
    x = f64(a)
    if reverse:
        expect = np.flip(np.cumsum(np.flip(x, dim), axis=dim), dim)
    else:
        expect = np.cumsum(x, axis=dim)
    tol = 1e-2 if dtype == "float16" else 1e-5
    np.testing.assert_allclose(f64(b), expect, rtol=tol, atol=tol)


def test_cumsum_default_dim_and_cummax_into_other_buffer(rng):
    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"),
          C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((M, N), "float32")
            D = T.alloc_shared((M, N), "float32")
            E = T.alloc_fragment((M, N), "float32")
            T.copy(A, S)
            T.cumsum(S, D)                       # default dim is 0
            T.cummax(S, E, dim=1, reverse=True)
            T.copy(D, B)
            T.copy(E, C)

    a = tensor(rng, (M, N), "float32")
    b, c = poisoned((M, N), "float32"), poisoned((M, N), "float32")
    run(k, a, b, c)
    np.testing.assert_allclose(f64(b), np.cumsum(f64(a), axis=0), rtol=1e-5, atol=1e-5)
    expect = np.flip(np.maximum.accumulate(np.flip(f64(a), 1), axis=1), 1)
    assert np.array_equal(f64(c), expect)
