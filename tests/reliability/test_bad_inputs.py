"""Bad input never crashes, hangs or touches memory outside the tensors: wrong argument count,
rank, shape, dtype, device, strides or type raise an error naming the parameter before anything
runs; a zero-size dimension that leaves a grid with no blocks is such an error (as in the
reference, its issue 1993); views with offsets work; sizes beyond 32-bit index arithmetic are
refused; NaN and Inf propagate as the semantics say. CPU target here; the `gpu` variants run the
same calls on the device (after a warm-up call, so the fast call path is the one checked)."""

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T

GPU = pytest.mark.gpu


def _add_kernel(target):
    n = T.dynamic("n")

    @T.prim_func
    def add(A: T.Tensor((n, 8), "float32"), B: T.Tensor((n, 8), "float32"),
            C: T.Tensor((n, 8), "float32")):
        with T.Kernel(T.ceildiv(n, 4), threads=32) as bx:
            for i, j in T.Parallel(4, 8):
                C[bx * 4 + i, j] = A[bx * 4 + i, j] + B[bx * 4 + i, j]
    return tilelang.compile(add, out_idx=-1, target=target)


def _scale_kernel(target):
    @T.prim_func
    def scale(A: T.Tensor((16,), "float32"), s: T.float32, k: T.int32,
              C: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(16):
                C[i] = A[i] * s + k
    return tilelang.compile(scale, out_idx=-1, target=target)


@pytest.fixture(scope="module")
def add_cpu():
    return _add_kernel("cpu")


def _bad_calls(dev):
    a = torch.randn(5, 8, device=dev)
    b = torch.randn(5, 8, device=dev)
    return [
        ("too few", (a,), ValueError, "expected 2 inputs, but 1"),
        ("too many", (a, b, b), ValueError, "expected 2 inputs, but 3"),
        ("rank", (a, b.reshape(40)), ValueError, "'B': ndim mismatch, expected 2, got 1"),
        ("symbolic size", (a, torch.randn(6, 8, device=dev)), ValueError,
         "'B': shape[0] mismatch: expected 5 (= n), got 6"),
        ("static size", (a, torch.randn(5, 9, device=dev)), ValueError,
         "'B': shape[1] mismatch: expected 8, got 9"),
        ("dtype", (a, b.half()), ValueError, "'B': dtype mismatch, expected float32, got float16"),
        ("transposed", (a, torch.randn(8, 5, device=dev).t()), ValueError,
         "'B': must be contiguous"),
        ("strided slice", (a, torch.randn(5, 16, device=dev)[:, ::2]), ValueError,
         "'B': must be contiguous"),
        ("numpy array", (a.cpu().numpy(), b), TypeError, "'A': expects a torch.Tensor"),
        ("list", (a, [[1.0] * 8] * 5), TypeError, "'B': expects a torch.Tensor"),
        ("None", (None, b), TypeError, "'A': expects a torch.Tensor"),
    ]


@pytest.mark.parametrize("i", range(11))
def test_bad_arguments_name_the_parameter(add_cpu, i):
    what, args, exc, text = _bad_calls("cpu")[i]
    with pytest.raises(exc, match=_re(text)):
        add_cpu(*args)


def _re(text):
    import re

    return re.escape(text)


def test_tensor_on_another_device_is_refused(add_cpu):
    a = torch.randn(5, 8)
    with pytest.raises(ValueError, match="'B': is on meta, but this kernel runs on the CPU"):
        add_cpu(a, torch.empty(5, 8, device="meta"))


@pytest.mark.parametrize("args,exc,text", [
    ((torch.ones(16), "2.0", 1), TypeError, "'s': expected float, got str"),
    ((torch.ones(16), 2.0, 1.5), TypeError, "'k': expected integer, got float"),
    ((torch.ones(16), 2.0, 2 ** 31), ValueError, "'k': value 2147483648 does not fit in int32"),
    ((torch.ones(16), torch.ones(2), 1), TypeError, "'s': expected float"),
])
def test_bad_scalars(args, exc, text):
    k = _scale_kernel("cpu")
    with pytest.raises(exc, match=_re(text)):
        k(*args)
    out = k(torch.ones(16), 2, True)  # ints for floats and bools for ints are accepted
    assert out.tolist() == [3.0] * 16


def test_failed_call_writes_nothing(add_cpu):
    a = torch.randn(5, 8)
    a0 = a.clone()
    with pytest.raises(ValueError):
        add_cpu(a, torch.randn(5, 8).half())
    assert torch.equal(a, a0)


def test_zero_size_dimension(add_cpu):
    # n = 0 makes the grid ceildiv(n, 4) empty: an error naming it, before anything runs
    with pytest.raises(ValueError, match="grid extent 0 along x launches no blocks"):
        add_cpu(torch.empty(0, 8), torch.empty(0, 8))
    assert add_cpu(torch.ones(1, 8), torch.ones(1, 8)).shape == (1, 8)


def test_views_with_offsets_stay_inside_their_tensor(add_cpu):
    """A contiguous view into a larger buffer: ragged edges (n = 5 rows, tiles of 4) must not
    read or write the sentinel rows around it."""
    store_a = torch.full((9, 8), 1e30)
    store_b = torch.full((9, 8), 1e30)
    a, b = store_a[2:7], store_b[2:7]
    a.copy_(torch.randn(5, 8))
    b.copy_(torch.randn(5, 8))
    out = add_cpu(a, b)
    torch.testing.assert_close(out, a + b)
    assert (store_a[:2] == 1e30).all() and (store_a[7:] == 1e30).all()
    assert (store_b[:2] == 1e30).all() and (store_b[7:] == 1e30).all()


def test_inputs_are_not_modified(add_cpu):
    a, b = torch.randn(7, 8), torch.randn(7, 8)
    a0, b0 = a.clone(), b.clone()
    add_cpu(a, b)
    assert torch.equal(a, a0) and torch.equal(b, b0)


# ---- sizes beyond 32-bit index arithmetic ----------------------------------------------------

def _first_row_kernel():
    n, s0 = T.dynamic("n, s0")

    @T.prim_func
    def last_row(A: T.StridedTensor((n, 8), (s0, 1), "float32"), C: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32):
            for j in T.Parallel(8):
                C[j] = A[n - 1, j]
    return last_row


def test_size_beyond_int32_symbol_is_refused():
    """n = 2^31 + 5 would wrap to a negative int32 and read the wrong row (silently 0 before)."""
    k = tilelang.compile(_first_row_kernel(), out_idx=-1, target="cpu")
    assert k(torch.arange(24.0).reshape(3, 8)).tolist() == list(range(16, 24))
    huge = torch.arange(8.0).reshape(1, 8).expand(2 ** 31 + 5, 8)  # no memory behind it
    with pytest.raises(ValueError, match=r"'A': shape\[0\] = 2147483653 does not fit the int32 "
                                         r"size `n`; declare it T.dynamic\(\"n\", \"int64\"\)"):
        k(huge)


def test_tensor_beyond_int32_offsets_is_refused():
    """n fits int32, but n * 8 elements do not: offsets computed in int32 would wrap."""
    n = T.dynamic("n")

    @T.prim_func
    def copy(A: T.Tensor((n, 8), "int8"), C: T.Tensor((n, 8), "int8")):
        with T.Kernel(T.ceildiv(n, 16), threads=128) as bx:
            for i, j in T.Parallel(16, 8):
                C[bx * 16 + i, j] = A[bx * 16 + i, j]
    k = tilelang.compile(copy, out_idx=-1, target="cpu")
    big = torch.empty(2 ** 28 + 1, 8, dtype=torch.int8)  # 2 GiB of address space, untouched
    with pytest.raises(ValueError, match=r"'A': spans 2147483656 elements .* 32-bit index"):
        k(big)
    del big


def test_output_beyond_int32_offsets_is_refused():
    m = T.dynamic("m")

    @T.prim_func
    def outer(A: T.Tensor((m,), "int8"), C: T.Tensor((m, m), "int8")):
        with T.Kernel(1, threads=32):
            C[0, 0] = A[0]
    k = tilelang.compile(outer, out_idx=-1, target="cpu")
    with pytest.raises(ValueError, match=r"'C': spans 2500000000 elements"):
        k(torch.zeros(50_000, dtype=torch.int8))


def test_output_allocation_failure_raises_torchs_error():
    """An output too large for memory: torch's allocator error reaches the caller unchanged."""
    m = T.dynamic("m", "int64")

    @T.prim_func
    def outer(A: T.Tensor((m,), "float32"), C: T.Tensor((m, m), "float32")):
        with T.Kernel(1, threads=32):
            C[0, 0] = A[0]
    k = tilelang.compile(outer, out_idx=-1, target="cpu")
    with pytest.raises(RuntimeError, match="can't allocate memory|out of memory"):
        k(torch.zeros(2 ** 21))  # 2^42 elements = 16 TiB


# ---- NaN and Inf ---------------------------------------------------------------------------

def _nan_kernels():
    @T.prim_func
    def ew(X: T.Tensor((4, 8), "float32"), Y: T.Tensor((4, 8), "float32"),
           Z: T.Tensor((4, 8), "float32"), H: T.Tensor((4, 8), "float16")):
        with T.Kernel(1, threads=32):
            F = T.alloc_fragment((4, 8), "float32")
            T.copy(X[0, 0], F)
            for i, j in T.Parallel(4, 8):
                Z[i, j] = T.exp(F[i, j]) * Y[i, j] + F[i, j]
            T.copy(F, H[0, 0])

    @T.prim_func
    def red(X: T.Tensor((4, 8), "float32"), S: T.Tensor((4,), "float32"),
            M: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            F = T.alloc_fragment((4, 8), "float32")
            s = T.alloc_fragment((4,), "float32")
            m = T.alloc_fragment((4,), "float32")
            T.copy(X[0, 0], F)
            T.reduce_sum(F, s, dim=1)
            T.reduce_max(F, m, dim=1)
            T.copy(s, S[0])
            T.copy(m, M[0])

    @T.prim_func
    def mm(A: T.Tensor((16, 16), "float16"), B: T.Tensor((16, 16), "float16"),
           C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32):
            A_s = T.alloc_shared((16, 16), "float16")
            B_s = T.alloc_shared((16, 16), "float16")
            C_l = T.alloc_fragment((16, 16), "float32")
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.clear(C_l)
            T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[0, 0])
    return ew, red, mm


def _special_inputs(dev):
    x = torch.randn(4, 8, device=dev)
    x[0, 1], x[1, 2], x[2, 3], x[3, 4] = float("nan"), float("inf"), -float("inf"), 1e5
    y = torch.randn(4, 8, device=dev)
    y[3, 5] = float("nan")
    return x, y


def _check_nan_inf(target, dev):
    ew, red, mm = _nan_kernels()
    x, y = _special_inputs(dev)
    z, h = tilelang.compile(ew, out_idx=[2, 3], target=target)(x, y)
    torch.testing.assert_close(z, torch.exp(x) * y + x, equal_nan=True, rtol=1e-5, atol=1e-5)
    assert torch.equal(h.isnan(), x.isnan()) and torch.equal(h.isinf(), x.half().isinf())
    assert h[3, 4].item() == float("inf")  # 1e5 overflows float16 to inf, as torch does
    s, m = tilelang.compile(red, out_idx=[1, 2], target=target)(x)
    torch.testing.assert_close(s, x.sum(1), equal_nan=True, rtol=1e-5, atol=1e-4)
    # max ignores NaN by default (SEMANTICS §8: CUDA max), unlike torch.max
    want_m = torch.where(x.isnan(), -float("inf"), x).max(1).values
    torch.testing.assert_close(m, want_m)
    a = torch.randn(16, 16, device=dev).half()
    b = torch.randn(16, 16, device=dev).half()
    a[2, 5] = float("nan")
    b[7, 9] = float("inf")
    c = tilelang.compile(mm, out_idx=-1, target=target)(a, b)
    want = a.double() @ b.double()  # NaN row 2; inf in column 9 (or NaN where 0 * inf)
    assert torch.equal(c.isnan(), want.isnan()), "NaN pattern differs from torch"
    assert torch.equal(c.isinf(), want.isinf()), "Inf pattern differs from torch"
    fin = want.isfinite()
    torch.testing.assert_close(c[fin].double(), want[fin], rtol=2e-3, atol=2e-3)


def test_nan_and_inf_propagate():
    _check_nan_inf("cpu", "cpu")


# ---- GPU variants -------------------------------------------------------------------------

@GPU
@pytest.mark.parametrize("i", range(11))
def test_gpu_bad_arguments_name_the_parameter(i):
    k = _add_kernel("cuda")
    a = torch.randn(5, 8, device="cuda")
    torch.testing.assert_close(k(a, a), a + a)  # warm up: the fast path now exists
    what, args, exc, text = _bad_calls("cuda")[i]
    with pytest.raises(exc, match=_re(text)):
        k(*args)


@GPU
def test_gpu_cpu_tensor_is_refused():
    k = _add_kernel("cuda")
    a = torch.randn(5, 8, device="cuda")
    k(a, a)
    with pytest.raises(ValueError, match="'B': is on cpu, but this kernel runs on the GPU"):
        k(a, torch.randn(5, 8))


@GPU
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                    reason="needs two GPUs")
def test_gpu_tensors_on_two_devices_are_refused_and_outputs_follow_inputs():
    k = _add_kernel("cuda")
    a0 = torch.randn(5, 8, device="cuda:0")
    a1 = torch.randn(5, 8, device="cuda:1")
    with pytest.raises(ValueError, match="all tensors must be on one device"):
        k(a0, a1)
    out = k(a1, a1)
    assert out.device == a1.device
    torch.testing.assert_close(out, a1 + a1)


@GPU
def test_gpu_zero_size_and_views():
    k = _add_kernel("cuda")
    # n = 0 leaves the grid empty: the reference's error, as on the interpreter
    with pytest.raises(ValueError, match="grid extent 0 along x launches no blocks"):
        k(torch.empty(0, 8, device="cuda"), torch.empty(0, 8, device="cuda"))
    store = torch.full((9, 8), 1e30, device="cuda")
    a = store[2:7]
    a.copy_(torch.randn(5, 8))
    out = k(a, a)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a + a)
    assert (store[:2] == 1e30).all() and (store[7:] == 1e30).all()


@GPU
def test_gpu_size_beyond_int32_symbol_is_refused():
    k = tilelang.compile(_first_row_kernel(), out_idx=-1, target="cuda")
    huge = torch.arange(8.0, device="cuda").reshape(1, 8).expand(2 ** 31 + 5, 8)
    with pytest.raises((ValueError, TypeError), match="2147483653"):
        k(huge)


@GPU
def test_gpu_tensor_beyond_int32_offsets_is_refused_after_warm_up():
    n = T.dynamic("n")

    @T.prim_func
    def copy(A: T.Tensor((n, 8), "int8"), C: T.Tensor((n, 8), "int8")):
        with T.Kernel(T.ceildiv(n, 16), threads=128) as bx:
            for i, j in T.Parallel(16, 8):
                C[bx * 16 + i, j] = A[bx * 16 + i, j]
    k = tilelang.compile(copy, out_idx=-1, target="cuda")
    k(torch.zeros(32, 8, dtype=torch.int8, device="cuda"))
    big = torch.empty(2 ** 28 + 1, 8, dtype=torch.int8, device="cuda")
    try:
        with pytest.raises(ValueError, match="32-bit index"):
            k(big)
    finally:
        del big
        torch.cuda.empty_cache()


@GPU
def test_gpu_output_allocation_failure_raises_torchs_error():
    m = T.dynamic("m", "int64")

    @T.prim_func
    def outer(A: T.Tensor((m,), "float32"), C: T.Tensor((m, m), "float32")):
        with T.Kernel(1, threads=32):
            C[0, 0] = A[0]
    k = tilelang.compile(outer, out_idx=-1, target="cuda")
    with pytest.raises(torch.OutOfMemoryError):
        k(torch.zeros(2 ** 21, device="cuda"))
    out = k(torch.ones(4, device="cuda"))  # and the kernel still works afterwards
    assert out[0, 0].item() == 1.0


@GPU
def test_gpu_nan_and_inf_propagate():
    _check_nan_inf("cuda", "cuda")


_ = np
