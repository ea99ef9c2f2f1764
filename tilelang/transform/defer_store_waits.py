"""Let the thread that issued a TMA store wait for it as late as the kernel allows.

Expects: thread IR after insert_sync, in which a TMA store or reduction of a shared tile S
(stage_epilogue.py's `tma_tile_stores`) is one statement

    if <cond>: <tma_store/tma_store_add ...>; tl::tma_store_arrive; tl::tma_store_wait<0>

and every other thread touches S again only after a barrier that the issuing thread reaches
after that wait.

Guarantees: the wait (cp.async.bulk.wait_group.read: "S may be overwritten now") moves forward
over the statements of the same sequence that cannot order a later access of S behind the
issuing thread: statements that touch no shared memory overlapping S and release nothing to
other threads (no barrier, arrival, cluster sync or other TMA store, no user extern call; an
mbarrier arrival only when the sequence holds every access of S and does not wait on that
barrier). Waiting on an mbarrier only acquires and is passed. The wait
lands just before the first statement that is not passable, typically the next barrier, so
the store overlaps the work up to it instead of stalling the issuing warp (and with it its
warpgroup's next wgmma). In a loop body the scan wraps into the next iteration when every
statement that touches S is in the body; one more wait then follows the loop, so S is read
before anything after the loop runs. A loop body that is one branch without an else (the
tile guard of a persistent loop), possibly under lets that only compute (the tile's
coordinates), counts as its branch's statements: an iteration that skips them runs nothing,
so the wait lands in the next tile (a persistent GEMM's epilogue store then overlaps the next
tile's main loop). Waits that cannot move are left where they are.
"""

from __future__ import annotations


from ..ir import nodes as ir
from ..ir.visitor import Mutator, any_node
from .pass_config import PassConfigKey
from .analysis.device_ops import TMA_STORE_WAIT_ALL, TMA_STORES, Effect, has_effect, may_release
from .analysis.scopes import SHARED
from .analysis.shared_access import SharedAccesses, accesses, call_buffers


def _extern_calls(node):
    return [c for c in accesses(node)
            if ir.extern_name(c) is not None]


def _issue(s):
    """(cond, the store's shared source buffers) when `s` is an issue ending in the wait."""
    if not isinstance(s, ir.If) or s.else_body is not None or \
            not isinstance(s.then_body, ir.Seq) or not s.then_body.stmts:
        return None
    *issue, last = s.then_body.stmts
    if not ir.calls_extern(last, TMA_STORE_WAIT_ALL) or last.value.args[0] != TMA_STORE_WAIT_ALL:
        return None
    sources = set()
    for st in issue:
        if not ir.calls_extern(st, "tl::tma_store"):
            return None
        if st.value.args[0] in TMA_STORES:
            sources.update(b for b in call_buffers(st.value)
                           if b is not None and b.scope in SHARED)
    return (s.cond, sources) if sources else None


class _Deferrer:
    def __init__(self, kernel, ctx):
        self.sync = SharedAccesses(ctx)
        self.kernel = kernel
        self.deferred = 0

    def touches(self, node, sources) -> bool:
        reads, writes, async_writes = self.sync.all_effects(node)
        return any(self.sync.overlap(b, s) for b in reads | writes | async_writes
                   for s in sources)

    def passable(self, s, sources, waited, arrivals_ok) -> bool:
        """Whether the wait may move past `s`. An mbarrier arrival is passed only when the
        barrier is not waited in the sequence and nothing outside it touches S (then no
        thread it releases can rewrite S)."""
        if self.touches(s, sources):
            return False
        for c in _extern_calls(s):
            name = c.args[0]
            if has_effect(name, Effect.ACQUIRES):
                continue
            if has_effect(name, Effect.ARRIVES):
                bar = call_buffers(c)[0]
                if not arrivals_ok or bar is None or bar in waited:
                    return False
            elif may_release(name):
                return False
        return True

    def seq(self, stmts, loop_body: bool):
        """`stmts` with each issue's wait moved; (stmts, waits to add after the loop)."""
        stmts = list(stmts)
        after_loop = []
        waited = None  # the mbarriers the sequence waits on (found at its first issue)
        i = -1
        while i + 1 < len(stmts):
            i += 1
            found = _issue(stmts[i])
            if found is None:
                continue
            if waited is None:
                waited = {b for s in stmts for c in _extern_calls(s)
                          if has_effect(c.args[0], Effect.ACQUIRES)
                          for b in call_buffers(c)[:1] if b is not None}
            cond, sources = found
            outside = self.touches_outside(stmts, sources)
            order = list(range(i + 1, len(stmts)))
            if loop_body and not outside:
                order += list(range(0, i + 1))
            stop = None
            for j in order:
                if not self.passable(stmts[j], sources, waited, not outside):
                    stop = j
                    break
            if stop is None:
                if loop_body:
                    continue  # cannot happen: the issue itself touches S
                stop = len(stmts)
            passed = [stmts[j] for j in order[:order.index(stop)]] if stop in order else \
                stmts[i + 1:]
            if all(ir.calls_extern(p, "tl::fence") for p in passed):
                continue  # nothing to overlap with
            issue = stmts[i]
            stmts[i] = ir.with_fields(issue, then_body=ir.Seq(issue.then_body.stmts[:-1]))
            wait = ir.If(cond, ir.extern_stmt(TMA_STORE_WAIT_ALL))
            stmts.insert(stop, wait)
            if stop <= i:
                after_loop.append(wait)
                i += 1  # the issue moved one place down
            self.deferred += 1
        return stmts, after_loop

    def touches_outside(self, body_stmts, sources) -> bool:
        """Whether anything outside `body_stmts` touches S (the scan may then not wrap)."""
        inside = sum(self.touches_count(s, sources) for s in body_stmts)
        return self.touches_count(self.kernel.body, sources) != inside

    def touches_count(self, node, sources) -> int:
        n = 0
        for a in accesses(node):
            if isinstance(a, (ir.Load, ir.Store)) and \
                    any(self.sync.overlap(a.buffer, s) for s in sources):
                n += 1
            elif ir.is_extern_call(a):
                n += sum(1 for b in call_buffers(a) if b is not None and
                         any(self.sync.overlap(b, s) for s in sources))
        return n


def _pure(expr) -> bool:
    return not any_node(expr, lambda n: isinstance(n, ir.Call) and
                       (n.op in ir.SIDE_EFFECT_CALLS or ir.is_extern_call(n)))


def defer_store_waits(kernel: ir.Kernel, ctx) -> ir.Kernel:
    if not ctx.target.is_hopper or ctx.flag(PassConfigKey.TL_DISABLE_DEFERRED_STORE_WAIT):
        return kernel
    deferrer = _Deferrer(kernel, ctx)

    class Defer(Mutator):
        def visit_For(self, f):
            body, lets, guard = f.body, [], None
            while isinstance(body, ir.LetStmt) and _pure(body.value):
                lets.append(body)  # the tile's coordinates, read from a schedule
                body = body.body
            if isinstance(body, ir.If) and body.else_body is None and \
                    isinstance(body.then_body, ir.Seq) and _pure(body.cond):
                guard, body = body, body.then_body  # a persistent tile loop's tile guard
            if not isinstance(body, ir.Seq):
                return self.generic(f)
            stmts, after = deferrer.seq([self.visit(x) for x in body.stmts], loop_body=True)
            body = ir.Seq(tuple(stmts))
            if guard is not None:
                body = ir.with_fields(guard, then_body=body)
            for let in reversed(lets):
                body = ir.with_fields(let, body=body)
            loop = ir.with_fields(f, body=body)
            return ir.Seq((loop, *after)) if after else loop

        def visit_Seq(self, s):
            stmts = [self.visit(x) for x in s.stmts]
            stmts, _ = deferrer.seq(stmts, loop_body=False)
            return ir.Seq(tuple(stmts))

    body = Defer().visit(kernel.body)
    if deferrer.deferred:
        ctx.note(f"TMA stores: {deferrer.deferred} read wait(s) deferred to the next barrier")
    return ir.with_fields(kernel, body=body)
