"""check_semantics (run when @T.prim_func finishes tracing): the programs the reference
rejects before lowering raise a KernelError located at the user's offending line; the
neighbouring legal programs are accepted.

Covered elsewhere: a local buffer indexed by a T.Parallel variable and a fragment in a
symbolic-extent T.Parallel (tests/reliability/test_rejections.py, with file:line checks), a
let rebound in a loop and read after it (tests/frontend/test_assignment.py), fragments
indexed outside T.Parallel and by serial variables (tests/transform/test_fragment_access.py).
Here: the remaining rules and the accepted cases."""

import inspect

import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError

from transform_helpers import SM80


def _marked(fn):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if "# <-" in line)


def _rejected(builder, *words):
    with pytest.raises(KernelError) as info:
        builder()
    err = info.value
    text = str(err)
    for w in words:
        assert w in text, text
    assert err.loc is not None and err.loc.filename == __file__, text
    assert err.loc.lineno == _marked(builder), text
    assert err.loc.source_line.strip() in text  # the message shows the user's line
    return err


# ---- rejections -------------------------------------------------------------------------------


def let_bound_in_a_branch_read_after_it():
    @T.prim_func
    def f(A: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            if bx == 0:
                y = A[0] * 2.0
            A[1] = y  # <-
    return f


def fragment_indexed_two_ways_in_one_nest():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            F = T.alloc_fragment((64,), "float32")
            T.fill(F, 1.0)
            for i in T.Parallel(64):
                A[i] = F[i] + F[63 - i]  # <-
    return f


def fragment_indexed_two_ways_in_a_2d_nest():
    @T.prim_func
    def f(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=64):
            F = T.alloc_fragment((16, 16), "float32")
            T.fill(F, 1.0)
            for i, j in T.Parallel(16, 16):
                F[i, j] = F[j, i] * 2.0  # <-
            T.copy(F, A)
    return f


def test_let_from_a_branch_is_not_visible_after_it():
    _rejected(let_bound_in_a_branch_read_after_it, "Immutable variable `y`",
              "outside its defining region", "T.alloc_var")


@pytest.mark.parametrize("builder,shown", [
    (fragment_indexed_two_ways_in_one_nest, ["F[63 - i]", "F[i]"]),
    (fragment_indexed_two_ways_in_a_2d_nest, ["F[j, i]", "F[i, j]"]),
])
def test_one_fragment_one_index_per_parallel_nest(builder, shown):
    _rejected(builder, "layout inference conflict", *shown)


# ---- accepted neighbours ----------------------------------------------------------------------


def test_legal_neighbours_are_accepted_and_lower():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            F = T.alloc_fragment((64,), "float32")
            s = T.alloc_fragment((1,), "float32")
            L = T.alloc_local((4,), "float32")
            acc = T.alloc_var("float32")
            base = bx * 64              # bound before the loop, read inside and after it
            acc = 0.0
            if bx == 0:
                acc = 1.0               # T.alloc_var: assignments in branches are visible
            for k in T.serial(4):
                L[k] = A[base + k]      # local buffers indexed by serial loops
                t = L[k] * 2.0          # a let used inside its own scope
                L[k] = t
            T.fill(s, 0.0)
            s[0] = s[0] + L[0]          # fragment[0] outside T.Parallel
            for i in T.Parallel(64):
                F[i] = A[base + i] + acc
            for i in T.Parallel(64):
                for r in T.serial(4):   # serial loop inside a parallel nest indexes local
                    F[i] = F[i] + L[r]
            for i in T.Parallel(64):
                B[base + i] = F[i] + s[0]
    tilelang.lower(f, target=SM80)


def test_the_same_fragment_index_twice_is_fine():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            F = T.alloc_fragment((64,), "float32")
            T.fill(F, 1.0)
            for i in T.Parallel(64):
                F[i] = F[i] * F[i] + 1.0
            T.copy(F, A)
    tilelang.lower(f, target=SM80)


def _serial_nest(branch_depth):
    """S (32 elements) written at S[k] for k up to 63, with a branch `branch_depth` loops
    below k's (0: none)."""
    @T.prim_func
    def f(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((32,), "float32")
            for k in T.serial(64):
                S[k] = A[k]
                for i in T.serial(2):
                    if branch_depth == 1:
                        if A[i] > 0.0:
                            A[i] = 1.0
                    for j in T.serial(2):
                        if branch_depth == 2:
                            A[j] = T.if_then_else(A[j] > 0.0, 1.0, 0.0)
                        else:
                            A[j] = A[j] + 1.0
    return f


def test_bounds_are_checked_only_over_loops_every_iteration_of_which_runs():
    """A loop whose body branches anywhere, however deep, may skip part of its body: the
    accesses under it are not bounded by its range (an out-of-range S[k] is then not refused)."""
    with pytest.raises(IndexError, match=r"S\[k\] reaches index 63.*k in \[0, 63\]"):
        _serial_nest(0)
    _serial_nest(1)
    _serial_nest(2)
