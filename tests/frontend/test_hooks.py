"""The run-time helpers of frontend/hooks.py called directly and through small kernels: value
classification, Python semantics when nothing is symbolic, expression statements (kept only
when they have side effects), and names given to kernel/loop variables."""

import pytest

import tilelang.language as T
from tilelang.frontend import hooks
from tilelang.frontend.builder import Builder
from tilelang.ir import nodes as ir
from tilelang.ir.visitor import collect


def test_value_classification():
    x = ir.Var("x")
    assert hooks.is_symbolic(x) and hooks.is_symbolic(x + 1)
    assert not hooks.is_symbolic(ir.const(3)) and not hooks.is_symbolic(3)
    assert hooks.is_symbolic(ir.Buffer("v", (1,), "int32", scope="local.var"))
    assert not hooks.is_symbolic(ir.Buffer("A", (4,), "int32"))
    assert hooks.concrete_truth(ir.const(0)) is False and hooks.concrete_truth([1]) is True
    assert hooks.concrete_truth(x > 0) is None


def test_helpers_follow_python_semantics_on_python_values():
    assert hooks.and_(0, lambda: 1 / 0) == 0  # short-circuit: the lambda is never called
    assert hooks.and_(2, lambda: "b", lambda: [3]) == [3]
    assert hooks.or_([], lambda: "", lambda: "z") == "z"
    assert hooks.or_("a", lambda: 1 / 0) == "a"
    assert hooks.not_(0) is True and hooks.not_("s") is False
    assert hooks.ifexp(1, lambda: "t", lambda: 1 / 0) == "t"
    assert hooks.ifexp(ir.const(False), lambda: 1 / 0, lambda: "f") == "f"
    assert hooks.aug("n", [1], "+", [2]) == [1, 2]
    assert hooks.aug("n", 6, "//", 4) == 1
    # outside a trace: range is Python's and other loops iterate normally
    assert hooks.range_(1, 7, 2) == range(1, 7, 2)
    assert list(hooks.loop(iter("ab"), ("c",))) == ["a", "b"]
    assert Builder.current(required=False) is None


def test_helpers_build_ir_on_symbolic_values():
    x = ir.Var("x")
    a = hooks.and_(x > 0, lambda: x < 5)
    assert isinstance(a, ir.Logical) and a.op == "and"
    o = hooks.or_(False, lambda: x > 0)
    assert isinstance(o, ir.Compare)  # the Python False side disappears
    assert isinstance(hooks.not_(x > 0), ir.Unary)
    s = hooks.ifexp(x > 0, lambda: x, lambda: 0)
    assert isinstance(s, ir.Select) and s.true_value is x


def test_expression_statements_keep_only_side_effects():
    @T.prim_func
    def f(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            A[0] + 1.0  # a pure expression statement: dropped  # noqa: B018
            T.call_extern("int32", "my_hook", A[1])  # side effect: kept
            "a docstring-like constant"  # noqa: B018

    evals = collect(f.body, lambda n: isinstance(n, ir.Evaluate))
    assert len(evals) == 1
    call = evals[0].value
    assert call.op == "call_extern" and call.args[0] == "my_hook"
    assert collect(f.body, lambda n: isinstance(n, ir.Binary)) == []


def test_kernel_and_loop_variables_take_the_users_names():
    @T.prim_func
    def f(A: T.Tensor((4, 4), T.float32)):
        with T.Kernel(2, 3, threads=1) as (row_block, col_block):
            for rr, cc in T.Parallel(2, 2):
                A[row_block * 2 + rr, cc] = col_block

    (kernel,) = collect(f.body, lambda n: isinstance(n, ir.Kernel))
    assert [v.name for v in kernel.block_vars] == ["row_block", "col_block"]
    loops = collect(f.body, lambda n: isinstance(n, ir.For))
    assert [lp.var.name for lp in loops] == ["rr", "cc"]
    assert "with T.Kernel(2, 3, threads=1) as (row_block, col_block):" in f.script()


def test_statements_carry_the_users_source_location():
    @T.prim_func
    def f(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                if A[i] > 0.0:
                    A[i] = 0.0

    (loop,) = collect(f.body, lambda n: isinstance(n, ir.For))
    (branch,) = collect(f.body, lambda n: isinstance(n, ir.If))
    (store,) = collect(f.body, lambda n: isinstance(n, ir.Store))
    assert loop.loc.filename == __file__
    assert branch.loc.lineno == loop.loc.lineno + 1 == store.loc.lineno - 1
    assert loop.loc.source_line.strip() == "for i in T.serial(4):"
    assert store.loc.source_line.strip() == "A[i] = 0.0"
    assert f.source == (__file__, loop.loc.lineno - 3)  # the decorator line


def test_aug_assign_on_undefined_name_outside_trace():
    with pytest.raises(NameError, match="'q' is not defined"):
        hooks.aug("q", hooks.UNSET, "+", 1)
