"""Atomics on the interpreter: block-level scalar atomics happen once per thread, atomics in
T.Parallel once per iteration (duplicate addresses accumulate), tile atomics once per element
per block, return_prev, max/min, addx2/x4, and dropped out-of-bounds atomics."""

import numpy as np
import pytest
import torch

import tilelang.language as T
from interp_testutil import f64, run, tensor


@pytest.mark.parametrize("threads", [32, 128, (32, 2)])
def test_block_level_atomic_repeats_per_thread(threads):
    nthreads = threads if isinstance(threads, int) else threads[0] * threads[1]

    @T.prim_func
    def k(B: T.Tensor((4,), "float32")):
        with T.Kernel(3, threads=threads):
            T.atomic_add(B[0], 1.0)

    b = torch.zeros(4)
    run(k, b)
    assert b.tolist() == [3.0 * nthreads, 0, 0, 0]


def test_atomic_under_thread_condition_and_per_thread_address():
    @T.prim_func
    def k(B: T.Tensor((64,), "int32"), C: T.Tensor((2,), "int32")):
        with T.Kernel(2, threads=64) as bx:
            tx = T.get_thread_binding()
            if tx < 5:
                T.atomic_add(C[0], 1)
            T.atomic_add(B[tx], bx + 1)
            if tx % 2 == 0:
                T.atomic_max(C[1], tx * 10 + bx)

    b, c = torch.zeros(64, dtype=torch.int32), torch.zeros(2, dtype=torch.int32)
    run(k, b, c)
    assert c.tolist() == [10, 621]
    assert b.tolist() == [3] * 64


def test_atomic_in_parallel_histogram(rng):
    @T.prim_func
    def k(A: T.Tensor((1000,), "int32"), H: T.Tensor((16,), "int32")):
        with T.Kernel(T.ceildiv(1000, 256), threads=128) as bx:
            for i in T.Parallel(256):
                if bx * 256 + i < 1000:
                    T.atomic_add(H[A[bx * 256 + i]], 1)

    a = tensor(rng, (1000,), "int32", 0, 16)
    h = torch.zeros(16, dtype=torch.int32)
    run(k, a, h)
    assert np.array_equal(h.numpy(), np.bincount(a.numpy(), minlength=16))


def test_atomic_float16_and_oob_dropped(rng):
    @T.prim_func
    def k(A: T.Tensor((64,), "float16"), B: T.Tensor((8,), "float16"), n: T.int32):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(64):
                T.atomic_add(B[i % 8 + n], A[i])

    a = tensor(rng, (64,), "float16")
    b = torch.zeros(8, dtype=torch.float16)
    run(k, a, b, 4)  # targets 4..11: half of them out of bounds, dropped
    expect = np.zeros(8)
    for i in range(64):
        if i % 8 + 4 < 8:
            expect[i % 8 + 4] += f64(a)[i]
    np.testing.assert_allclose(f64(b), expect, rtol=1e-2, atol=1e-2)
    assert (f64(b)[:4] == 0).all()


def test_atomic_return_prev_is_sequential():
    @T.prim_func
    def k(B: T.Tensor((4,), "float32"), P: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            old = T.atomic_add(B[1], 1.0, return_prev=True)
            P[tx] = old

    b, p = torch.zeros(4), torch.zeros(32)
    b[1] = 10.0
    run(k, b, p)
    assert b[1].item() == 42.0
    assert sorted(p.tolist()) == [10.0 + i for i in range(32)]


def test_atomic_min_and_bfloat16(rng):
    @T.prim_func
    def k(A: T.Tensor((128,), "bfloat16"), B: T.Tensor((2,), "bfloat16")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(128):
                T.atomic_min(B[0], A[i])
                T.atomic_max(B[1], A[i])

    a = tensor(rng, (128,), "bfloat16")
    b = torch.tensor([100.0, -100.0], dtype=torch.bfloat16)
    run(k, a, b)
    assert b.tolist() == [a.min().item(), a.max().item()]


def test_tile_atomic_add_once_per_element_per_block(rng):
    @T.prim_func
    def k(A: T.Tensor((16, 32), "float32"), B: T.Tensor((16, 32), "float32"),
          C: T.Tensor((40,), "float32")):
        with T.Kernel(4, threads=128) as bx:
            S = T.alloc_shared((16, 32), "float32")
            T.copy(A, S)
            T.atomic_add(B, S)
            T.atomic_add(C[bx * 8:bx * 8 + 16], S[0, 0:16])   # the last block runs past C

    a = tensor(rng, (16, 32), "float32")
    b, c = torch.zeros(16, 32), torch.zeros(40)
    run(k, a, b, c)
    np.testing.assert_allclose(f64(b), 4 * f64(a), rtol=1e-6)
    expect = np.zeros(40)
    for bx in range(4):
        for i in range(16):
            if bx * 8 + i < 40:
                expect[bx * 8 + i] += f64(a)[0, i]
    np.testing.assert_allclose(f64(c), expect, rtol=1e-6, atol=1e-6)


def test_tile_atomic_ones_sixteen_times():
    @T.prim_func
    def k(B: T.Tensor((8, 8), "float32")):
        with T.Kernel(16, threads=64):
            S = T.alloc_shared((8, 8), "float32")
            T.fill(S, 1.0)
            T.atomic_add(B, S)

    b = torch.zeros(8, 8)
    run(k, b)
    assert (b == 16).all()


def test_atomic_addx2_block_level(rng):
    @T.prim_func
    def k(A: T.Tensor((8,), "float16"), B: T.Tensor((8,), "float16")):
        with T.Kernel(1, threads=4):
            T.atomic_addx2(B[2], A[4])

    a = torch.arange(8, dtype=torch.float16)
    b = torch.zeros(8, dtype=torch.float16)
    run(k, a, b)
    assert b.tolist() == [0, 0, 16, 20, 0, 0, 0, 0]  # 4 threads x (A[4], A[5])
