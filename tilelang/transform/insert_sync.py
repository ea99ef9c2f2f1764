"""Insert `__syncthreads()` where threads exchange data through shared memory.

Expects: thread IR after shared-memory planning (`ctx.shared_plan`: flat buffer -> byte
offset, buffers may overlap when their lifetimes do not). Guarantees: between a write of a
shared byte range and a later read or write of an overlapping range (and between a read and a
later write), every thread passes a barrier — in straight-line code, across loop iterations
(the body is analysed twice, the second time starting from its own end state), and around
branches. Barriers go only where every thread reaches them: never inside a branch or loop
whose condition depends on the thread index; such a region is fenced before and after
instead. Consecutive `T.ws` roles (Attr "warp_role") are synchronised by the user's mbarriers:
fenced as one region, with nothing between or inside them, except inside the roles that run
the tile operations (consumer `thread_group`s of transform/warp_roles.py), each analysed on
its own and synchronised with a named barrier over its threads (barrier 1, or the id the
group carries when roles of different threads run tile operations: one per role, so that
roles running side by side never meet at one barrier); so is a warpgroup's turn to
issue wgmma (`tl::wg_turn_wait` .. `tl::wg_turn_pass`, transform/pingpong.py). Copies issued
by the pipeliner (marked async) are ordered with their readers by its own wait+barrier and are not
recorded as writes here; they still wait for earlier readers and writers of the memory they
overwrite (a prologue whose stages reuse the memory of a tile read just before it gets a
barrier first), except inside the pipeliner's `Attr("issue_ahead")`: the stage written there
is touched by nothing else in the iteration, and every iteration starts with its barrier.
With wgmma in the kernel, a barrier this pass inserts after generic shared-memory stores (since
its last fenced barrier) is preceded by `fence.proxy.async`, so a wgmma after the barrier reads
what they wrote; a barrier that only orders earlier reads before later stores has no fence.
In a kernel the user synchronises with mbarriers (not the automatic warp specialisation)
that uses wgmma or TMA loads, every mbarrier arrival is preceded by `fence.proxy.async`: the
arriving thread's generic shared-memory accesses are then ordered with the async proxy (the
wgmma that reads what it wrote, the TMA load that overwrites what it read).
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import any_node, collect
from .analysis.device_ops import Effect, has_effect
from .analysis.shared_access import SharedAccesses

VOID = ir.DType("void")


def _fence_proxy_async() -> ir.Stmt:
    return ir.Evaluate(ir.Call("call_extern", ("tl::fence_proxy_async",), VOID))


def _is_async_proxy_reader(s) -> bool:
    return isinstance(s, ir.Evaluate) and has_effect(ir.extern_name(s.value),
                                                    Effect.ASYNC_PROXY_READ)


def _partitioned(s) -> bool:
    if isinstance(s, ir.For):
        return bool(s.annotation("partitioned"))
    return isinstance(s, ir.Attr) and s.key == "partitioned"


def _is_role_split(s: ir.If) -> bool:
    return all(isinstance(b, ir.Attr) and b.key == "thread_group"
               for b in (s.then_body, s.else_body))


def _is_user_role(s) -> bool:
    return isinstance(s, ir.Attr) and s.key == "warp_role"


def _retarget(stmt, nthreads: int, barrier_id: int = 1):
    """Block-wide barriers inside a consumer region synchronise the consumers only (named
    barrier `barrier_id`): the other threads never reach them. A thread group nested inside
    (a role within the role) keeps its own barriers."""
    from ..ir.visitor import Mutator

    class R(Mutator):
        def visit_Evaluate(self, e):
            if is_barrier(e):
                return ir.Evaluate(ir.Call("call_extern", ("tl::named_barrier_sync",
                                                           ir.const(barrier_id),
                                                           ir.const(nthreads)),
                                           VOID), loc=e.loc)
            return e

        def visit_Attr(self, a):
            return a if a.key == "thread_group" else self.generic(a)

    return R().visit(stmt)


def barrier() -> ir.Stmt:
    return ir.Evaluate(ir.Call("call_extern", ("__syncthreads",), VOID))


def is_barrier(s) -> bool:
    """A block-wide `__syncthreads()`: one this pass inserted, or the user's `T.sync_threads()`
    (without a named barrier's id)."""
    if not isinstance(s, ir.Evaluate):
        return False
    v = s.value
    return ir.extern_name(v) == "__syncthreads" or (
        isinstance(v, ir.Call) and v.op == "sync_threads" and not v.args)


class State:
    """The shared-memory accesses since the last barrier, and whether shared memory may have
    been written since the last `fence.proxy.async` (`unfenced`: an explicit barrier without
    a fence keeps it; only a barrier this pass fences clears it)."""

    __slots__ = ("reads", "writes", "unfenced")

    def __init__(self, reads=(), writes=(), unfenced=False):
        self.reads = set(reads)
        self.writes = set(writes)
        self.unfenced = unfenced

    def copy(self):
        return State(self.reads, self.writes, self.unfenced)

    def union(self, other):
        return State(self.reads | other.reads, self.writes | other.writes,
                     self.unfenced or other.unfenced)

    def then(self, reads, writes, reads_pending=False):
        """This state after a statement reading `reads` and writing `writes` (`reads_pending`:
        generic reads need a fence too, before an asynchronous write of their bytes)."""
        return State(self.reads | reads, self.writes | writes,
                     self.unfenced or bool(writes) or (reads_pending and bool(reads)))

    def empty(self):
        return not self.reads and not self.writes


class SyncInserter(SharedAccesses):
    def __init__(self, ctx, body):
        super().__init__(ctx)
        self.ctx = ctx
        self.thread_vars = set(ctx.kernel.thread_vars)
        self.waw = True
        # wgmma reads shared memory through the async proxy, possibly data that generic
        # stores or cp.async wrote before any of the barriers: fence before each barrier
        # that follows such stores (State.unfenced; an explicit barrier keeps them pending)
        self.fence_all = ctx.uses_wgmma
        # asynchronous writes (TMA loads the block issues, T.tma_copy) may overwrite what
        # generic loads read before a barrier: their reads then want the fence as well
        self.reads_pending = _block_issues_tma_loads(body)

    def conflicts(self, state: State, reads, writes, waw: bool = True) -> bool:
        """RAW and WAR hazards (and WAW between distinct statements) on shared memory."""
        later = reads | writes if waw else reads
        for w in state.writes:
            if any(self.overlap(w, x) for x in later):
                return True
        for r in state.reads:
            if any(self.overlap(r, x) for x in writes):
                return True
        return False

    def uniform(self, expr) -> bool:
        vars_ = collect(expr, lambda n: isinstance(n, ir.Var))
        return not any(v in self.thread_vars for v in vars_)

    # ---- walking ------------------------------------------------------------------------------
    def seq(self, stmts, state: State):
        out, i = [], 0
        while i < len(stmts):
            s = stmts[i]
            if _is_user_role(s):
                # sibling T.ws roles run on disjoint warpgroups and synchronise through the
                # user's mbarriers: one barrier before the whole run if needed, never between
                # or inside them (the other warpgroups would never reach it)
                j = i
                while j < len(stmts) and _is_user_role(stmts[j]):
                    j += 1
                run = ir.Seq(tuple(stmts[i:j]))
                pre, state = self._summary(run, state)
                out.extend(pre + [self._inner_groups(r) for r in stmts[i:j]])
                i = j
                continue
            if ir.calls_extern(s, "tl::wg_turn_wait"):
                # a warpgroup's turn to issue wgmma (pingpong.py) is one region: the other
                # warpgroups wait for the turn, so a barrier over all of them inside it would
                # never complete
                j = i + 1
                while j < len(stmts) and not ir.calls_extern(stmts[j], "tl::wg_turn_pass"):
                    j += 1
                run = list(stmts[i:j + 1])
                pre, state = self._summary(ir.Seq(tuple(run)), state)
                out.extend(pre + run)
                i = j + 1
                continue
            new, state = self.stmt(s, state)
            if isinstance(new, list):
                out.extend(new)
            else:
                out.append(new)
            i += 1
        return out, state

    def block(self, s, state):
        items, state = self.seq(s.stmts if isinstance(s, ir.Seq) else [s], state)
        return (items[0] if len(items) == 1 else ir.Seq(tuple(items))), state

    def stmt(self, s, state: State):
        if is_barrier(s):
            return s, State(unfenced=state.unfenced)
        if ir.calls_extern(s, "tl::fence_proxy_async"):  # (a pass's own, as warp_specialize's)
            return s, State(state.reads, state.writes)
        if isinstance(s, ir.Seq):
            items, state = self.seq(s.stmts, state)
            return items, state
        if isinstance(s, ir.LetStmt):
            pre = []
            r, w, a = self.all_effects(s.value)
            if self.conflicts(state, r, w | a):
                pre, state = self._fenced_barrier(state, a), State()
            state = state.then(r, w, self.reads_pending)
            body, state = self.block(s.body, state)
            return pre + [ir.LetStmt(s.var, s.value, body, loc=s.loc)], state
        if isinstance(s, ir.Allocate):
            body, state = self.block(s.body, state)
            return ir.Allocate(s.buffer, body, s.init, loc=s.loc), state
        if _partitioned(s):
            # one T.Parallel nest: iterations are independent by contract (no iteration reads
            # what another writes), so it is one statement: fence before it, never inside
            pre, state = self._summary(s, state, waw=self.waw)
            return pre + [s], state
        if isinstance(s, (ir.For, ir.While)):
            return self.loop(s, state)
        if isinstance(s, ir.Attr) and s.key == "issue_ahead":
            # the pipeliner's copies into a stage that no statement of this iteration reads;
            # its own wait + barrier at the top of every iteration orders them (pipeline.py)
            return s, state
        if isinstance(s, ir.Attr) and s.key == "thread_group":
            if s.value[0] != "consumer":
                return s, state  # the producer only issues TMA (async proxy, mbarriers)
            body, end = self.block(s.body, state)
            barrier_id = s.value[3] if len(s.value) > 3 else 1
            return ir.Attr(s.key, s.value, _retarget(body, s.value[1], barrier_id),
                           loc=s.loc), end
        if isinstance(s, ir.Attr) and not _is_user_role(s):
            # other annotations (a tensor at a computed address, "tensor_address") scope
            # ordinary statements: the hazards inside are the block's own
            body, state = self.block(s.body, state)
            return ir.Attr(s.key, s.value, body, loc=s.loc), state
        if isinstance(s, ir.If) and _is_role_split(s):
            # a barrier over the whole block before the split if it needs one: the groups'
            # named barriers inside do not order them after the other group's accesses
            pre, state = self._summary(s, state)
            then, _ = self.stmt(s.then_body, State(unfenced=state.unfenced))
            other, _ = self.stmt(s.else_body, State(unfenced=state.unfenced))
            return pre + [ir.If(s.cond, then, other, loc=s.loc)], state
        if isinstance(s, ir.If):
            return self.branch(s, state)
        r, w, a = self.all_effects(s)
        pre = []
        if self.conflicts(state, r, w | a, self.waw):
            pre, state = self._fenced_barrier(state, a), State()
            if _is_async_proxy_reader(s) and not self.fence_all:
                # wgmma reads shared memory through the async proxy: order the writers'
                # generic stores before it (PTX wgmma.fence note; HARDWARE §11.1)
                pre.insert(0, _fence_proxy_async())
        return pre + [s], state.then(r, w, self.reads_pending)

    def _fenced_barrier(self, state, async_writes=()):
        """A barrier, after a proxy fence when wgmma may read (through the async proxy) what
        generic stores wrote since the last fence, or when the statement after it writes
        asynchronously (a TMA load overwriting what generic loads read). A barrier that only
        orders earlier reads before later generic stores (a tile the previous iteration's
        wgmma read, about to be overwritten) needs none: a completed wgmma has read its
        operands."""
        if self.fence_all and (state.unfenced or async_writes):
            return [_fence_proxy_async(), barrier()]
        return [barrier()]

    def _summary(self, s, state, waw=True):
        """Treat a region as one statement: fence before it if needed."""
        r, w, a = self.all_effects(s)
        pre = []
        if self.conflicts(state, r, w | a, waw):
            pre, state = self._fenced_barrier(state, a), State()
        return pre, state.then(r, w, self.reads_pending)

    def _inner_groups(self, region):
        """`region` (fenced as a whole, no block barrier inside) with the consumer thread
        groups in it synchronised among themselves (transform/warp_roles.py: the role that
        runs the tile operations)."""
        from ..ir.visitor import Mutator

        outer = self

        class Groups(Mutator):
            def visit_Attr(self, a):
                if a.key == "thread_group" and a.value[0] == "consumer":
                    new, _ = outer.stmt(a, State(unfenced=True))
                    return new
                return self.generic(a)

        return Groups().visit(region)

    def loop(self, s, state: State):
        cond = s.cond if isinstance(s, ir.While) else s.extent
        if not self.uniform(cond):
            pre, state = self._summary(s, state)
            return pre + [self._inner_groups(s)], state
        r, w, a = self.all_effects(s)
        pre = []
        if self.conflicts(state, r, w | a):
            pre, state = self._fenced_barrier(state, a), State()
        _, end1 = self.block(s.body, state)
        # iterations of one loop: hazards carried from the end of the body to its start
        # (a write followed by a write of another iteration is the same statement: no WAW)
        carried = State(end1.reads, end1.writes, end1.unfenced)
        saved, self.waw = self.waw, False
        try:
            body, end2 = self.block(s.body, state.union(carried))
        finally:
            self.waw = saved
        if isinstance(s, ir.For):
            new = ir.For(s.var, s.start, s.extent, s.kind, body, s.step, s.annotations,
                         loc=s.loc)
        else:
            new = ir.While(s.cond, body, loc=s.loc)
        return pre + [new], state.union(end2)

    def branch(self, s: ir.If, state: State):
        if not self.uniform(s.cond):
            pre, state = self._summary(s, state)
            return pre + [self._inner_groups(s)], state
        r, _ = self.effects(ir.Evaluate(s.cond))
        pre = []
        if self.conflicts(state, r, set()):
            pre, state = self._fenced_barrier(state), State()
        then, st1 = self.block(s.then_body, state)
        if s.else_body is not None:
            other, st2 = self.block(s.else_body, state)
        else:
            other, st2 = None, state
        return pre + [ir.If(s.cond, then, other, loc=s.loc)], st1.union(st2)


def _block_issues_tma_loads(body) -> bool:
    """Whether threads this pass synchronises issue TMA loads (async-proxy writes), outside a
    warp-specialised producer (whose loads the consumers' mbarriers and fences order)."""
    from ..ir.visitor import Visitor

    class Find(Visitor):
        found = False

        def visit_Attr(self, a):
            if not (a.key == "thread_group" and a.value[0] == "producer"):
                self.generic(a)

        def visit_Evaluate(self, e):
            if ir.calls_extern(e, "tl::tma_load"):
                self.found = True
            self.generic(e)

    finder = Find()
    finder.visit(body)
    return finder.found


def insert_barriers(kernel: ir.Kernel, ctx) -> ir.Kernel:
    from .pass_config import PassConfigKey

    if ctx.flag(PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC):
        return kernel  # the user places T.sync_threads() themselves
    body = kernel.body
    async_readers = ctx.uses_wgmma or any_node(
        body, lambda s: ir.calls_extern(s, "tl::tma_load"))
    if async_readers and not kernel.attr("warp_specialized") and any_node(
            body, lambda s: ir.calls_extern(s, "tl::mbarrier_arrive")):
        body = _fence_user_arrivals(body)
    body, _ = SyncInserter(ctx, body).block(body, State())
    return ir.with_fields(kernel, body=body)


def _fence_user_arrivals(body):
    """With user-synchronised roles, an mbarrier arrival may order generic shared-memory
    accesses before the async proxy's (a wgmma reading what a role stored; a TMA load
    overwriting what a role read): a `fence.proxy.async` precedes each arrival, so the
    arriving thread's accesses are ordered with the async proxy, not only with the waiting
    threads."""
    from ..ir.visitor import Mutator

    class Fence(Mutator):
        def visit_Evaluate(self, e):
            if ir.calls_extern(e, "tl::mbarrier_arrive"):
                return ir.Seq((_fence_proxy_async(), e))
            return e

    return Fence().visit(body)
