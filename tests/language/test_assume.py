"""`T.assume(cond)`: the compiler relies on the condition (bounds guards it implies are
dropped), a condition on sizes and scalar arguments alone is checked at every call, and the
CPU interpreter checks the others where they are reached."""

import pytest
import torch

import tilelang
import tilelang.language as T
from device_params import DEVICES, target_of

SM90 = "cuda -arch=sm_90a"


def _window(assume):
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), lo: T.int32, count: T.int32):
        with T.Kernel(1, threads=1):
            for i in T.serial(count):
                if assume:
                    T.assume(lo + i >= 0 and lo + i < N)
                A[lo + i] = A[lo + i] * 2.0
    return main


def _body(src):
    return src[src.index("__global__"):]


def test_assumed_bounds_drop_the_guards():
    guarded = _body(tilelang.lower(_window(False), target=SM90))
    trusted = _body(tilelang.lower(_window(True), target=SM90))
    assert "if (" in guarded and "?" in guarded
    assert "if (" not in trusted and "?" not in trusted


@pytest.mark.parametrize("device", DEVICES)
def test_assumed_program_computes_the_same(device):
    a = torch.randn(50)
    kernel = tilelang.compile(_window(True), target="cpu" if device == "cpu" else "cuda")
    x = a.clone().to(device)
    kernel(x, 10, 20)
    expect = a.clone()
    expect[10:30] *= 2
    torch.testing.assert_close(x.cpu(), expect)


def test_interpreter_reports_a_false_device_assumption():
    kernel = tilelang.compile(_window(True), target="cpu")
    with pytest.raises(ValueError, match="T.assume.*does not hold") as info:
        kernel(torch.randn(50), 40, 20)  # lo + i reaches 59 >= N
    assert "test_assume.py" in str(info.value)


def _host_checked(at_function_level):
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), k: T.int32):
        if at_function_level:
            T.assume(N % 4 == 0 and k > 0)
        with T.Kernel(1, threads=32):
            if not at_function_level:
                T.assume(N % 4 == 0 and k > 0)
            tx = T.get_thread_binding()
            if tx < N:
                A[tx] = k
    return main


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("at_function_level", [False, True])
def test_size_assumptions_are_checked_at_every_call(device, at_function_level):
    func = _host_checked(at_function_level)
    assert [str(c) for c in func.attrs["host_assumptions"]] == ["N % 4 == 0", "k > 0"]
    kernel = tilelang.compile(func, target="cpu" if device == "cpu" else "cuda")
    a = torch.zeros(8, device=device)
    kernel(a, 3)
    assert a.cpu().tolist() == [3.0] * 8
    for bad in ((torch.zeros(6, device=device), 3), (torch.zeros(8, device=device), 0)):
        for _ in range(2):  # the fast path of a second call too
            with pytest.raises(RuntimeError, match="Assume: (N % 4 == 0|k > 0)"):
                kernel(*bad)


def test_assume_in_a_loop_is_not_a_host_check():
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.serial(2):
                T.assume(N > 8)
                A[i] = 1.0
    assert "host_assumptions" not in main.attrs


def test_assume_of_python_values():
    with pytest.raises(ValueError, match="T.assume\\(False\\)"):
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1):
                T.assume(False)

    @T.prim_func
    def ok(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=1):
            T.assume(True)
            A[0] = 1.0
    a = torch.zeros(4)
    tilelang.compile(ok, target="cpu")(a)
    assert a[0] == 1.0


def _lanes(assume, aligned=True):
    """Each thread moves its 4 consecutive floats of row tx; `base + i < N` per lane (and
    rows of a multiple of 4 floats, so that 16-byte accesses are aligned)."""
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((32, N), "float32"), B: T.Tensor((32, N), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            if assume and aligned:
                T.assume(N % 4 == 0)
            for i in T.vectorized(4):
                if assume:
                    T.assume(tx * 4 + i < N)
                B[tx, tx * 4 + i] = A[tx, tx * 4 + i] + 1.0
    return main


def test_lane_assumptions_make_whole_vector_accesses():
    # compiled: the variant specialised on rows of a multiple of 16 bytes (the one the
    # assumption N % 4 == 0 selects at every call)
    guarded = _body(tilelang.compile(_lanes(False), target=SM90).get_kernel_source())
    trusted = _body(tilelang.compile(_lanes(True), target=SM90).get_kernel_source())
    assert "if (" in guarded
    assert "if (" not in trusted and "?" not in trusted
    # one 16-byte load and one 16-byte store per thread (float32: spelled as float4 copies)
    assert trusted.count("copy_vec<16>") + trusted.count("copy_vec<float4>") == 2
    # rows of any length: lane by lane, each lane still relying on its assumption
    unaligned = _body(tilelang.lower(_lanes(True, aligned=False), target=SM90))
    assert "copy_vec" not in unaligned and "if (" not in unaligned and "?" not in unaligned


@pytest.mark.parametrize("device", DEVICES)
def test_lane_assumptions_compute_the_same(device):
    n = 128  # every thread's 4 lanes are inside (tx * 4 + 3 < 128)
    a = torch.randn(32, n)
    kernel = tilelang.compile(_lanes(True), target=target_of(device))
    b = torch.full((32, n), float("nan"), device=device)
    kernel(a.to(device), b)
    rows = torch.arange(32)
    cols = rows[:, None] * 4 + torch.arange(4)
    torch.testing.assert_close(b.cpu()[rows[:, None], cols], a[rows[:, None], cols] + 1)


def test_interpreter_checks_every_hoisted_lane():
    kernel = tilelang.compile(_lanes(True, aligned=False), target="cpu")
    with pytest.raises(ValueError, match="T.assume.*does not hold"):
        kernel(torch.randn(32, 126), torch.zeros(32, 126))  # thread 31's lanes 2, 3


def _clamped_row():
    """`min(j + 64, tx + 2) < M` is `tx + 2 < M` for 32 threads and j >= 0: the row tx of B is
    inside B too."""
    M, N = T.dynamic("M"), T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            for j in T.serial(N):
                row = T.min(j + 64, tx + 2)
                T.assume(row >= 0 and row < M)
                B[tx, j] = A[row, j]
    return main


def test_assumed_bound_through_a_min_drops_the_guards():
    src = _body(tilelang.lower(_clamped_row(), target=SM90))
    assert "if (" not in src and "?" not in src


@pytest.mark.parametrize("device", DEVICES)
def test_assumed_bound_through_a_min_computes_the_same(device):
    a = torch.randn(40, 7)
    b = torch.full((40, 7), float("nan"))
    kernel = tilelang.compile(_clamped_row(), target=target_of(device))
    bd = b.to(device)
    kernel(a.to(device), bd)
    torch.testing.assert_close(bd.cpu()[:32], a[2:34])
