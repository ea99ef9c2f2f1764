"""`T.macro`: T.Ref write-through, several return values, macros as arguments, recursion
decided by Python values, nesting, and readable printed IR."""

import pytest
import torch

import tilelang
import tilelang.language as T


@T.macro
def inc(v: T.Ref, amount):
    v = v + amount


@T.macro
def inc_value(v, amount):
    v = v + amount  # plain parameter: rebinds locally only  # noqa: F841


@T.macro
def minmax(a, b):
    return T.min(a, b), T.max(a, b)


@T.macro
def twice(fn, x):
    return fn(fn(x))


@T.macro
def plus3(x):
    return x + 3


@T.macro
def power(x, n):
    # recursion decided by the Python int n: unrolled at trace time
    if n == 0:
        return 1.0
    return x * power(x, n - 1)


def test_ref_to_elements_and_vars_constant_and_variable_index():
    @T.prim_func
    def f(A: T.Tensor((4,), T.float32), I: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=1) as _:
            inc(A[1], 2.0)  # constant index
            idx = T.alloc_var(T.int32, 0)
            idx = I[0]
            inc(A[idx], 10.0)  # variable index, evaluated once at the call
            acc = T.alloc_var(T.float32, 1.0)
            inc(acc, 0.5)
            inc(acc, 0.25)
            A[3] = acc
            inc_value(A[0], 100.0)  # no effect on A[0]

    a = torch.zeros(4)
    tilelang.compile(f)(a, torch.tensor([2], dtype=torch.int32))
    assert a.tolist() == [0.0, 2.0, 10.0, 1.75]
    text = str(f)
    assert "A[1] = A[1] + 2.0" in text


def test_ref_needs_a_variable():
    with pytest.raises(ValueError) as e:
        @T.prim_func
        def f(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=1) as _:
                inc(3, 1.0)
    assert "T.Ref" in str(e.value)


def test_multiple_returns_macro_arguments_recursion_nesting():
    @tilelang.lazy_jit
    def k(A: T.Tensor[[T.dyn], T.float32], B: T.Tensor[[T.dyn], T.float32], fn, n: int):
        (N,) = A.shape
        Lo = T.empty((N,), T.float32)
        Hi = T.empty((N,), T.float32)
        P = T.empty((N,), T.float32)
        with T.Kernel(T.ceildiv(N, 32), threads=32) as bx:
            for i in T.Parallel(32):
                j = bx * 32 + i
                lo, hi = minmax(A[j], B[j])
                Lo[j] = twice(fn, lo)
                Hi[j] = hi
                P[j] = power(A[j], n)
        return Lo, Hi, P

    a, b = torch.randn(64), torch.randn(64)
    lo, hi, p = k(a, b, plus3, 3)
    torch.testing.assert_close(lo, torch.minimum(a, b) + 6)
    torch.testing.assert_close(hi, torch.maximum(a, b))
    torch.testing.assert_close(p, a * a * a)
    _, _, p2 = k(a, b, plus3, 2)
    torch.testing.assert_close(p2, a * a)
    assert k.trace_count == 2


def test_collatz_recursion_through_ref():
    @T.macro
    def n31(x, var: T.Ref):
        if x == 1:
            pass
        elif x % 2 == 0:
            var = var // 2
            n31(x // 2, var)
        else:
            var = var * 3 + 1
            n31(x * 3 + 1, var)

    @tilelang.lazy_jit
    def run(A: T.Tensor[[2], T.int32], n: int):
        with T.Kernel(1) as _:
            n31(n, A[0])
            cnt = T.alloc_var(T.int32, 0)
            n31(n, cnt)
            A[1] = cnt

    for n, start in ((5, 100), (6, 7), (7, 1000)):
        a = torch.tensor([start, 0], dtype=torch.int32)
        run(a, n)
        # reference: the same sequence of updates in Python (floor division)
        v, c, x = start, 0, n
        while x != 1:
            if x % 2 == 0:
                v, c, x = v // 2, c // 2, x // 2
            else:
                v, c, x = v * 3 + 1, c * 3 + 1, x * 3 + 1
        assert a.tolist() == [v, c]
        if (n, start) == (5, 100):
            assert v == 18  # the seed notebook's value


def test_printed_ir_of_macros_is_readable():
    @T.prim_func
    def foo():
        with T.Kernel(32) as x:
            s, c = minmax(x, 5)
            a = s + c  # noqa: F841

    text = str(foo)
    body = [ln.strip() for ln in text.splitlines() if ln.startswith("        ")]
    assert body == ["s: T.int32 = T.min(x, 5)", "c: T.int32 = T.max(x, 5)",
                    "a: T.int32 = s + c"]
