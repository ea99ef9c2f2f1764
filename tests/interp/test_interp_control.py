"""Control flow and scalar state on the interpreter: alloc_var, while, break/continue (uniform
and thread-dependent), per-thread locals, T.Parallel masks, per-iteration alloc_var and serial
loops, let semantics, multi-kernel functions, workspaces, dynamic shapes, poison, asserts."""

import numpy as np
import pytest
import torch

import tilelang.language as T
from interp_testutil import cpu, f64, poisoned, run, tensor
from tilelang.transform.uninitialized_reads import UninitializedReadWarning


def test_while_with_alloc_var(rng):
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), B: T.Tensor((2,), "float32"), n: T.int32):
        with T.Kernel(1, threads=32):
            i = T.alloc_var("int32")
            s = T.alloc_var("float32", 0.5)
            while i < n:
                s += A[i]
                i += 1
            B[0] = s
            B[1] = i

    a, b = tensor(rng, (64,), "float32"), poisoned((2,), "float32")
    run(k, a, b, 37)
    # a float32 running sum: its error scales with the terms' magnitudes, not with the sum's
    # (which random terms can cancel down to near zero)
    scale = 0.5 + np.abs(f64(a)[:37]).sum()
    np.testing.assert_allclose(f64(b)[0], 0.5 + f64(a)[:37].sum(), rtol=0, atol=1e-6 * scale)
    assert f64(b)[1] == 37


def test_break_on_data(rng):
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=64):
            idx = T.alloc_var("int32", -1)
            for i in T.serial(128):
                if A[i] > 1.5:
                    idx = i
                    break
            B[0] = idx

    a, b = tensor(rng, (128,), "float32"), poisoned((1,), "int32")
    run(k, a, b)
    hits = np.nonzero(f64(a) > 1.5)[0]
    assert b.item() == (hits[0] if len(hits) else -1)


def test_thread_dependent_break_continue_and_while():
    @T.prim_func
    def k(B: T.Tensor((128,), "int32"), C: T.Tensor((128,), "int32"),
          D: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            acc = T.alloc_var("int32")
            for kk in T.serial(64):
                if kk >= tx:
                    break
                acc += 1
            B[tx] = acc
            acc2 = T.alloc_var("int32")
            for kk in range(10):
                if kk % 2 == tx % 2:
                    continue
                acc2 += kk
            C[tx] = acc2
            v = T.alloc_var("int32")
            while v < tx:
                v += 3
            D[tx] = v

    b, c, d = (torch.zeros(128, dtype=torch.int32) for _ in range(3))
    run(k, b, c, d)
    tx = np.arange(128)
    assert np.array_equal(b.numpy(), np.minimum(tx, 64))
    odd, even = sum(range(1, 10, 2)), sum(range(0, 10, 2))
    assert np.array_equal(c.numpy(), np.where(tx % 2 == 0, odd, even))
    assert np.array_equal(d.numpy(), -(-tx // 3) * 3)


def test_per_thread_local_array():
    @T.prim_func
    def k(B: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            L = T.alloc_local((4,), "int32")
            for j in T.serial(4):
                L[j] = tx * j
            B[tx] = L[3] - L[1] + L[tx % 4]

    b = torch.zeros(64, dtype=torch.int32)
    run(k, b)
    tx = np.arange(64)
    assert np.array_equal(b.numpy(), 2 * tx + tx * (tx % 4))


def test_parallel_if_else_and_continue(rng):
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(16, 16):
                if A[i, j] < -1.0:
                    continue
                x = A[i, j] * 2.0
                if j < 8:
                    B[i, j] = x
                elif i < 4:
                    B[i, j] = -x
                else:
                    B[i, j] = x + 100.0

    a = tensor(rng, (16, 16), "float32")
    b = torch.full((16, 16), 7.0)
    run(k, a, b)
    x = f64(a) * 2
    i, j = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    expect = np.where(j < 8, x, np.where(i < 4, -x, x + 100.0))
    expect = np.where(f64(a) < -1.0, 7.0, expect)
    np.testing.assert_allclose(f64(b), expect, rtol=1e-6)


def test_parallel_alloc_var_and_lane_dependent_serial(rng):
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16,), "float32"),
          C: T.Tensor((16,), "int32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(16):
                acc = T.alloc_var("float32")
                for j in T.serial(i + 1):  # triangular: trip count depends on i
                    acc += A[i, j]
                B[i] = acc
                cnt = T.alloc_var("int32")
                for j in T.serial(16):
                    if A[i, j] < 0:
                        break
                    cnt += 1
                C[i] = cnt

    a = tensor(rng, (16, 16), "float32")
    b, c = poisoned((16,), "float32"), poisoned((16,), "int32")
    run(k, a, b, c)
    x = f64(a)
    np.testing.assert_allclose(f64(b), [x[i, :i + 1].sum() for i in range(16)], rtol=1e-5,
                               atol=1e-6)
    first_neg = [int(np.argmax(r < 0)) if (r < 0).any() else 16 for r in x]
    assert c.tolist() == first_neg


def test_serial_negative_step_and_let_semantics(rng):
    @T.prim_func
    def k(A: T.Tensor((4,), "float32"), B: T.Tensor((10,), "int32")):
        with T.Kernel(1, threads=1):
            n = T.alloc_var("int32")
            for i in range(10, 0, -1):
                B[n] = i
                n += 1
            x = A[0]
            A[0] = 5.0
            A[1] = x
            A[2], A[3] = A[3], A[2]

    a = tensor(rng, (4,), "float32")
    a0 = f64(a)
    b = poisoned((10,), "int32")
    run(k, a, b)
    assert b.tolist() == list(range(10, 0, -1))
    assert f64(a).tolist() == [5.0, a0[0], a0[3], a0[2]]


def test_two_kernels_in_order(rng):
    @T.prim_func
    def k(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(4, threads=64) as bx:
            for i in T.Parallel(64):
                A[bx * 64 + i] = A[bx * 64 + i] * 2.0
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[255 - bx * 128 - i] + 1.0

    a, b = tensor(rng, (256,), "float32"), poisoned((256,), "float32")
    a0 = f64(a)
    run(k, a, b)
    np.testing.assert_allclose(f64(b), (a0 * 2)[::-1] + 1.0, rtol=1e-6)


def test_workspace_and_dynamic_shape(rng):
    m = T.dynamic("m")

    @T.prim_func
    def k(A: T.Tensor((m,), "float32"), B: T.Tensor((m,), "float32"), scale: T.float32):
        W = T.alloc_global((m,), "float32")
        with T.Kernel(T.ceildiv(m, 32), threads=32) as bx:
            for i in T.Parallel(32):
                W[bx * 32 + i] = A[bx * 32 + i] * scale
        with T.Kernel(T.ceildiv(m, 32), threads=32) as bx:
            for i in T.Parallel(32):
                B[bx * 32 + i] = W[bx * 32 + i] + 1.0

    kern = cpu(k, out_idx=[1])
    for n in (5, 64, 100):
        a = tensor(rng, (n,), "float32")
        b = kern(a, 0.25)
        np.testing.assert_allclose(f64(b), f64(a) * 0.25 + 1.0, rtol=1e-6)


def test_fresh_memory_is_poisoned():
    @T.prim_func
    def k(B: T.Tensor((8,), "float32"), C: T.Tensor((3,), "int32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((8,), "float32")
            L = T.alloc_local((1,), "int32")
            v = T.alloc_var("int32")
            T.copy(S, B)
            C[0] = L[0]
            C[1] = v
            C[2] = 1

    b, c = torch.zeros(8), torch.zeros(3, dtype=torch.int32)
    with pytest.warns(UninitializedReadWarning, match="local buffer `L`"):
        run(k, b, c)
    assert torch.isnan(b).all()
    assert c[0].item() == -123456789 and c[1].item() == 0


def test_device_assert(rng):
    @T.prim_func
    def k(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                T.device_assert(A[i] >= 0.0, "A must be non-negative")

    run(k, torch.rand(32))
    a = torch.rand(32)
    a[7] = -1.0
    with pytest.raises(AssertionError, match="A must be non-negative"):
        run(k, a)


def test_thread_values_in_parallel_must_agree(rng):
    @T.prim_func
    def ok(B: T.Tensor((2, 8), "int32")):
        with T.Kernel(2, threads=32) as bx:
            v = T.alloc_var("int32")
            v = bx * 10 + 3
            for i in T.Parallel(8):
                B[bx, i] = v + i

    b = poisoned((2, 8), "int32")
    run(ok, b)
    assert b.tolist() == [[3 + i for i in range(8)], [13 + i for i in range(8)]]

    @T.prim_func
    def bad(B: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            for i in T.Parallel(8):
                B[i] = tx

    with pytest.raises(NotImplementedError, match="differs between threads"):
        run(bad, poisoned((8,), "int32"))


def test_tile_op_under_thread_condition_is_rejected():
    @T.prim_func
    def k(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            S = T.alloc_shared((32,), "float32")
            if tx == 0:
                T.fill(S, 1.0)
            T.copy(S, A)

    with pytest.raises(NotImplementedError, match="T.fill .*thread-dependent"):
        run(k, torch.zeros(32))


def test_uniform_condition_around_tile_ops(rng):
    @T.prim_func
    def k(A: T.Tensor((4, 32), "float32"), B: T.Tensor((4, 32), "float32")):
        with T.Kernel(4, threads=32) as bx:
            S = T.alloc_shared((32,), "float32")
            if bx % 2 == 0:
                T.copy(A[bx, 0:32], S)
            else:
                T.fill(S, -1.0)
            T.copy(S, B[bx, 0:32])

    a, b = tensor(rng, (4, 32), "float32"), poisoned((4, 32), "float32")
    run(k, a, b)
    expect = f64(a).copy()
    expect[1::2] = -1.0
    assert np.array_equal(f64(b), expect)


def test_shuffles_warp_reduce():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), S: T.Tensor((64,), "float32"),
          D: T.Tensor((64,), "float32"), U: T.Tensor((64,), "float32"),
          X: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            v = T.alloc_var("float32")
            v = A[tx]
            for s in T.unroll(5):
                v += T.shfl_xor(v, 1 << s)
            S[tx] = v
            D[tx] = T.shfl_down(A[tx], 3, 8)
            U[tx] = T.shfl_up(A[tx], 2)
            X[tx] = T.shfl_sync(A[tx], 5)

    a = torch.arange(64, dtype=torch.float32)
    s, d, u, x = (torch.zeros(64) for _ in range(4))
    run(k, a, s, d, u, x)
    x_np = a.numpy()
    warp_sums = np.repeat(x_np.reshape(2, 32).sum(1), 32)
    assert np.array_equal(s.numpy(), warp_sums)
    lane = np.arange(64) % 32
    down = np.where(lane % 8 + 3 < 8, x_np + 3, x_np)
    assert np.array_equal(d.numpy(), down)
    assert np.array_equal(u.numpy(), np.where(lane >= 2, x_np - 2, x_np))
    assert np.array_equal(x.numpy(), np.repeat([5.0, 37.0], 32))


def test_guarded_shared_access_in_select(rng):
    @T.prim_func
    def k(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((16,), "float32")
            T.copy(A, S)
            for i in T.Parallel(16):
                B[i] = T.if_then_else(i + 4 < 16, S[i + 4], -1.0)
                if i < 12 and S[i + 4] > 0:
                    B[i] = 0.0

    a, b = tensor(rng, (16,), "float32"), poisoned((16,), "float32")
    run(k, a, b)
    x = f64(a)
    expect = np.concatenate([x[4:], -np.ones(4)])
    expect[:12] = np.where(x[4:] > 0, 0.0, expect[:12])
    assert np.array_equal(f64(b), expect)


def test_per_thread_trip_counts_init_and_local_clear():
    @T.prim_func
    def k(B: T.Tensor((32,), "int32"), C: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            acc = T.alloc_var("int32", tx * 100)      # per-thread initial value
            for j in T.serial(tx % 5):                # per-thread trip count
                acc += j + 1
            B[tx] = acc
            L = T.alloc_local((3,), "int32")
            L[0] = tx
            T.clear(L)                                # every thread clears its own copy
            L[1] = L[1] + tx
            C[tx] = L[0] + L[1] + L[2]

    b, c = torch.zeros(32, dtype=torch.int32), torch.zeros(32, dtype=torch.int32)
    run(k, b, c)
    tx = np.arange(32)
    n = tx % 5
    assert np.array_equal(b.numpy(), tx * 100 + n * (n + 1) // 2)
    assert np.array_equal(c.numpy(), tx)


def test_strided_tensor_parameter(rng):
    @T.prim_func
    def k(A: T.StridedTensor((4, 6), (10, 1), "float32"), B: T.Tensor((4, 6), "float32")):
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(4, 6):
                B[i, j] = A[i, j] * 2.0
                A[i, j] = -1.0

    base = tensor(rng, (4, 10), "float32")
    view = base[:, 2:8]
    orig = f64(view)
    b = poisoned((4, 6), "float32")
    run(k, view, b)
    np.testing.assert_allclose(f64(b), orig * 2.0)
    assert (base[:, 2:8] == -1.0).all() and torch.isfinite(base).all()


def test_conditional_update_idiom_skips_unchosen_lanes(rng):
    # `x[i] = T.if_then_else(c, v, x[i])` stores only where c holds: the reference's sparse
    # compressor reaches i == len(x) on the other lanes (a no-op write-back on a GPU)
    @T.prim_func
    def k(A: T.Tensor((32, 4), "float32"), P: T.Tensor((32, 2), "int32")):
        with T.Kernel(1, threads=32):
            t = T.get_thread_binding(0)
            idx = T.alloc_local((2,), "uint8")
            count = T.alloc_var(dtype="uint8")
            T.clear(idx)
            count = 0
            for i in T.unroll(4):
                idx[count] = T.if_then_else(A[t, i] != 0, i, idx[count])
                count = T.if_then_else(A[t, i] != 0, count + 1, count)
            for j in T.serial(2):
                P[t, j] = idx[j]

    a = np.zeros((32, 4), np.float32)
    for r in range(32):  # at most two nonzeros per row, anywhere
        a[r, rng.choice(4, size=rng.integers(0, 3), replace=False)] = 1.0
    p = poisoned((32, 2), "int32")
    run(k, torch.from_numpy(a), p)
    for r in range(32):
        nz = list(np.flatnonzero(a[r]))
        assert list(p[r].numpy()) == nz + [0] * (2 - len(nz))


def test_conditional_update_out_of_range_where_chosen_is_an_error():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=4):
            t = T.get_thread_binding(0)
            x = T.alloc_local((2,), "float32")
            T.clear(x)
            x[t] = T.if_then_else(t >= 1, 1.0, x[t])
            A[t] = x[0]

    with pytest.raises(IndexError, match=r"x\[2\]"):
        run(k, torch.zeros(4))
