"""Assignments in kernel bodies (frontend/hooks.py bind/aug/unpack/bind_annotated).

`x = <kernel expression>` is an immutable let binding computed once at that point; names bound
to Python values, loop/block variables or constants stay plain Python; re-assignment makes a new
binding; `T.alloc_var` names and `T.Ref`s are stored to; `A[i] += v` is a read-modify-write."""

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError
from tilelang.frontend import hooks
from tilelang.frontend.builder import Builder
from tilelang.ir import nodes as ir
from tilelang.ir.visitor import collect


def nodes_of(func, cls):
    return collect(func.body, lambda n: isinstance(n, cls))


def cpu(func):
    return tilelang.compile(func, target="cpu")


def test_name_bound_to_kernel_expression_is_a_let():
    @T.prim_func
    def f(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(8):
                x = A[i] * 2
                B[i] = x + x

    (let,) = nodes_of(f, ir.LetStmt)
    assert let.var.name == "x" and let.var.dtype == "float32"
    assert isinstance(let.value, ir.Binary) and let.value.op == "mul"
    (store,) = collect(let.body, lambda n: isinstance(n, ir.Store))
    # the store reads the let variable twice, A only through the let
    assert store.value.a is let.var and store.value.b is let.var
    assert "x: T.float32 = A[i] * 2.0" in f.script()
    a, b = torch.arange(8, dtype=torch.float32), torch.zeros(8)
    cpu(f)(a, b)
    assert b.tolist() == (4 * a).tolist()


def test_let_is_a_snapshot_taken_where_it_is_bound():
    @T.prim_func
    def f(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            x = A[0]
            A[0] = 5.0
            A[1] = x

    a = torch.tensor([3.0, 0.0, 0.0, 0.0])
    cpu(f)(a)
    assert a.tolist() == [5.0, 3.0, 0.0, 0.0]


def test_names_that_stay_python_values():
    @T.prim_func
    def f(A: T.Tensor((8,), T.float32)):
        with T.Kernel(2, threads=1) as bx:
            b = bx  # a Var: no let
            c = 3  # a Python int
            d = T.float32(1.5)  # a constant
            e = c * 2 + 1  # still Python
            A[b * 4 + e - 7] = d

    assert nodes_of(f, ir.LetStmt) == []
    (store,) = nodes_of(f, ir.Store)
    assert store.value.value == 1.5
    a = torch.zeros(8)
    cpu(f)(a)
    assert a.tolist() == [1.5, 0, 0, 0, 1.5, 0, 0, 0]


def test_host_level_index_arithmetic_is_inlined_not_let_bound():
    @T.prim_func
    def f(A: T.Tensor((16,), T.float32), n: T.int32):
        m = n * 2
        with T.Kernel(1, threads=1):
            for i in T.serial(m):
                A[i] = 1.0

    assert nodes_of(f, ir.LetStmt) == []
    (loop,) = nodes_of(f, ir.For)
    assert isinstance(loop.extent, ir.Binary) and loop.extent.a.name == "n"
    a = torch.zeros(16)
    cpu(f)(a, 3)
    assert a.sum().item() == 6


def test_reassignment_at_the_same_level_makes_a_new_binding():
    @T.prim_func
    def f(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            x = A[0] + 1.0
            x = x * 3.0
            x += 1.0
            A[1] = x

    lets = nodes_of(f, ir.LetStmt)
    assert [lt.var.name for lt in lets] == ["x", "x", "x"]
    assert len({id(lt.var) for lt in lets}) == 3
    text = f.script()
    assert "x_1: T.float32 = x * 3.0" in text and "x_2: T.float32 = x_1 + 1.0" in text
    a = torch.tensor([2.0, 0.0, 0.0, 0.0])
    cpu(f)(a)
    assert a[1].item() == 10.0


def test_reassignment_inside_kernel_loop_is_local_to_the_iteration():
    @T.prim_func
    def f(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.serial(8):
                x = A[i]
                x = x * x
                B[i] = x

    a, b = torch.arange(8, dtype=torch.float32), torch.zeros(8)
    cpu(f)(a, b)
    assert b.tolist() == (a * a).tolist()


def test_let_rebound_in_loop_and_read_after_it_is_a_located_error():
    with pytest.raises(KernelError) as e:
        @T.prim_func
        def f(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=1):
                x = A[0]
                for i in T.serial(4):
                    x = x + A[i]
                A[1] = x  # <- read after the loop
    assert "Immutable variable `x`" in str(e.value) and "T.alloc_var" in str(e.value)
    assert e.value.loc.filename == __file__
    assert "# <- read after the loop" in e.value.loc.source_line


def test_alloc_var_reassignment_in_loop_is_a_store():
    @T.prim_func
    def f(A: T.Tensor((16,), T.float32), B: T.Tensor((2,), T.float32)):
        with T.Kernel(1, threads=1):
            acc = T.alloc_var(T.float32, 0.0)
            best = T.alloc_var(T.float32, -1e30)
            for i in T.serial(16):
                acc += A[i]
                if A[i] > best:
                    best = A[i]
            B[0] = acc
            B[1] = best

    assert nodes_of(f, ir.LetStmt) == []
    stores = [s for s in nodes_of(f, ir.Store) if s.buffer.scope == "local.var"]
    assert len(stores) == 2
    a = torch.from_numpy(np.random.default_rng(0).standard_normal(16).astype(np.float32))
    b = torch.zeros(2)
    cpu(f)(a, b)
    assert b[0].item() == pytest.approx(a.sum().item(), rel=1e-5)
    assert b[1].item() == a.max().item()


def test_augmented_assignment_on_buffer_elements():
    @T.prim_func
    def f(C: T.Tensor((4, 4), T.int32), D: T.Tensor((4,), T.float16)):
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                C[i, i] += 1
                C[i, 0] *= 3
                C[0, i] -= i
                D[i] += 0.5

    stores = nodes_of(f, ir.Store)
    assert len(stores) == 4
    first = stores[0]
    assert isinstance(first.value, ir.Binary) and first.value.op == "add"
    assert isinstance(first.value.a, ir.Load) and first.value.a.buffer is first.buffer
    # float16 element + float32 literal computes in float32 and casts back on the store
    assert stores[3].value.dtype == "float16"
    c = torch.arange(16, dtype=torch.int32).reshape(4, 4)
    d = torch.zeros(4, dtype=torch.float16)
    want = c.clone()
    for i in range(4):
        want[i, i] += 1
        want[i, 0] *= 3
        want[0, i] -= i
    cpu(f)(c, d)
    assert c.tolist() == want.tolist()
    assert d.tolist() == [0.5] * 4


def test_augmented_assignment_on_python_values_is_python_in_place():
    seen = []

    @T.prim_func
    def f(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            acc = []
            for k in [1, 2]:
                acc += [k]
            seen.append(acc)
            n = 1
            n <<= 2
            A[0] = n

    assert seen == [[1, 2]]
    (store,) = nodes_of(f, ir.Store)
    assert store.value.value == 4.0


def test_augmented_assignment_of_undefined_name_is_a_name_error():
    with pytest.raises(NameError, match="'zz' is not defined"):
        @T.prim_func
        def f(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=1):
                zz += 1  # noqa: F821


def test_tuple_assignment_swaps_kernel_values():
    @T.prim_func
    def f(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=1):
            a, b = A[0], A[1]
            a, b = b, a
            A[2], A[3] = A[3], A[2]
            A[0] = a
            A[1] = b

    a = torch.tensor([1.0, 2.0, 3.0, 4.0])
    cpu(f)(a)
    assert a.tolist() == [2.0, 1.0, 4.0, 3.0]


def test_tuple_assignment_count_mismatch():
    with pytest.raises(ValueError, match="cannot unpack 3 values into 2 targets"):
        @T.prim_func
        def f(A: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=1):
                a, b = A[0], A[1], A[2]  # noqa: F841


def test_annotated_assignment_casts_to_the_annotation():
    @T.prim_func
    def f(A: T.Tensor((4,), T.float32), I: T.Tensor((4,), T.int32)):
        with T.Kernel(1, threads=1):
            w: T.int32 = 2.7  # a constant, truncated
            x: T.int32 = A[0]  # a let of a cast
            I[0] = w
            I[1] = x

    (let,) = nodes_of(f, ir.LetStmt)
    assert let.var.dtype == "int32" and isinstance(let.value, ir.Cast)
    a = torch.tensor([-3.9, 0, 0, 0])
    i = torch.zeros(4, dtype=torch.int32)
    cpu(f)(a, i)
    assert i.tolist()[:2] == [2, -3]


def test_bind_outside_a_trace_is_plain_python():
    value = ir.Var("v") + 1
    assert hooks.bind("x", value) is value
    assert Builder.current(required=False) is None


def test_unnamed_allocation_takes_the_assigned_name():
    @T.prim_func
    def f(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            tile = T.alloc_shared((64,), T.float32)
            T.copy(A, tile)
            T.copy(tile, A)

    (kernel,) = nodes_of(f, ir.Kernel)
    assert [b.name for b in kernel.allocs] == ["tile"]
    assert "tile = T.alloc_shared((64,), \"float32\")" in f.script()
