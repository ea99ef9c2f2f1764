"""`T.assume(cond)`: the compiler relies on the condition (bounds guards it implies are
dropped), a condition on sizes and scalar arguments alone is checked at every call, and the
CPU interpreter checks the others where they are reached."""

import pytest
import torch

import tilelang
import tilelang.language as T
from device_params import DEVICES

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
