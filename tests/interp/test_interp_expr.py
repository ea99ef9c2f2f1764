"""Expression semantics on the interpreter: floor vs truncating integer division, int32 wrap,
float16 arithmetic, casts, math intrinsics against numpy, select/logical/bitwise ops,
reinterpret, NaN-ignoring min/max, and the error for an unknown intrinsic."""

import math

import numpy as np
import pytest
import torch

import tilelang.language as T
from interp_testutil import f64, poisoned, run, tensor
from tilelang.ir import nodes as ir


def test_integer_division_flavours():
    @T.prim_func
    def k(A: T.Tensor((16,), "int32"), D: T.Tensor((4,), "int32"),
          O: T.Tensor((4, 4, 16), "int32")):
        with T.Kernel(1, threads=32):
            for d, i in T.Parallel(4, 16):
                O[0, d, i] = A[i] // D[d]
                O[1, d, i] = A[i] % D[d]
                O[2, d, i] = T.truncdiv(A[i], D[d])
                O[3, d, i] = T.truncmod(A[i], D[d])

    a = torch.arange(-8, 8, dtype=torch.int32)
    d = torch.tensor([3, -3, 5, -2], dtype=torch.int32)
    o = poisoned((4, 4, 16), "int32")
    run(k, a, d, o)
    x, y = a.numpy()[None, :].astype(np.int64), d.numpy()[:, None].astype(np.int64)
    assert np.array_equal(o[0].numpy(), x // y)
    assert np.array_equal(o[1].numpy(), x % y)
    trunc = np.trunc(x / y).astype(np.int64)
    assert np.array_equal(o[2].numpy(), trunc)
    assert np.array_equal(o[3].numpy(), x - trunc * y)


def test_int32_wraps_and_shifts(rng):
    @T.prim_func
    def k(A: T.Tensor((8,), "int32"), O: T.Tensor((6, 8), "int32")):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                O[0, i] = A[i] * 65536 * 65536 + A[i] * 100000 * 100000
                O[1, i] = A[i] << 3
                O[2, i] = A[i] >> 1
                O[3, i] = (A[i] & 6) | (A[i] ^ 9)
                O[4, i] = ~A[i]
                O[5, i] = T.max(A[i], 2) - T.min(A[i], -3)

    a = tensor(rng, (8,), "int32", -50, 50)
    o = poisoned((6, 8), "int32")
    run(k, a, o)
    x = a.numpy().astype(np.int64)
    wrap = ((x * 10**10) + 2**31) % 2**32 - 2**31
    assert np.array_equal(o[0].numpy(), wrap)
    assert np.array_equal(o[1].numpy(), x << 3)
    assert np.array_equal(o[2].numpy(), x >> 1)
    assert np.array_equal(o[3].numpy(), (x & 6) | (x ^ 9))
    assert np.array_equal(o[4].numpy(), ~x)
    assert np.array_equal(o[5].numpy(), np.maximum(x, 2) - np.minimum(x, -3))


def test_float16_arithmetic_and_casts(rng):
    @T.prim_func
    def k(A: T.Tensor((64,), "float16"), H: T.Tensor((3, 64), "float16"),
          I: T.Tensor((2, 64), "int32"), F: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                H[0, i] = A[i] * T.float16(0.1) + A[i]      # stays float16
                H[1, i] = A[i] * 0.1                         # float32, rounded on store
                H[2, i] = -A[i] / 3
                I[0, i] = T.cast(A[i] * 10.0, "int32")       # truncation
                I[1, i] = T.int32(-2.7) + T.cast(A[i] > 0, "int32")
                F[i] = T.cast(A[i], "float32") * 0.5

    a = tensor(rng, (64,), "float16")
    h, i_, f = poisoned((3, 64), "float16"), poisoned((2, 64), "int32"), poisoned((64,),
                                                                                  "float32")
    run(k, a, h, i_, f)
    x = a.numpy()
    assert np.array_equal(h[0].numpy(), x * np.float16(0.1) + x)
    assert np.array_equal(h[1].numpy(), (x.astype(np.float32) * np.float32(0.1)).astype(
        np.float16))
    assert np.array_equal(h[2].numpy(), -x / np.float16(3))
    assert np.array_equal(i_[0].numpy(), np.trunc(x.astype(np.float32) * 10).astype(np.int32))
    assert np.array_equal(i_[1].numpy(), -2 + (x > 0))
    assert np.array_equal(f.numpy(), x.astype(np.float32) * 0.5)


_MATH = {
    "exp": np.exp, "exp2": np.exp2, "log": lambda x: np.log(np.abs(x) + 0.5),
    "log2": lambda x: np.log2(np.abs(x) + 0.5), "sin": np.sin, "cos": np.cos,
    "tanh": np.tanh, "sqrt": lambda x: np.sqrt(np.abs(x)),
    "rsqrt": lambda x: 1 / np.sqrt(np.abs(x) + 0.5), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "erf": np.vectorize(math.erf), "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
    # T.round rounds ties to even, as the reference does (T.round(x, "ties-away-from-zero")
    # is C's round; tests/language/test_math_modes.py)
    "round": np.rint, "nearbyint": np.rint,
    "abs": np.abs, "fast_exp": np.exp, "log1p": lambda x: np.log1p(np.abs(x)),
    "expm1": np.expm1, "exp10": lambda x: 10.0**x, "atan": np.arctan,
}


@pytest.mark.parametrize("name", sorted(_MATH))
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_math_functions(rng, name, dtype):
    fn = getattr(T, name)
    needs_pos = name in ("log", "log2", "sqrt", "rsqrt", "log1p")

    @T.prim_func
    def k(A: T.Tensor((64,), dtype), B: T.Tensor((64,), dtype)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                if needs_pos:
                    if name in ("log", "log2", "rsqrt"):
                        B[i] = fn(T.abs(A[i]) + T.cast(0.5, dtype))
                    else:
                        B[i] = fn(T.abs(A[i]))
                else:
                    B[i] = fn(A[i])

    a = (tensor(rng, (64,), "float32") * 2).to(getattr(torch, dtype))
    a[0] = 2.5
    a[1] = -2.5
    b = poisoned((64,), dtype)
    run(k, a, b)
    expect = _MATH[name](f64(a))
    expect = f64(torch.from_numpy(expect).to(getattr(torch, dtype)))  # overflow -> inf
    tol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    np.testing.assert_allclose(f64(b), expect, rtol=tol, atol=tol)


def test_binary_math_select_and_predicates(rng):
    @T.prim_func
    def k(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32"),
          O: T.Tensor((6, 32), "float32"), P: T.Tensor((3, 32), "bool")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                O[0, i] = T.pow(T.abs(A[i]), B[i])
                O[1, i] = T.fmod(A[i] * 10.0, 3.0)
                O[2, i] = T.atan2(A[i], B[i])
                O[3, i] = T.if_then_else(A[i] > B[i], A[i], B[i] * 2.0)
                O[4, i] = T.max(A[i] / (A[i] - A[i]), 1.0)   # NaN (0/0) or inf: max ignores NaN
                O[5, i] = T.min_value("float32") + T.max_value("float16")
                P[0, i] = T.isnan(A[i] / (A[i] - A[i]))
                P[1, i] = (A[i] > 0) and not (B[i] > 0) or A[i] == B[i]
                P[2, i] = T.isinf(T.infinity("float32") * A[i])

    a, b = tensor(rng, (32,), "float32"), tensor(rng, (32,), "float32")
    a[0] = 0.0
    o, p = poisoned((6, 32), "float32"), torch.zeros((3, 32), dtype=torch.bool)
    run(k, a, b, o, p)
    x, y = a.numpy(), b.numpy()
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(o[0].numpy(), np.abs(x) ** y, rtol=1e-5)
    np.testing.assert_allclose(o[1].numpy(), np.fmod(x * np.float32(10), 3), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(o[2].numpy(), np.arctan2(x, y), rtol=1e-6)
    assert np.array_equal(o[3].numpy(), np.where(x > y, x, y * 2))
    with np.errstate(all="ignore"):
        q = x / (x - x)
    assert np.array_equal(o[4].numpy(), np.fmax(q, 1.0))
    assert o[4].numpy()[0] == 1.0
    assert np.allclose(o[5].numpy(), np.float32(-3.4028235e38) + 65504)
    assert np.array_equal(p[0].numpy(), np.isnan(q))
    assert np.array_equal(p[1].numpy(), ((x > 0) & ~(y > 0)) | (x == y))
    assert np.array_equal(p[2].numpy(), x != 0)


def test_reinterpret(rng):
    @T.prim_func
    def k(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "int32"),
          C: T.Tensor((16,), "float16"), D: T.Tensor((16,), "int16")):
        with T.Kernel(1, threads=16):
            for i in T.Parallel(16):
                B[i] = T.reinterpret(A[i], "int32")
                D[i] = T.reinterpret(C[i], "int16")

    a, c = tensor(rng, (16,), "float32"), tensor(rng, (16,), "float16")
    b, d = poisoned((16,), "int32"), poisoned((16,), "int16")
    run(k, a, b, c, d)
    assert np.array_equal(b.numpy(), a.numpy().view(np.int32))
    assert np.array_equal(d.numpy(), c.numpy().view(np.int16))


def test_scalar_params_and_block_index_arithmetic(rng):
    @T.prim_func
    def k(A: T.Tensor((6, 4), "float32"), n: T.int32, s: T.float32):
        with T.Kernel(4, 6, threads=32) as (bx, by):
            A[by, bx] = (by * 4 + bx) * s + n

    a = poisoned((6, 4), "float32")
    run(k, a, 3, 0.5)
    assert np.array_equal(f64(a), np.arange(24).reshape(6, 4) * 0.5 + 3)


def test_unknown_intrinsic_is_named():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            T.evaluate(ir.Call("frobnicate", (ir.const(1),), ir.INT32))

    with pytest.raises(NotImplementedError, match="frobnicate"):
        run(k, torch.zeros(4))
