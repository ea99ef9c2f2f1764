"""Lanes, masks and the execution context of the CPU interpreter.

The interpreter runs one thread block at a time, SIMT-style. A *lane space* is the set of
lanes that execute a statement together:

* the **thread space** of a block: one lane per thread (shape `(threads,)`); block-level scalar
  statements run here, so a block-level atomic or print happens once per thread;
* a **parallel space**: one lane per iteration of a `T.Parallel` nest (shape = the grid);
* the **host space** (one lane) for statements outside any kernel.

A value is either *uniform* (a numpy scalar: every lane holds it) or *varying* (an ndarray
broadcastable to the space's shape). A *mask* says which lanes are active: `None` (all),
`EMPTY` (none: the statement is skipped) or a bool ndarray broadcastable to the space.
Masks are normalised so that an all-true array becomes `None` and an all-false one `EMPTY`.
"""

from __future__ import annotations

import numpy as np

from ..errors import located

__all__ = ["EMPTY", "VARYING", "LaneSpace", "Ctx", "mask_and", "mask_andnot", "mask_or",
           "is_varying", "collapse", "scalar", "fail", "at_statement"]


class _Empty:
    __slots__ = ()

    def __repr__(self):
        return "EMPTY"


EMPTY = _Empty()


class _Varying:
    """Stands for a per-thread value that cannot be used inside a T.Parallel body."""

    __slots__ = ()


VARYING = _Varying()


def is_varying(v) -> bool:
    return type(v) is np.ndarray and v.ndim > 0


def scalar(v):
    """0-d arrays (from np.where on scalars, ...) become numpy scalars."""
    if type(v) is np.ndarray and v.ndim == 0:
        return v[()]
    return v


def _norm(m):
    if m.all():
        return None
    if not m.any():
        return EMPTY
    return m


def mask_and(mask, cond):
    """Lanes of `mask` where `cond` holds."""
    if mask is EMPTY:
        return EMPTY
    if type(cond) is not np.ndarray or cond.ndim == 0:
        return mask if cond else EMPTY
    if mask is None:
        return _norm(cond)
    return _norm(np.logical_and(mask, cond))


def mask_andnot(mask, cond):
    """Lanes of `mask` where `cond` does not hold."""
    if mask is EMPTY:
        return EMPTY
    if type(cond) is not np.ndarray or cond.ndim == 0:
        return EMPTY if cond else mask
    if mask is None:
        return _norm(np.logical_not(cond))
    return _norm(np.logical_and(mask, np.logical_not(cond)))


def mask_or(a, b):
    if a is EMPTY:
        return b
    if b is EMPTY:
        return a
    if a is None or b is None:
        return None
    return _norm(np.logical_or(a, b))


def collapse(v):
    """A varying value whose lanes all agree becomes a scalar; else VARYING."""
    flat = v.reshape(-1)
    if flat.size == 0:
        return VARYING
    first = flat[0]
    if (flat == first).all():
        return first
    if v.dtype.kind == "f" and np.isnan(flat).all():
        return first
    return VARYING


class LaneSpace:
    """A set of lanes: `shape`, and `index`, one broadcastable arange per lane dimension
    (to address per-lane storage)."""

    __slots__ = ("kind", "shape", "index", "size", "__weakref__")

    def __init__(self, kind: str, shape: tuple):
        self.kind = kind
        self.shape = tuple(shape)
        nd = len(self.shape)
        self.index = tuple(np.arange(n).reshape((1,) * d + (n,) + (1,) * (nd - d - 1))
                           for d, n in enumerate(self.shape))
        self.size = int(np.prod(self.shape)) if self.shape else 1

    def __repr__(self):
        return f"<{self.kind} lanes {self.shape}>"


class Ctx:
    """Mutable state while a statement tree runs (one per kernel launch, reused per block)."""

    __slots__ = ("env", "bufs", "mask", "space", "brk", "loc", "block", "cluster", "threads",
                 "nthreads", "thread_ids", "safe", "thread_space", "func_name", "role",
                 "barriers", "sched", "part", "grid", "grid_barrier", "cluster_barrier")

    def __init__(self, env, bufs, space, func_name=""):
        self.env = env
        self.bufs = bufs
        self.mask = None
        self.space = space
        self.thread_space = space
        self.brk = []
        self.loc = None
        self.block = (0, 0, 0)
        self.cluster = (1, 1, 1)  # cluster_dims of the running kernel
        self.threads = (1, 1, 1)
        self.nthreads = 1
        self.thread_ids = (np.zeros(1, np.int64),) * 3
        self.safe = {}
        self.func_name = func_name
        self.role = None  # roles.Role of the statement running, None at block level
        self.barriers = None  # roles.Barriers of the running block
        self.sched = None  # roles.RoleScheduler of the roles running side by side
        self.part = 0  # this role's index in `sched`
        self.grid = None  # (scheduler, this block's index) when blocks run side by side
        self.grid_barrier = None  # roles.GridBarrier of T.sync_grid
        self.cluster_barrier = None  # roles.ClusterBarrier of the block's cluster

    def clone(self):
        """A context for a role that runs side by side with its siblings: its own variables
        (loop counters, lets), mask and loop-exit state; the same memory and barriers."""
        c = Ctx(dict(self.env) if self.env is not None else None, self.bufs, self.space,
                self.func_name)
        for name in ("thread_space", "loc", "block", "cluster", "threads", "nthreads",
                     "thread_ids", "safe", "role", "barriers", "sched", "part", "grid",
                     "grid_barrier", "cluster_barrier"):
            setattr(c, name, getattr(self, name))
        c.mask = self.mask
        c.brk = list(self.brk)
        return c


def fail(ctx, exc_type, message):
    """A located error at the statement being executed."""
    where = ""
    if ctx is not None and ctx.space is not None and ctx.space.kind != "host":
        bx, by, bz = ctx.block
        where = f" (in block ({bx}, {by}, {bz}))"
    return located(exc_type)(message + where, ctx.loc if ctx is not None else None)


def at_statement(stmt, run):
    """Wrap a compiled statement `run(ctx, mask)` so that errors it raises point at `stmt`."""
    loc = stmt.loc

    def f(ctx, mask):
        ctx.mask = mask
        ctx.loc = loc
        run(ctx, mask)
        return mask
    return f
