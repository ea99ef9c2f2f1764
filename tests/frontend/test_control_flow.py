"""Python control flow vs kernel control flow (frontend/rewrite.py + frontend/hooks.py).

A construct on a Python value is decided while tracing (only the taken branch, unrolled loops);
the same construct on a kernel value builds IR (If, For, While, Logical, Select). Each test
checks the traced IR and, where it matters, runs the kernel on the CPU interpreter."""

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError, KernelNotSupportedError
from tilelang.ir import nodes as ir
from tilelang.ir.visitor import collect


def nodes_of(func, cls):
    return collect(func.body, lambda n: isinstance(n, cls))


def cpu(func):
    return tilelang.compile(func, target="cpu")


def rand(n, seed, dtype=torch.float32):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(n).astype(np.float32)
                            ).to(dtype)


# ---- if ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", [True, False])
def test_if_on_python_value_keeps_only_the_taken_branch(flag):
    @T.prim_func
    def f(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            if flag:
                A[0] = 1.0
            else:
                A[0] = 2.0

    assert nodes_of(f, ir.If) == []
    stores = nodes_of(f, ir.Store)
    assert len(stores) == 1
    assert stores[0].value.value == (1.0 if flag else 2.0)
    a = torch.zeros(4)
    cpu(f)(a)
    assert a[0].item() == (1.0 if flag else 2.0)


def test_if_on_python_expression_of_closure_values_and_elif_chain():
    def make(mode):
        @T.prim_func
        def f(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=1):
                if mode == "a":
                    A[0] = 1.0
                elif mode == "b" and len(A.shape) == 1:
                    A[0] = 2.0
                else:
                    A[0] = 3.0
        return f

    for mode, want in (("a", 1.0), ("b", 2.0), ("c", 3.0)):
        f = make(mode)
        assert nodes_of(f, ir.If) == []
        (store,) = nodes_of(f, ir.Store)
        assert store.value.value == want


def test_if_on_kernel_value_becomes_ir_if_with_both_branches():
    @T.prim_func
    def f(A: T.Tensor((16,), T.float32), B: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(16):
                if A[i] > 0.5:
                    B[i] = 1.0
                elif A[i] < -0.5:
                    B[i] = -1.0
                else:
                    B[i] = 0.0

    ifs = nodes_of(f, ir.If)
    assert len(ifs) == 2  # elif nests an If in the else branch
    outer, inner = ifs
    assert isinstance(outer.cond, ir.Compare) and outer.cond.op == "gt"
    assert outer.else_body is inner and inner.else_body is not None
    a, b = rand(16, 1), torch.full((16,), 7.0)
    cpu(f)(a, b)
    want = np.where(a.numpy() > 0.5, 1.0, np.where(a.numpy() < -0.5, -1.0, 0.0))
    np.testing.assert_array_equal(b.numpy(), want)


def test_if_on_non_bool_kernel_value_compares_with_zero():
    @T.prim_func
    def f(A: T.Tensor((8,), T.int32), B: T.Tensor((8,), T.int32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(8):
                B[i] = 0
                if A[i]:
                    B[i] = 1

    (node,) = nodes_of(f, ir.If)
    assert isinstance(node.cond, ir.Compare) and node.cond.op == "ne"
    assert node.cond.b.value == 0 and node.else_body is None
    a = torch.tensor([0, 3, 0, -1, 5, 0, 0, 2], dtype=torch.int32)
    b = torch.full((8,), 9, dtype=torch.int32)
    cpu(f)(a, b)
    assert b.tolist() == [0, 1, 0, 1, 1, 0, 0, 1]


def test_if_on_constant_kernel_expression_is_decided_at_trace_time():
    # ir.Const is concrete: `if T.int32(0)` takes the else branch without an IR If
    @T.prim_func
    def f(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            if T.int32(0):
                A[0] = 1.0
            else:
                A[1] = 2.0

    assert nodes_of(f, ir.If) == []
    (store,) = nodes_of(f, ir.Store)
    assert store.indices[0].value == 1


# ---- for --------------------------------------------------------------------------------------


def test_range_with_python_ints_is_a_serial_kernel_loop_not_unrolled():
    @T.prim_func
    def f(A: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in range(8):
                A[i] = A[i] * 2.0

    (loop,) = nodes_of(f, ir.For)
    assert loop.kind == "serial" and loop.extent.value == 8 and loop.var.name == "i"
    assert len(nodes_of(f, ir.Store)) == 1  # traced once


def test_range_with_negative_step_and_serial_with_start_step():
    @T.prim_func
    def f(A: T.Tensor((10,), T.float32), B: T.Tensor((10,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in range(9, 0, -3):  # 9, 6, 3
                A[i] = 1.0
            for j in T.serial(1, 10, 4):  # 1, 5, 9
                B[j] = 2.0

    loops = nodes_of(f, ir.For)
    assert [(lp.start.value, lp.extent.value, lp.step) for lp in loops] == [(9, 3, -3),
                                                                            (1, 3, 4)]
    a, b = torch.zeros(10), torch.zeros(10)
    cpu(f)(a, b)
    assert np.nonzero(a.numpy())[0].tolist() == [3, 6, 9]
    assert np.nonzero(b.numpy())[0].tolist() == [1, 5, 9]


def test_parallel_and_serial_loop_kinds_and_names():
    @T.prim_func
    def f(A: T.Tensor((4, 8), T.float32)):
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(4, 8):
                A[i, j] = 1.0
            for _ in T.serial(2):
                A[0, 0] = A[0, 0] + 1.0
            for u in T.unroll(2):
                A[1, u] = 5.0

    loops = nodes_of(f, ir.For)
    assert [(lp.kind, lp.var.name) for lp in loops] == [
        ("parallel", "i"), ("parallel", "j"), ("serial", "i"), ("unroll", "u")]
    a = torch.zeros(4, 8)
    cpu(f)(a)
    want = np.ones((4, 8), np.float32)
    want[0, 0] = 3.0
    want[1, :2] = 5.0
    np.testing.assert_array_equal(a.numpy(), want)


def test_python_loops_over_lists_unroll():
    offsets = [0, 3, 5]

    @T.prim_func
    def f(A: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=1):
            for k, off in enumerate(offsets):
                A[off] = k + 1.0
            for name in ("x", "y"):
                if name == "y":
                    A[7] = 9.0

    assert nodes_of(f, ir.For) == [] and nodes_of(f, ir.If) == []
    assert len(nodes_of(f, ir.Store)) == 4
    a = torch.zeros(8)
    cpu(f)(a)
    assert a.tolist() == [1.0, 0, 0, 2.0, 0, 3.0, 0, 9.0]


def test_python_break_and_continue_in_unrolled_loop():
    @T.prim_func
    def f(A: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=1):
            for k in [0, 1, 2, 3, 4, 5]:
                if k == 1:
                    continue
                if k == 4:
                    break
                A[k] = 1.0

    assert nodes_of(f, ir.Break) == [] and nodes_of(f, ir.Continue) == []
    assert sorted(s.indices[0].value for s in nodes_of(f, ir.Store)) == [0, 2, 3]


def test_kernel_break_and_continue_in_serial_loop():
    @T.prim_func
    def f(A: T.Tensor((16,), T.float32), B: T.Tensor((2,), T.float32)):
        with T.Kernel(1, threads=1):
            acc = T.alloc_var(T.float32, 0.0)
            for i in T.serial(16):
                if A[i] < 0.0:
                    continue
                if A[i] > 1.5:
                    break
                acc += A[i]
            B[0] = acc

    assert len(nodes_of(f, ir.Break)) == 1 and len(nodes_of(f, ir.Continue)) == 1
    a = rand(16, 7)
    b = torch.zeros(2)
    cpu(f)(a, b)
    want = 0.0
    for v in a.tolist():
        if v < 0:
            continue
        if v > 1.5:
            break
        want += v
    assert b[0].item() == pytest.approx(want, rel=1e-6)


def test_break_inside_python_loop_nested_in_kernel_loop_is_python_level():
    # the innermost loop decides: a break in an unrolled list loop is a trace-time break
    @T.prim_func
    def f(A: T.Tensor((4, 4), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                for k in [0, 1, 2, 3]:
                    if k == 2:
                        break
                    A[i, k] = 1.0

    assert nodes_of(f, ir.Break) == []
    assert len(nodes_of(f, ir.Store)) == 2


@pytest.mark.parametrize("stmt", ["break", "continue"])
def test_python_loop_exit_under_kernel_condition_is_rejected(stmt):
    # Regression: this used to take the Python break/continue unconditionally at trace time,
    # silently dropping the rest of the loop body (the store below vanished from the IR).
    src_break = stmt == "break"
    with pytest.raises(KernelNotSupportedError) as e:
        @T.prim_func
        def f(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=1):
                for i in T.serial(4):
                    for k in [0, 1, 2]:
                        if A[i] > k:  # <- rejected here
                            if src_break:
                                break
                            else:
                                continue
                        A[i] = A[i] + 1.0
    msg = str(e.value)
    assert "break" in msg and "kernel value" in msg
    assert e.value.loc.filename == __file__
    assert "# <- rejected here" in e.value.loc.source_line


def test_return_under_kernel_condition_in_macro_is_rejected():
    @T.macro
    def pick(x):
        if x > 0.0:
            return x
        return -x

    with pytest.raises(KernelNotSupportedError) as e:
        @T.prim_func
        def f(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=1):
                A[0] = pick(A[1])
    assert "`return` inside a branch on a kernel value" in str(e.value)
    assert e.value.loc.source_line.strip() == "return x"


def test_early_python_return_under_python_condition_still_works():
    @T.macro
    def pick(x, negate):
        if negate:
            return -x
        return x

    @T.prim_func
    def f(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            A[0] = pick(A[1], True)
            A[2] = pick(A[3], False)

    a = torch.tensor([0.0, 2.0, 0.0, 5.0])
    cpu(f)(a)
    assert a.tolist() == [-2.0, 2.0, 5.0, 5.0]


# ---- while ------------------------------------------------------------------------------------


def test_while_on_kernel_value_is_an_ir_while():
    @T.prim_func
    def f(A: T.Tensor((1,), T.int32), n: T.int32):
        with T.Kernel(1, threads=1):
            c = T.alloc_var(T.int32, 1)
            steps = T.alloc_var(T.int32, 0)
            while c < n:
                c = c * 2
                steps += 1
            A[0] = steps

    (w,) = nodes_of(f, ir.While)
    assert isinstance(w.cond, ir.Compare) and w.cond.op == "lt"
    k = cpu(f)
    for n, want in ((1, 0), (2, 1), (100, 7), (1024, 10)):
        a = torch.full((1,), -5, dtype=torch.int32)
        k(a, n)
        assert a.item() == want


def test_while_on_python_value_unrolls():
    @T.prim_func
    def f(A: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=1):
            k = 1
            while k < 8:
                A[k] = 1.0
                k *= 2

    assert nodes_of(f, ir.While) == []
    assert sorted(s.indices[0].value for s in nodes_of(f, ir.Store)) == [1, 2, 4]


def test_while_python_true_with_python_break():
    @T.prim_func
    def f(A: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=1):
            k = 0
            while True:
                A[k] = 3.0
                k += 1
                if k == 3:
                    break

    assert nodes_of(f, ir.While) == [] and len(nodes_of(f, ir.Store)) == 3


def test_kernel_break_in_while():
    @T.prim_func
    def f(A: T.Tensor((16,), T.float32), B: T.Tensor((1,), T.int32)):
        with T.Kernel(1, threads=1):
            i = T.alloc_var(T.int32, 0)
            while i < 16:
                if A[i] > 1.0:
                    break
                i += 1
            B[0] = i

    assert len(nodes_of(f, ir.Break)) == 1
    a = rand(16, 3)
    b = torch.zeros(1, dtype=torch.int32)
    cpu(f)(a, b)
    hits = np.nonzero(a.numpy() > 1.0)[0]
    assert b.item() == (hits[0] if len(hits) else 16)


def test_while_condition_turning_symbolic_is_an_error():
    with pytest.raises(KernelError, match="changed from a Python value to a kernel value"):
        @T.prim_func
        def f(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=1):
                c = 0
                while c < 2:
                    c = A[0]


# ---- boolean operators, chained comparisons, conditional expressions ---------------------------


def test_and_or_not_on_kernel_values_become_logical_ops():
    @T.prim_func
    def f(A: T.Tensor((32,), T.float32), B: T.Tensor((32,), T.float32), n: T.int32):
        with T.Kernel(1, threads=1):
            for i in T.serial(32):
                B[i] = 0.0
                if (A[i] > 0.0 and i < n) or not (A[i] > -1.0):
                    B[i] = 1.0

    (node,) = nodes_of(f, ir.If)
    c = node.cond
    assert isinstance(c, ir.Logical) and c.op == "or"
    assert isinstance(c.a, ir.Logical) and c.a.op == "and"
    assert isinstance(c.b, ir.Unary) and c.b.op == "not"
    a, b = rand(32, 11), torch.full((32,), 5.0)
    cpu(f)(a, b, 20)
    an = a.numpy()
    want = ((an > 0) & (np.arange(32) < 20)) | ~(an > -1)
    np.testing.assert_array_equal(b.numpy(), want.astype(np.float32))


def test_bool_ops_on_python_values_short_circuit_at_trace_time():
    calls = []

    def probe(v):
        calls.append(v)
        return v

    @T.prim_func
    def f(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            x = probe(0) and probe(1)  # 0: the right side is never evaluated
            y = probe(2) or probe(3)  # 2: likewise
            z = not probe([])
            A[0] = x + y + z

    assert calls == [0, 2, []]
    (store,) = nodes_of(f, ir.Store)
    assert store.value.value == 3.0


def test_mixed_python_and_kernel_operands_fold_the_python_side():
    @T.prim_func
    def f(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                if True and A[i] > 0.0:  # just the comparison
                    A[i] = 1.0
                if False or A[i] < 0.0:  # just the comparison
                    A[i] = 2.0
                if False and A[i] > 0.0:  # dropped: never evaluated
                    A[i] = 3.0
                if A[i] > 0.0 and False:  # folds to False
                    A[i] = 4.0

    ifs = nodes_of(f, ir.If)
    assert [type(x.cond).__name__ for x in ifs] == ["Compare", "Compare"]
    assert sorted(s.value.value for s in nodes_of(f, ir.Store)) == [1.0, 2.0]


def test_chained_comparison_on_kernel_values_is_a_conjunction():
    @T.prim_func
    def f(A: T.Tensor((16,), T.float32), lo: T.int32, hi: T.int32):
        with T.Kernel(1, threads=1):
            for i in T.serial(16):
                if lo <= i < hi:
                    A[i] = 1.0

    (node,) = nodes_of(f, ir.If)
    assert isinstance(node.cond, ir.Logical) and node.cond.op == "and"
    assert (node.cond.a.op, node.cond.b.op) == ("le", "lt")
    a = torch.zeros(16)
    cpu(f)(a, 3, 9)
    assert np.nonzero(a.numpy())[0].tolist() == list(range(3, 9))


def test_conditional_expression_kernel_vs_python():
    big = True

    @T.prim_func
    def f(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(8):
                B[i] = (A[i] if A[i] > 0.0 else -A[i]) + (100.0 if big else 0.0)

    sels = nodes_of(f, ir.Select)
    assert len(sels) == 1
    a, b = rand(8, 5), torch.zeros(8)
    cpu(f)(a, b)
    np.testing.assert_allclose(b.numpy(), np.abs(a.numpy()) + 100.0, rtol=1e-6)


# ---- assert -----------------------------------------------------------------------------------


def test_assert_on_python_value_is_checked_at_trace_time():
    @T.prim_func
    def ok(A: T.Tensor((4,), T.float32)):
        assert A.shape[0] == 4, "shape"
        with T.Kernel(1, threads=1):
            A[0] = 1.0

    assert collect(ok.body, lambda n: isinstance(n, ir.Assert)) == []
    with pytest.raises(AssertionError, match="need 8 elements"):
        @T.prim_func
        def bad(A: T.Tensor((4,), T.float32)):
            assert A.shape[0] == 8, "need 8 elements"


def test_assert_on_kernel_value_becomes_device_assert():
    @T.prim_func
    def f(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            assert A[0] > 0.0, "A[0] must be positive"

    (node,) = nodes_of(f, ir.Assert)
    assert node.message == "A[0] must be positive" and isinstance(node.cond, ir.Compare)
