"""Tile operations inside user roles run on the role's threads (the reference's thread bounds).

A role is a region that runs on a contiguous range of the block's threads: `with T.ws(k):`, or
a branch on the thread index such as `if tx < 128:` / `else:` (ir/thread_range.py). The
reference lays out and lowers the tile operations inside a role for the role's threads only:
a `T.gemm` in `T.ws(1)` of a 256-thread block is computed by warpgroup 1 alone.

Expects: tile IR (before layout inference) of one `T.Kernel`.

Guarantees:
  * every global->shared `T.copy` in a role is spread over the role's threads
    (("thread_range", (n, thread index within the role)) in its options, lower_copy/__init__.py);
  * every `T.tma_copy` gets its leader-election group (`scope`: `leader_scope_threads`, else
    the threads of the innermost enclosing role, else the block) and `leader`, the condition,
    in the user's thread index, of the threads that issue it: the first thread of each group;
  * when collective tile operations (copies, fills, gemms, reductions, scans, tile atomics,
    `T.Parallel` nests) run inside roles, all those roles cover one thread range
    [lo, lo + n), which becomes the block as far as layouts and lowering are concerned:
    `ctx.num_threads` is n, and the threads are relabelled so that user thread
    u runs on physical thread (u - lo) mod T (`ctx.tid`, the kernel's new thread variable;
    the user's thread index becomes `(tid + lo) % T` everywhere: lo is a multiple of 32, so
    the renumbering keeps warps intact, and the role's warpgroups are physical warpgroups
    0, 1, ...). The compute role's bodies become
    `Attr("thread_group", ("consumer", n))` regions (barriers inside synchronise the n threads),
    and collective operations outside any role are run by those n threads only (the others
    skip them; the result is the same: the n threads do all of the work);
  * when they run in roles of several different thread ranges (the reference's
    `if tx < 128: .. elif tx < 256: .. else: ..` with tile operations in two of them), nothing
    is relabelled: the bodies of each such role become
    `Attr("thread_group", ("consumer", n, lo, barrier))` regions, within which layouts and
    lowerings describe the role's n threads [lo, lo + n), numbered from 0
    (engine/context.py `thread_group`), and insert_sync synchronises them with named barrier
    `barrier` (1, 2, ..: one per role, 15 at most, a located error beyond); collective
    operations outside every role stay the whole block's. The kernel gets the attribute
    "role_groups". A range that is not whole warps is a located error.

Multi-dimensional thread blocks have no roles; their tile operations use the whole block.
"""

from __future__ import annotations

from ..errors import located
from ..ir import nodes as ir
from ..ir.thread_range import branch_ranges, role_of, warp_aligned
from ..ir.visitor import Mutator, substitute
from .analysis.scopes import is_global_to_shared

_COLLECTIVE = (ir.Copy, ir.Fill, ir.Gemm, ir.Reduce, ir.CumSum, ir.AtomicTile)


def _is_collective(s) -> bool:
    """A tile operation laid out over the compute threads (a global->shared copy that carries
    its own threads is not: lower_copy/__init__.py spreads it over the threads of its role)."""
    if isinstance(s, ir.Copy) and dict(s.options).get("thread_range") is not None:
        return False
    return isinstance(s, _COLLECTIVE) or (isinstance(s, ir.For) and s.kind == "parallel")


def _leader(tid, lo, hi, scope) -> ir.Expr:
    """The first thread of each group of `scope` threads of the role [lo, hi)."""
    if scope >= hi - lo:
        return ir.compare("eq", tid, lo)
    rel = tid if lo % scope == 0 else ir.binary("sub", tid, lo)
    return ir.compare("eq", ir.binary("floormod", rel, scope), 0)


class _Roles(Mutator):
    """Fills in tma_copy leaders and records the thread range of every collective op."""

    def __init__(self, tvar, nthreads, tid):
        self.tvar, self.T, self.tid = tvar, nthreads, tid
        self.range = (0, nthreads)
        self.collective = []  # (range, stmt)

    def _within(self, rng, body):
        saved, self.range = self.range, (max(rng[0], self.range[0]), min(rng[1], self.range[1]))
        try:
            return self.visit(body)
        finally:
            self.range = saved

    def visit_Attr(self, s):
        role = role_of(s, self.tvar, self.T) if self.tvar is not None else None
        if role is None:
            return self.generic(s)
        rng, body = role
        new = self._within(rng, body)
        if new is body:
            return s
        return ir.Attr(s.key, s.value, ir.If(s.body.cond, new, None, loc=s.body.loc), loc=s.loc)

    def visit_If(self, s):
        ranges = branch_ranges(s, self.tvar, self.T) if self.tvar is not None else None
        if ranges is None:
            return self.generic(s)
        cond = self.visit(s.cond)
        then = self._within(ranges[0], s.then_body)
        other = s.else_body
        if other is not None:
            other = self._within(ranges[1], other) if ranges[1] is not None else \
                self.visit(other)
        if then is s.then_body and other is s.else_body and cond is s.cond:
            return s
        return ir.If(cond, then, other, loc=s.loc)

    def visit_For(self, s):
        if s.kind == "parallel":
            self.collective.append((self.range, s))
            return s
        return self.generic(s)

    def visit_TmaCopy(self, s):
        lo, hi = self.range
        scope = s.scope if s.scope is not None else hi - lo
        return ir.with_fields(s, scope=scope, leader=_leader(self.tid, lo, hi, scope),
                              in_role=(lo, hi) != (0, self.T))

    def visit_Copy(self, s):
        if not is_global_to_shared(s) or self.range == (0, self.T):
            self.collective.append((self.range, s))
            return s
        # a load into shared memory in a role: spread over the role's threads, whichever
        # role it is (lower_copy/__init__.py)
        lo, hi = self.range
        return _with_threads(s, hi - lo, ir.binary("sub", self.tvar, lo) if lo else self.tvar)

    def generic(self, node):
        if _is_collective(node):
            self.collective.append((self.range, node))
            return node
        return super().generic(node)


def _with_threads(s: ir.Copy, n, rel_tid) -> ir.Copy:
    opts = tuple(o for o in s.options if o[0] != "thread_range")
    return ir.with_fields(s, options=opts + (("thread_range", (n, rel_tid)),))


class _RoleRegions(Mutator):
    """Walks role bodies knowing their thread range (intersected with the enclosing roles',
    as in _Roles); `_wrap(range, new body)` says what a role's body becomes."""

    def __init__(self, tvar, T):
        self.tvar, self.T = tvar, T
        self.range = (0, T)

    def _wrap(self, rng, body):
        raise NotImplementedError

    def _region(self, rng, body):
        rng = (max(rng[0], self.range[0]), min(rng[1], self.range[1]))
        saved, self.range = self.range, rng
        try:
            new = self.visit(body)
        finally:
            self.range = saved
        return self._wrap(rng, new)

    def visit_Attr(self, s):
        role = role_of(s, self.tvar, self.T)
        if role is None:
            return self.generic(s)
        rng, body = role
        return ir.Attr(s.key, s.value, ir.If(s.body.cond, self._region(rng, body), None,
                                             loc=s.body.loc), loc=s.loc)

    def visit_If(self, s):
        ranges = branch_ranges(s, self.tvar, self.T)
        if ranges is None:
            return self.generic(s)
        then = self._region(ranges[0], s.then_body)
        other = s.else_body
        if other is not None:
            other = self._region(ranges[1], other) if ranges[1] is not None else \
                self.visit(other)
        return ir.If(s.cond, then, other, loc=s.loc)


class _Relabel(_RoleRegions):
    """Role bodies of the compute range become consumer thread groups; collective statements
    outside every role run on the compute threads only."""

    def __init__(self, tvar, T, compute, new_tid):
        super().__init__(tvar, T)
        self.compute, self.t = compute, new_tid
        self.n = compute[1] - compute[0]

    def _group(self, body):
        return ir.Attr("thread_group", ("consumer", self.n), body, loc=body.loc)

    def _wrap(self, rng, body):
        return self._group(body) if rng == self.compute else body

    def visit_Seq(self, s):
        if self.range != (0, self.T):
            return self.generic(s)
        out, run = [], []
        for st in s.stmts:
            if _is_collective(st):  # a tile op contains no roles: guard it as it is
                run.append(st)
                continue
            if run:
                out.append(self._guard(run))
                run = []
            out.append(self.visit(st))
        if run:
            out.append(self._guard(run))
        return ir.Seq(tuple(out))

    def generic(self, node):
        if self.range == (0, self.T) and _is_collective(node):
            return self._guard([node])
        return super().generic(node)

    def _guard(self, stmts):
        body = stmts[0] if len(stmts) == 1 else ir.Seq(tuple(stmts))
        idle = ir.Attr("thread_group", ("idle", self.T - self.n), ir.Seq(()))
        return ir.If(ir.compare("lt", self.t, self.n), self._group(body), idle, loc=body.loc)


def assign_warp_roles(kernel: ir.Kernel, ctx) -> ir.Kernel:
    one_dim = len(kernel.threads) == 1
    tvar = kernel.thread_vars[0] if one_dim else None
    T = kernel.num_threads
    roles = _Roles(tvar, T, ctx.tid)
    body = roles.visit(kernel.body)
    ranges = {}
    for rng, stmt in roles.collective:
        if rng != (0, T):
            ranges.setdefault(rng, stmt)
    if not ranges:  # tile operations use the whole block (T.tma_copy leaders aside)
        return kernel if body is kernel.body else ir.with_fields(kernel, body=body)
    for (lo, hi), first in ranges.items():
        if not warp_aligned((lo, hi)):
            raise located(ValueError)(
                f"tile operations run on threads [{lo}, {hi}) only: a role that runs tile "
                "operations must be whole warps (start and end multiples of 32)", first.loc)
    if len(ranges) > 1:
        return _role_groups(kernel, body, ranges, tvar, ctx)
    (lo, hi), first = next(iter(ranges.items()))
    n = hi - lo
    # the physical thread index; the user's is the same when the compute role comes first
    t = tvar if lo == 0 else ir.Var("tid", tvar.dtype)
    user_tid = ir.binary("floormod", ir.binary("add", t, lo), T)
    relabel = _Relabel(tvar, T, (lo, hi), t)
    body = relabel.visit(body)
    if lo:
        body = substitute(body, {tvar: user_tid})
    new = ir.with_fields(kernel, body=body, thread_vars=(t,),
                         attrs=kernel.attrs + (("compute_threads", (lo, n)),))
    ctx.set_compute_threads(new, t, n)
    what = f"threads [{lo}, {hi})"
    ctx.note(f"tile operations run on the role's {what} ({n} threads)" +
             (f"; user thread u runs on thread (u - {lo}) mod {T}" if lo else ""))
    return new


# named barrier 0 is __syncthreads; the hardware has 16
_MAX_GROUPS = 15


def _role_groups(kernel, body, ranges, tvar, ctx):
    """Roles of several thread ranges run tile operations: each such role's bodies become a
    thread group of its own (layouts, lowering and barriers for its threads)."""
    if len(ranges) > _MAX_GROUPS:
        (lo, hi), first = list(ranges.items())[_MAX_GROUPS]
        raise located(NotImplementedError)(
            f"tile operations run in {len(ranges)} roles of different threads; each needs a "
            f"named barrier of its own and there are {_MAX_GROUPS}", first.loc)
    groups = {rng: (rng[1] - rng[0], rng[0], barrier)
              for barrier, rng in enumerate(ranges, start=1)}
    body = _Groups(tvar, kernel.num_threads, groups).visit(body)
    ctx.note("tile operations run in roles of different threads, each laid out and lowered "
             "for its own: " + ", ".join(f"threads [{lo}, {hi}) (named barrier {g[2]})"
                                         for (lo, hi), g in groups.items()))
    return ir.with_fields(kernel, body=body,
                          attrs=kernel.attrs + (("role_groups", tuple(groups.values())),))


class _Groups(_RoleRegions):
    """The bodies of the roles that run tile operations become
    `Attr("thread_group", ("consumer", n, lo, barrier))` regions."""

    def __init__(self, tvar, T, groups):
        super().__init__(tvar, T)
        self.groups = groups

    def _wrap(self, rng, body):
        group = self.groups.get(rng)
        if group is None:
            return body
        return ir.Attr("thread_group", ("consumer",) + group, body, loc=body.loc)
