"""Regions of a kernel that run on a contiguous range of its threads ("roles").

`T.ws(k)` (an `Attr("warp_role", ids)` around `If(warpgroup == k)`) and branches on the thread
index such as `if tx < 128:` / `else:` (the reference's thread-range branches) make the code
inside them run on a subset of the block's threads. The reference lays out and lowers the tile
operations inside such a region on that subset ("thread bounds"); both the CUDA pipeline
(transform/warp_roles.py) and the CPU interpreter recognise the same regions through
`region_range`.

A condition counts when it depends on the (one-dimensional) thread index alone and the threads
satisfying it form one interval; it is decided by evaluating the condition for every thread
index, so any spelling (`tx >= 128`, `tx // 128 == 1`, `128 <= tx and tx < 256`) works.
"""

from __future__ import annotations

import numpy as np

from . import nodes as ir
from .visitor import any_stmt, collect

_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "floordiv": np.floor_divide,
    "floormod": np.mod, "truncdiv": lambda a, b: np.trunc(a / b).astype(np.int64),
    "truncmod": np.fmod, "min": np.minimum, "max": np.maximum, "bitand": np.bitwise_and,
    "bitor": np.bitwise_or, "bitxor": np.bitwise_xor, "shl": np.left_shift,
    "shr": np.right_shift,
}
_COMPARE = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
            "eq": np.equal, "ne": np.not_equal}


def _eval(e, tvar, values):
    """`e` at every thread index (an int64 array), or None if `e` is not a function of the
    thread index alone built from integer arithmetic and comparisons."""
    if e is tvar:
        return values
    if isinstance(e, ir.Const):
        return np.int64(int(e.value)) if not isinstance(e.value, float) else None
    if isinstance(e, ir.Binary):
        fn = _BINARY.get(e.op)
        a, b = _eval(e.a, tvar, values), _eval(e.b, tvar, values)
        if fn is None or a is None or b is None:
            return None
        if e.op in ("floordiv", "floormod", "truncdiv", "truncmod") and np.any(b == 0):
            return None
        return fn(a, b)
    if isinstance(e, ir.Compare):
        a, b = _eval(e.a, tvar, values), _eval(e.b, tvar, values)
        return None if a is None or b is None else _COMPARE[e.op](a, b)
    if isinstance(e, ir.Logical):
        a, b = _eval(e.a, tvar, values), _eval(e.b, tvar, values)
        if a is None or b is None:
            return None
        return np.logical_and(a, b) if e.op == "and" else np.logical_or(a, b)
    if isinstance(e, ir.Unary) and e.op == "not":
        a = _eval(e.a, tvar, values)
        return None if a is None else np.logical_not(a)
    if isinstance(e, ir.Cast) and (e.dtype.is_int or e.dtype.is_bool):
        return _eval(e.value, tvar, values)
    return None


def thread_set(cond, tvar: ir.Var, nthreads: int):
    """The thread indices in [0, nthreads) for which `cond` holds (a bool array), or None when
    `cond` is not a function of `tvar` alone."""
    free = {id(v) for v in collect(cond, lambda n: isinstance(n, ir.Var))}
    if free != {id(tvar)}:
        return None
    v = _eval(cond, tvar, np.arange(nthreads, dtype=np.int64))
    if v is None:
        return None
    return np.broadcast_to(np.asarray(v, dtype=bool), (nthreads,))


def interval(truth) -> tuple | None:
    """(lo, hi) if the true entries of a bool array are exactly [lo, hi) (and not empty)."""
    idx = np.flatnonzero(truth)
    if idx.size == 0 or idx[-1] - idx[0] + 1 != idx.size:
        return None
    return int(idx[0]), int(idx[-1]) + 1


def branch_ranges(s: ir.If, tvar, nthreads: int):
    """((lo, hi) of the then-branch, (lo, hi) of the else-branch or None) when `s` branches on
    a thread-index interval, else None."""
    truth = thread_set(s.cond, tvar, nthreads)
    if truth is None:
        return None
    then = interval(truth)
    if then is None:
        return None
    other = interval(~truth) if s.else_body is not None else None
    return then, other


def role_of(s, tvar, nthreads: int):
    """For `Attr("warp_role", ids, If(cond, body))` (T.ws): ((lo, hi), body); else None."""
    if not (isinstance(s, ir.Attr) and s.key == "warp_role" and isinstance(s.body, ir.If)
            and s.body.else_body is None):
        return None
    ranges = branch_ranges(s.body, tvar, nthreads)
    if ranges is None:
        return None
    return ranges[0], s.body.then_body


def warp_aligned(rng) -> bool:
    """Whether a thread range is made of whole warps (a role tile operations can run in)."""
    return rng is not None and rng[0] % 32 == 0 and rng[1] % 32 == 0


def role_group(s):
    """(lo, n) when `s` is the thread group of a role whose tile operations are laid out for
    its own threads [lo, lo + n) (`Attr("thread_group", ("consumer", n, lo, barrier))`,
    transform/warp_roles.py), else None."""
    if isinstance(s, ir.Attr) and s.key == "thread_group" and len(s.value) >= 4:
        return s.value[2], s.value[1]
    return None


class InRoleGroups:
    """Mixin for a Visitor or Mutator with a kernel context `self.ctx`: inside a role's thread
    group the context describes the role's threads (engine/context.py, `thread_group`)."""

    def visit_Attr(self, s):
        group = role_group(s)
        if group is None:
            # other attributes as the visitor mixed with handles them (a ScopedMutator
            # takes a T.assume as facts)
            parent = getattr(super(), "visit_Attr", None)
            return parent(s) if parent is not None else self.generic(s)
        with self.ctx.thread_group(group):
            return self.generic(s)


def has_user_roles(kernel: ir.Kernel) -> bool:
    """Whether the kernel synchronises roles itself (T.ws, T.tma_copy, relabelled roles):
    the automatic warp specialisation and pipelining leave it alone."""
    return kernel.attr("compute_threads") is not None or \
        kernel.attr("role_groups") is not None or any_stmt(
        kernel.body, lambda n: isinstance(n, ir.TmaCopy) or (
            isinstance(n, ir.Attr) and n.key == "warp_role"))
