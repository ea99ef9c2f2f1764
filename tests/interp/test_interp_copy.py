"""T.copy and T.fill on the interpreter: operand forms and the rank-pairing rules of
SEMANTICS §3, out-of-bounds zero-fill and dropped stores on global memory, dtype conversion,
and errors for out-of-range shared regions."""

import numpy as np
import pytest
import torch

import tilelang.language as T
from interp_testutil import f64, poisoned, run, tensor


@pytest.mark.parametrize("M,N,bm,bn", [(64, 64, 32, 32), (100, 70, 32, 32), (33, 129, 16, 64)])
@pytest.mark.parametrize("dtype", ["float16", "float32", "int32", "bfloat16"])
def test_tiled_copy_ragged(rng, M, N, bm, bn, dtype):
    @T.prim_func
    def k(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=64) as (bx, by):
            S = T.alloc_shared((bm, bn), dtype)
            F = T.alloc_fragment((bm, bn), dtype)
            T.copy(A[by * bm, bx * bn], S)
            T.copy(S, F)
            T.copy(F, B[by * bm, bx * bn])

    a, b = tensor(rng, (M, N), dtype), poisoned((M, N), dtype)
    run(k, a, b)
    assert torch.equal(a, b)


def test_oob_tile_loads_zero_and_drops_stores(rng):
    # a 64x64 tile at [64, 64] of a (100, 100) tensor: 36x36 real values, zeros elsewhere
    @T.prim_func
    def k(A: T.Tensor((100, 100), "float32"), B: T.Tensor((64, 64), "float32"),
          C: T.Tensor((100, 100), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((64, 64), "float32")
            T.copy(A[64, 64], S)
            T.copy(S, B)
            for i, j in T.Parallel(64, 64):
                S[i, j] = S[i, j] + 1.0
            T.copy(S, C[64, 64])

    a, b = tensor(rng, (100, 100), "float32"), poisoned((64, 64), "float32")
    c = tensor(rng, (100, 100), "float32")
    c0 = c.clone()
    run(k, a, b, c)
    expect = np.zeros((64, 64))
    expect[:36, :36] = f64(a)[64:, 64:]
    assert np.array_equal(f64(b), expect)
    c_expect = f64(c0)
    c_expect[64:, 64:] = f64(a[64:, 64:] + 1.0)  # float32 add
    assert np.array_equal(f64(c), c_expect)


def test_negative_start_is_guarded(rng):
    @T.prim_func
    def k(A: T.Tensor((16,), "float32"), B: T.Tensor((8,), "float32"), s: T.int32):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((8,), "float32")
            T.copy(A[s:s + 8], S)
            T.copy(S, B)

    a, b = tensor(rng, (16,), "float32"), poisoned((8,), "float32")
    run(k, a, b, -3)
    assert np.array_equal(f64(b), np.concatenate([np.zeros(3), f64(a)[:5]]))


def test_safe_value_annotation(rng):
    @T.prim_func
    def k(A: T.Tensor((10,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32):
            T.annotate_safe_value({A: -7.5})
            S = T.alloc_shared((16,), "float32")
            T.copy(A[0:16], S)
            for i in T.Parallel(16):
                B[i] = S[i] + A[i + 3] * 0.0

    a, b = tensor(rng, (10,), "float32"), poisoned((16,), "float32")
    run(k, a, b)
    expect = np.concatenate([f64(a), np.full(6, -7.5)])
    expect[7:] += -7.5 * 0.0
    assert np.array_equal(f64(b), expect)


def test_row_column_and_1d_pairing(rng):
    @T.prim_func
    def k(A: T.Tensor((8, 64), "float32"), R: T.Tensor((64,), "float32"),
          Cc: T.Tensor((8,), "float32"), B: T.Tensor((64, 8), "float32")):
        with T.Kernel(1, threads=64):
            S1 = T.alloc_shared((64,), "float32")
            S2 = T.alloc_shared((8,), "float32")
            T.copy(A[3, 0:64], S1)          # row -> 1-D
            T.copy(S1, R)
            T.copy(A[0:8, 5], S2)           # column -> 1-D
            T.copy(S2, Cc)
            T.copy(S1, B[0:64, 5])          # 1-D -> column
            T.copy(S2, B[7, 0:8])           # 1-D -> row

    a = tensor(rng, (8, 64), "float32")
    r, cc = poisoned((64,), "float32"), poisoned((8,), "float32")
    b = tensor(rng, (64, 8), "float32")
    b0 = f64(b)
    run(k, a, r, cc, b)
    assert np.array_equal(f64(r), f64(a)[3])
    assert np.array_equal(f64(cc), f64(a)[:, 5])
    expect = b0.copy()
    expect[:, 5] = f64(a)[3]
    expect[7, :] = f64(a)[:, 5]
    assert np.array_equal(f64(b), expect)


def test_start_point_with_leading_dims_and_element_copy(rng):
    @T.prim_func
    def k(A: T.Tensor((4, 8, 64), "float16"), B: T.Tensor((8, 64), "float16"),
          E: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((8, 64), "float16")
            T.copy(A[1, 0, 0], S)            # copies A[1, 0:8, 0:64]
            T.copy(S, B)
            T.copy(A[2, 3, 4], E[1])         # element -> element, with a cast

    a = tensor(rng, (4, 8, 64), "float16")
    b, e = poisoned((8, 64), "float16"), poisoned((4,), "float32")
    run(k, a, b, e)
    assert torch.equal(b, a[1])
    assert f64(e)[1] == f64(a)[2, 3, 4]


def test_base_side_extends_past_the_region(rng):
    # T.copy(A[0:16, 0:64], S) with S (32, 64): the base is S, so A[0:32, :] is copied;
    # T.copy(S, B[0:16, 0:64]) writes B[0:32, :]
    @T.prim_func
    def k(A: T.Tensor((48, 64), "float32"), B: T.Tensor((48, 64), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((32, 64), "float32")
            T.copy(A[0:16, 0:64], S)
            T.copy(S, B[8:24, 0:64])

    a, b = tensor(rng, (48, 64), "float32"), tensor(rng, (48, 64), "float32")
    b0 = f64(b)
    run(k, a, b)
    expect = b0.copy()
    expect[8:40] = f64(a)[0:32]
    assert np.array_equal(f64(b), expect)


def test_global_to_global_and_shared_to_shared(rng):
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
        with T.Kernel(2, threads=32) as bx:
            S1 = T.alloc_shared((8, 16), "float32")
            S2 = T.alloc_shared((8, 16), "float32")
            T.copy(A[bx * 8:bx * 8 + 8, :], S1)
            T.copy(S1, S2)
            T.copy(S2, B[bx * 8, 0])
            T.copy(A[bx * 8:bx * 8 + 8, 0:8], B[bx * 8:bx * 8 + 8, 8:16])

    a, b = tensor(rng, (16, 16), "float32"), poisoned((16, 16), "float32")
    run(k, a, b)
    expect = f64(a).copy()
    expect[:, 8:] = f64(a)[:, :8]
    assert np.array_equal(f64(b), expect)


@pytest.mark.parametrize("src,dst", [("float32", "float16"), ("float32", "bfloat16"),
                                     ("float32", "int32"), ("float16", "int8"),
                                     ("float32", "float8_e4m3"), ("int32", "float32"),
                                     ("bfloat16", "float32")])
def test_copy_converts_to_dst_dtype(rng, src, dst):
    @T.prim_func
    def k(A: T.Tensor((32, 32), src), B: T.Tensor((32, 32), dst)):
        with T.Kernel(1, threads=32):
            F = T.alloc_fragment((32, 32), dst)
            T.copy(A, F)
            T.copy(F, B)

    if src.startswith("int"):
        a = tensor(rng, (32, 32), src, -1000, 1000)
    else:
        a = (tensor(rng, (32, 32), "float32") * 50).to(getattr(torch, src))
    b = torch.zeros((32, 32), dtype=getattr(torch, dst.replace("e4m3", "e4m3fn")))
    run(k, a, b)
    if dst.startswith("int"):
        # truncation toward zero, saturating at the type's range (PTX cvt.rzi)
        info = torch.iinfo(b.dtype)
        expect = torch.trunc(a.double()).clamp(info.min, info.max).to(b.dtype)
    else:
        expect = a.to(b.dtype)
    assert torch.equal(b.double(), expect.double())


def test_fill_regions_and_global_oob(rng):
    @T.prim_func
    def k(A: T.Tensor((4, 64), "float32"), B: T.Tensor((4, 16), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((4, 16), "float32")
            T.clear(S)
            T.fill(S[2:4, 0:16], 7)
            T.fill(S[0, 0:8], -1.5)
            T.copy(S, B)
            T.fill(A[0:4, 60:68], 2.0)

    a, b = tensor(rng, (4, 64), "float32"), poisoned((4, 16), "float32")
    a0 = f64(a)
    run(k, a, b)
    expect = np.zeros((4, 16))
    expect[2:] = 7
    expect[0, :8] = -1.5
    assert np.array_equal(f64(b), expect)
    a_expect = a0.copy()
    a_expect[:, 60:] = 2.0
    assert np.array_equal(f64(a), a_expect)


def test_shared_region_out_of_range_is_an_error(rng):
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), s: T.int32):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((32,), "float32")
            T.clear(S)
            T.copy(S[s:s + 16], A[0:16])

    run(k, tensor(rng, (64,), "float32"), 8)  # in range: fine
    with pytest.raises(IndexError, match=r"S\[20:36\]"):
        run(k, tensor(rng, (64,), "float32"), 20)


def test_shared_element_out_of_range_is_an_error(rng):
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), n: T.int32):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((32,), "float32")
            for i in T.Parallel(32):
                S[i] = 1.0
            for i in T.Parallel(32):
                if i < n:
                    A[i] = S[i + 4]

    run(k, tensor(rng, (64,), "float32"), 28)  # guarded lanes never read past the end
    with pytest.raises(IndexError, match=r"buffer S\[32\]"):
        run(k, tensor(rng, (64,), "float32"), 29)


@pytest.mark.parametrize("dtype,value", [("float16", 0.1), ("bfloat16", 0.1), ("int8", 300),
                                         ("int32", -7), ("float32", 1e-3)])
def test_fill_value_cast_to_dtype(dtype, value):
    @T.prim_func
    def k(B: T.Tensor((40, 8), dtype)):
        with T.Kernel(3, threads=32) as bx:
            F = T.alloc_fragment((16, 8), dtype)
            T.fill(F, value)
            T.copy(F, B[bx * 16, 0])          # the last block reaches past row 40

    b = poisoned((40, 8), dtype)
    run(k, b)
    tdt = getattr(torch, dtype)
    if tdt.is_floating_point:
        expect = torch.tensor(value, dtype=torch.float32).to(tdt)
    else:
        expect = torch.tensor(value).to(torch.int64).to(tdt)  # wraps, as a C cast of a literal
    assert (b == expect).all()


def test_per_thread_copies_at_thread_dependent_regions(rng):
    # each thread copies its own row piece into a local buffer and back (the reference's
    # sparse compressor does this): regions that differ between threads
    @T.prim_func
    def k(A: T.Tensor((8, 64), "float16"), B: T.Tensor((8, 64), "float32")):
        with T.Kernel(1, threads=(8, 4)):
            tm = T.get_thread_binding(0)
            tn = T.get_thread_binding(1)
            piece = T.alloc_local((16,), "float16")
            out = T.alloc_local((16,), "float32")
            T.copy(A[tm, tn * 16:(tn + 1) * 16], piece)
            for i in T.serial(16):
                out[i] = piece[i] * 2.0 + tn
            T.copy(out, B[tm, tn * 16:(tn + 1) * 16])

    # eighths: piece[i] * 2.0 + tn is exact in float16 and float32 alike (the test is about
    # which thread copies what, not about rounding)
    a = torch.from_numpy(rng.integers(-64, 64, (8, 64)) / 8).to(torch.float16)
    b = poisoned((8, 64), "float32")
    run(k, a, b)
    expect = f64(a) * 2 + np.repeat(np.arange(4), 16)[None, :]
    assert np.array_equal(f64(b), expect)


def test_per_thread_copy_reads_zeros_outside_the_tensor(rng):
    @T.prim_func
    def k(A: T.Tensor((5, 8), "int32"), B: T.Tensor((8, 8), "int32")):
        with T.Kernel(1, threads=8):
            t = T.get_thread_binding(0)
            row = T.alloc_local((8,), "int32")
            T.copy(A[t, 0:8], row)
            T.copy(row, B[t, 0:8])

    a, b = tensor(rng, (5, 8), "int32"), poisoned((8, 8), "int32")
    run(k, a, b)
    expect = np.zeros((8, 8))
    expect[:5] = f64(a)
    assert np.array_equal(f64(b), expect)
