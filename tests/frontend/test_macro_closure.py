"""`@T.macro` inlining and `@T.prim_func` closures over Python values (frontend/rewrite.py
re-creates the closure from the cells' current contents when the function is traced)."""

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.ir.visitor import collect


def nodes_of(func, cls):
    return collect(func.body, lambda n: isinstance(n, cls))


def cpu(func):
    return tilelang.compile(func, target="cpu")


@T.macro
def axpy_into(dst, a, x, y):
    for i in T.Parallel(dst.shape[0]):
        dst[i] = a * x[i] + y[i]


@T.macro
def clamp(v, lo, hi):
    return T.min(T.max(v, lo), hi)


def test_macro_is_inlined_at_every_call():
    @T.prim_func
    def f(X: T.Tensor((16,), T.float32), Y: T.Tensor((16,), T.float32),
          Z: T.Tensor((16,), T.float32), W: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=16):
            axpy_into(Z, 2.0, X, Y)
            axpy_into(W, -1.0, Z, X)

    loops = nodes_of(f, ir.For)
    assert [lp.kind for lp in loops] == ["parallel", "parallel"]
    assert [s.buffer.name for s in nodes_of(f, ir.Store)] == ["Z", "W"]
    assert not any(isinstance(n, ir.Call) for n in collect(f.body, lambda n: True))
    rng = np.random.default_rng(1)
    x, y = (torch.from_numpy(rng.standard_normal(16).astype(np.float32)) for _ in range(2))
    z, w = torch.zeros(16), torch.zeros(16)
    cpu(f)(x, y, z, w)
    np.testing.assert_allclose(z.numpy(), 2 * x.numpy() + y.numpy(), rtol=1e-6)
    np.testing.assert_allclose(w.numpy(), -z.numpy() + x.numpy(), rtol=1e-6)


def test_macro_returning_an_expression():
    @T.prim_func
    def f(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                B[i] = clamp(A[i], -0.5, 0.5)

    (store,) = nodes_of(f, ir.Store)
    assert isinstance(store.value, ir.Binary) and store.value.op == "min"
    a = torch.linspace(-2, 2, 8)
    b = torch.zeros(8)
    cpu(f)(a, b)
    np.testing.assert_allclose(b.numpy(), np.clip(a.numpy(), -0.5, 0.5))


def test_macro_python_arguments_specialise_the_body():
    @T.macro
    def scale(dst, src, factor, relu):
        for i in T.Parallel(8):
            if relu:
                dst[i] = T.max(src[i] * factor, 0.0)
            else:
                dst[i] = src[i] * factor

    @T.prim_func
    def f(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float32),
          C: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=8):
            scale(B, A, 3, True)
            scale(C, A, 0.5, False)

    assert nodes_of(f, ir.If) == []
    text = f.script()
    assert "B[i] = T.max(A[i] * 3.0, 0.0)" in text and "C[i_1] = A[i_1] * 0.5" in text
    a = torch.linspace(-1, 1, 8)
    b, c = torch.zeros(8), torch.zeros(8)
    cpu(f)(a, b, c)
    np.testing.assert_allclose(b.numpy(), np.maximum(3 * a.numpy(), 0), rtol=1e-6)
    np.testing.assert_allclose(c.numpy(), 0.5 * a.numpy(), rtol=1e-6)


def test_macro_let_bindings_and_kernel_if_inside_macro():
    @T.macro
    def sign_sq(dst, src, i):
        v = src[i] * src[i]
        if src[i] < 0.0:
            dst[i] = -v
        else:
            dst[i] = v

    @T.prim_func
    def f(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(8):
                sign_sq(B, A, i)

    assert len(nodes_of(f, ir.LetStmt)) == 1 and len(nodes_of(f, ir.If)) == 1
    a = torch.linspace(-2, 2, 8)
    b = torch.zeros(8)
    cpu(f)(a, b)
    np.testing.assert_allclose(b.numpy(), np.sign(a.numpy()) * a.numpy() ** 2, rtol=1e-6)


@T.macro
def bump(v, amount):
    v = v + amount  # noqa: F841 - a plain parameter: local rebinding only


@T.macro
def bump_ref(v: T.Ref, amount):
    v = v + amount  # noqa: F841 - stores through the reference


def test_macro_ref_parameter_writes_through_plain_parameter_on_element_does_not():
    @T.prim_func
    def f(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            bump(A[0], 10.0)
            bump_ref(A[1], 10.0)
            acc = T.alloc_var(T.float32, 1.0)
            bump_ref(acc, 0.5)
            A[2] = acc

    a = torch.ones(4)
    cpu(f)(a)
    assert a.tolist() == [1.0, 11.0, 1.5, 1.0]


def test_macro_plain_parameter_rebinding_leaves_callers_alloc_var_unchanged():
    @T.prim_func
    def f(A: T.Tensor((2,), T.float32)):
        with T.Kernel(1, threads=1):
            acc = T.alloc_var(T.float32, 1.0)
            bump(acc, 10.0)
            A[0] = acc

    a = torch.zeros(2)
    cpu(f)(a)
    assert a[0].item() == 1.0


def test_closure_over_python_values_specialises_each_kernel():
    def make(n, scale, bias):
        @T.prim_func
        def f(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(n):
                    B[i] = A[i] * scale + bias
        return f

    f1, f2 = make(8, 2.0, 1.0), make(16, -1.0, 0.0)
    assert f1.params[0].shape == (8,) and f2.params[0].shape == (16,)
    assert "B[i] = A[i] * 2.0 + 1.0" in f1.script()
    assert "B[i] = -A[i]" in f2.script() or "B[i] = A[i] * -1.0" in f2.script()
    a = torch.arange(8, dtype=torch.float32)
    b = torch.zeros(8)
    cpu(f1)(a, b)
    assert b.tolist() == (2 * a + 1).tolist()


def test_closure_reads_cell_contents_at_trace_time():
    # a closure variable rebound after the def but before tracing is seen with its new value
    def make():
        value = 1.0

        def body(A: T.Tensor((1,), T.float32)):
            with T.Kernel(1, threads=1):
                A[0] = value

        value = 42.0
        return T.prim_func(body)

    (store,) = nodes_of(make(), ir.Store)
    assert store.value.value == 42.0


def test_closure_over_unbound_cell_is_a_name_error():
    def make():
        @T.prim_func
        def f(A: T.Tensor((1,), T.float32)):
            with T.Kernel(1, threads=1):
                A[0] = later
        later = 1.0  # noqa: F841 - bound after the trace
        return f

    with pytest.raises(NameError, match="free variable 'later'.*not bound yet"):
        make()


def test_closure_over_helper_functions_and_global_constants():
    def helper(x):  # a plain Python function called on kernel values
        return x * 2.0 + 1.0

    @T.prim_func
    def f(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(_GLOBAL_N):
                B[i] = helper(A[i])

    (loop,) = nodes_of(f, ir.For)
    assert loop.extent.value == _GLOBAL_N
    a, b = torch.arange(8, dtype=torch.float32), torch.zeros(8)
    cpu(f)(a, b)
    assert b.tolist() == (a * 2 + 1).tolist()


_GLOBAL_N = 8


def test_recursive_macro_unrolls_on_python_values():
    @T.macro
    def tree_sum(src, lo, hi):
        if hi - lo == 1:
            return src[lo]
        mid = (lo + hi) // 2
        return tree_sum(src, lo, mid) + tree_sum(src, mid, hi)

    @T.prim_func
    def f(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=1):
            B[0] = tree_sum(A, 0, 8)

    assert nodes_of(f, ir.If) == [] and nodes_of(f, ir.For) == []
    assert len(collect(f.body, lambda n: isinstance(n, ir.Load))) == 8
    a = torch.arange(8, dtype=torch.float32)
    b = torch.zeros(1)
    cpu(f)(a, b)
    assert b.item() == 28.0
