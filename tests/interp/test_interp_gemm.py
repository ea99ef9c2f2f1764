"""T.gemm on the interpreter: all transposes, dtypes (float16/bfloat16/float8 -> float32,
TF32 float32, float64, int8 -> int32), clear_accum, fragment operands, region operands, and
ragged tiled GEMMs against numpy in float64."""

import numpy as np
import pytest
import torch

import tilelang.language as T
from interp_testutil import f64, poisoned, run, tensor
from tilelang.interp.numerics import tf32


def _gemm_kernel(M, N, K, trans_A, trans_B, in_dt, acc_dt, clear):
    a_shape = (K, M) if trans_A else (M, K)
    b_shape = (N, K) if trans_B else (K, N)

    @T.prim_func
    def k(A: T.Tensor(a_shape, in_dt), B: T.Tensor(b_shape, in_dt),
          C: T.Tensor((M, N), acc_dt)):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared(a_shape, in_dt)
            Bs = T.alloc_shared(b_shape, in_dt)
            Cf = T.alloc_fragment((M, N), acc_dt)
            T.copy(A, As)
            T.copy(B, Bs)
            T.copy(C, Cf)
            T.gemm(As, Bs, Cf, transpose_A=trans_A, transpose_B=trans_B, clear_accum=clear)
            T.copy(Cf, C)
    return k


@pytest.mark.parametrize("trans_A", [False, True])
@pytest.mark.parametrize("trans_B", [False, True])
@pytest.mark.parametrize("clear", [False, True])
def test_gemm_transposes_float16(rng, trans_A, trans_B, clear):
    M, N, K = 32, 48, 40
    k = _gemm_kernel(M, N, K, trans_A, trans_B, "float16", "float32", clear)
    a = tensor(rng, (K, M) if trans_A else (M, K), "float16")
    b = tensor(rng, (N, K) if trans_B else (K, N), "float16")
    c = tensor(rng, (M, N), "float32")
    c0 = f64(c)
    run(k, a, b, c)
    A = f64(a).T if trans_A else f64(a)
    B = f64(b).T if trans_B else f64(b)
    expect = A @ B + (0 if clear else c0)
    np.testing.assert_allclose(f64(c), expect, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("in_dt,acc_dt,tol", [("bfloat16", "float32", 1e-4),
                                              ("float8_e4m3", "float32", 1e-4),
                                              ("float64", "float64", 1e-12),
                                              ("float16", "float16", 2e-2)])
def test_gemm_dtypes(rng, in_dt, acc_dt, tol):
    M, N, K = 16, 32, 64
    k = _gemm_kernel(M, N, K, False, True, in_dt, acc_dt, False)
    tdt = getattr(torch, in_dt.replace("e4m3", "e4m3fn"))
    a = tensor(rng, (M, K), "float32").to(tdt)
    b = tensor(rng, (N, K), "float32").to(tdt)
    c = torch.zeros((M, N), dtype=getattr(torch, acc_dt))
    run(k, a, b, c)
    expect = f64(a) @ f64(b).T
    np.testing.assert_allclose(f64(c), expect, rtol=tol, atol=tol * 10)


def test_gemm_float32_uses_tf32(rng):
    M, N, K = 16, 16, 64
    k = _gemm_kernel(M, N, K, False, False, "float32", "float32", True)
    a, b = tensor(rng, (M, K), "float32"), tensor(rng, (K, N), "float32")
    c = poisoned((M, N), "float32")
    run(k, a, b, c)
    at = tf32(a.numpy()).astype(np.float64)
    bt = tf32(b.numpy()).astype(np.float64)
    np.testing.assert_allclose(f64(c), at @ bt, rtol=1e-5, atol=1e-5)
    # and it is not the full-precision product (inputs lose mantissa bits)
    assert np.abs(f64(c) - f64(a) @ f64(b)).max() > 1e-5


def test_gemm_int8_exact_and_wraps(rng):
    M, N, K = 16, 16, 32
    k = _gemm_kernel(M, N, K, False, False, "int8", "int32", False)
    a = tensor(rng, (M, K), "int8", -128, 128)
    b = tensor(rng, (K, N), "int8", -128, 128)
    c = torch.full((M, N), 2**31 - 100, dtype=torch.int32)
    c[0] = 5
    run(k, a, b, c)
    exact = a.long().numpy() @ b.long().numpy()
    expect = (exact + np.where(np.arange(M)[:, None] == 0, 5, 2**31 - 100)).astype(np.int64)
    expect = ((expect + 2**31) % 2**32 - 2**31).astype(np.int32)
    assert np.array_equal(c.numpy(), expect)


def test_gemm_clear_accum_expression(rng):
    @T.prim_func
    def k(A: T.Tensor((4, 16, 16), "float16"), B: T.Tensor((16, 16), "float16"),
          C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((16, 16), "float16")
            Bs = T.alloc_shared((16, 16), "float16")
            Cf = T.alloc_fragment((16, 16), "float32")
            T.fill(Cf, 1000.0)
            T.copy(B, Bs)
            for s in T.serial(4):
                T.copy(A[s, 0, 0], As)
                T.gemm(As, Bs, Cf, clear_accum=s == 0)
            T.copy(Cf, C)

    a, b = tensor(rng, (4, 16, 16), "float16"), tensor(rng, (16, 16), "float16")
    c = poisoned((16, 16), "float32")
    run(k, a, b, c)
    expect = sum(f64(a)[s] @ f64(b) for s in range(4))
    np.testing.assert_allclose(f64(c), expect, rtol=1e-5, atol=1e-4)


def test_gemm_fragment_operand_and_regions(rng):
    # A in a fragment; B taken as a region with a leading unit dim of a 3-D shared buffer
    @T.prim_func
    def k(A: T.Tensor((32, 16), "float16"), B: T.Tensor((2, 16, 24), "float16"),
          C: T.Tensor((32, 24), "float32")):
        with T.Kernel(1, threads=128):
            Af = T.alloc_fragment((32, 16), "float16")
            Bs = T.alloc_shared((2, 16, 24), "float16")
            Cf = T.alloc_fragment((32, 24), "float32")
            T.copy(A, Af)
            T.copy(B, Bs)
            T.clear(Cf)
            T.gemm(Af, Bs[1, 0:16, 0:24], Cf)
            T.copy(Cf, C)

    a, b = tensor(rng, (32, 16), "float16"), tensor(rng, (2, 16, 24), "float16")
    c = poisoned((32, 24), "float32")
    run(k, a, b, c)
    np.testing.assert_allclose(f64(c), f64(a) @ f64(b)[1], rtol=1e-5, atol=1e-4)


def _tiled_gemm(M, N, K, bm, bn, bk, dtype, accum, trans_B):
    b_shape = (N, K) if trans_B else (K, N)
    bs_shape = (bn, bk) if trans_B else (bk, bn)

    @T.prim_func
    def k(A: T.Tensor((M, K), dtype), B: T.Tensor(b_shape, dtype),
          C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            As = T.alloc_shared((bm, bk), dtype)
            Bs = T.alloc_shared(bs_shape, dtype)
            Cf = T.alloc_fragment((bm, bn), accum)
            T.clear(Cf)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, ko * bk], As)
                if trans_B:
                    T.copy(B[bx * bn, ko * bk], Bs)
                else:
                    T.copy(B[ko * bk, bx * bn], Bs)
                T.gemm(As, Bs, Cf, transpose_B=trans_B)
            T.copy(Cf, C[by * bm, bx * bn])
    return k


@pytest.mark.parametrize("M,N,K", [(64, 64, 64), (200, 136, 72), (33, 17, 50)])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("trans_B", [False, True])
def test_tiled_gemm_ragged(rng, M, N, K, dtype, trans_B):
    k = _tiled_gemm(M, N, K, 32, 32, 32, dtype, "float32", trans_B)
    tdt = getattr(torch, dtype)
    a = tensor(rng, (M, K), "float32").to(tdt)
    b = tensor(rng, (N, K) if trans_B else (K, N), "float32").to(tdt)
    c = poisoned((M, N), dtype)
    run(k, a, b, c)
    B = f64(b).T if trans_B else f64(b)
    expect = f64(a) @ B
    rtol = 1e-2 if dtype == "bfloat16" else 2e-3
    np.testing.assert_allclose(f64(c), expect, rtol=rtol, atol=rtol * 4)
