"""Insert `__syncthreads()` where threads exchange data through shared memory.

Expects: thread IR after shared-memory planning (`ctx.shared_plan`: flat buffer -> byte
offset, buffers may overlap when their lifetimes do not). Guarantees: between a write of a
shared byte range and a later read or write of an overlapping range (and between a read and a
later write), every thread passes a barrier — in straight-line code, across loop iterations
(the body is analysed twice, the second time starting from its own end state), and around
branches (a loop touching what was accessed before it gets a barrier before it, unless the
barriers its body needs anyway already come first: then it is entered without one). Barriers
go only where every thread reaches them: never inside a branch or loop
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
what they wrote; a barrier that only orders earlier reads before later stores has no fence,
and an inserted fence (this pass's or the pipeliner's) is dropped where a later fence +
barrier covers it before any async-proxy operation, arrival or exit (_drop_covered_fences),
and everywhere in a kernel in which nothing touches shared memory through the async proxy
(no wgmma, TMA or bulk copy, no call that could hide one: _drop_inserted_fences). In a loop's
second pass (the hazards its iterations carry) a nested loop counts as one statement: its
writes after the same writes of the previous iteration are no WAW hazard, as for any other
statement of the body.
The user's own block-wide `T.sync_threads()` inside a consumer group becomes the group's
named barrier too (the producer warpgroup never reaches it). In a kernel the user synchronises with mbarriers (not the automatic warp specialisation)
that uses wgmma or TMA loads, `fence.proxy.async` orders each thread's generic shared-memory
accesses with the async proxy (the wgmma that reads what it wrote, the TMA load that overwrites
what it read) where the thread touched memory the async proxy also touches since its last
fence: before such an mbarrier arrival, and before the barriers added here (dropped where the
thread touched none); and after a wait for other threads' cp.async arrivals (_ProxyFences).
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import any_node, collect
from .analysis.device_ops import (Effect, has_effect, inserted_proxy_fence,
                                   is_inserted_proxy_fence)
from .analysis.scopes import SHARED
from .analysis.shared_access import SharedAccesses, call_buffers

VOID = ir.DType("void")


def _fence_proxy_async() -> ir.Stmt:
    return inserted_proxy_fence()


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


def _syncs(stmts) -> int:
    """Barriers and proxy fences in `stmts` (statically: a loop's counted once)."""
    return sum(len(collect(x, lambda n: isinstance(n, ir.Evaluate) and (
        is_barrier(n) or ir.calls_extern(n, "tl::fence_proxy_async")))) for x in stmts)


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
        # (self.waw: in an enclosing loop's second pass a nested loop is one more statement of
        # the body, its writes after the same writes of the previous iteration no WAW hazard:
        # the mma emitter's stmatrix nest got a block barrier per (i, j) tile, 20 per block)
        if not self.conflicts(state, r, w | a, self.waw):
            return self._iterations(s, state)
        # the loop touches what was accessed before it: a barrier before the loop, unless
        # the barriers its body needs anyway (for hazards carried between iterations)
        # already come before each conflicting access (a stage loop whose tile store waits
        # for the previous stage's readers: its barrier serves the first iteration too)
        entered, entered_state = self._iterations(s, state)
        pre, after = self._fenced_barrier(state, a), State()
        fenced, fenced_state = self._iterations(s, after)
        if _syncs(entered) <= _syncs(fenced):
            return entered, entered_state
        return pre + fenced, fenced_state

    def _iterations(self, s, state: State):
        """([the loop with the barriers its body needs]), the state after it, entered in
        `state`."""
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
        return [new], state.union(end2)

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
    user_arrivals = async_readers and not kernel.attr("warp_specialized") and any_node(
        body, lambda s: ir.calls_extern(s, "tl::mbarrier_arrive"))
    body, _ = SyncInserter(ctx, body).block(body, State())
    # (H200, against the previous rules, same call: sparse MLA backward 151.5 -> 146.6 µs,
    # attention-sink backward 42.7 -> 40.9, GQA backward varlen 30.6 -> 28.7, with the
    # staging swizzle of layout_inference)
    body = _drop_covered_fences(body)
    async_bufs, opaque = _async_proxy_memory(body)
    if not async_bufs and not opaque:
        body = _drop_inserted_fences(body)
    if user_arrivals:
        body = _ProxyFences(ctx, body).run(body)
    return ir.with_fields(kernel, body=body)


# extern calls that access shared memory through the async proxy (wgmma operands, TMA and bulk
# copies); the shared buffers their pointers name are the memory proxy fences are about
_ASYNC_PROXY_PREFIXES = ("tl::wgmma", "tl::tma", "tl::bulk")


def _async_proxy_memory(body):
    """(shared buffers the async proxy touches in `body`, whether a call hides what it
    touches): the operands of wgmma, TMA and bulk copies; opaque when an extern call has no
    name, an async-proxy call an operand pointer that names no buffer, or a device function
    of the user's own a shared tile."""
    bufs, opaque = set(), False
    for n in collect(body, ir.is_extern_call):
        name = ir.extern_name(n)
        if name is None:
            opaque = True
            continue
        shared = [b for b in call_buffers(n) if b is not None and b.scope in SHARED]
        if name.startswith(_ASYNC_PROXY_PREFIXES):
            if not shared and any(isinstance(a, ir.Call) or getattr(a, "dtype", None) ==
                                  ir.DType("handle") for a in n.args[1:]):
                opaque = True  # an operand pointer that names no buffer
            bufs.update(shared)
        elif not name.startswith("tl::") and shared:
            opaque = True  # the user's own device function sees a shared tile
    return bufs, opaque


def _drop_inserted_fences(body):
    """`body` without the proxy fences passes inserted (the pipeliner's after its cp.async
    wait): for a kernel in which nothing reads or writes shared memory through the async
    proxy they order nothing, and each costs a MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S per
    iteration (the mma-intrinsics GEMM, whose operands only ldmatrix reads)."""
    from ..ir.visitor import Mutator

    class Drop(Mutator):
        def visit_Seq(self, s):
            stmts = [self.visit(x) for x in s.stmts]
            out = tuple(x for x in stmts if not is_inserted_proxy_fence(x))
            if len(out) == len(s.stmts) and all(a is b for a, b in zip(out, s.stmts)):
                return s
            return ir.Seq(out) if out else ir.Seq(())

    return Drop().visit(body)


class _ProxyFences:
    """Proxy fences of a kernel whose roles the user synchronises with mbarriers.

    A `fence.proxy.async` orders the executing thread's earlier generic-proxy accesses of
    shared memory with later async-proxy accesses (a wgmma reading what the thread stored, a
    TMA load overwriting what it read) of any thread that synchronises with it afterwards.
    Walking each thread's program order, a thread is *dirty* from a generic access of memory
    the async proxy touches anywhere in the kernel (overlap by the planned byte ranges) until
    its next fence; also after `tl::cp_async_wait` once it issued cp.async into such memory
    (the copies complete there). Then:
      * an mbarrier arrival (also a cp.async one) is preceded by a fence when the thread is
        dirty there (before: every plain arrival was, a MEMBAR + proxy fence each in the
        roles' hot loops);
      * a wait on an mbarrier that cp.async arrivals complete (`T.cp_async_barrier_noinc`) is
        followed by a fence: the copies are other threads' generic writes that none of them
        can fence, and the waiting thread's wgmma may read them next (CUTLASS's sm90
        cp.async -> wgmma mainloops and the reference issue none there; dropping it timed
        the same on an H200, 2026-11-27, so the fence stays);
      * a fence this pass's barrier insertion put before a barrier is dropped when the
        thread is clean there on every path (the fences the program wrote stay).
    Loops are walked until the state at their head is stable (the union of entry and
    back edge; with break/continue, every state inside the body counts). Kernels with an
    extern call or pointer this cannot see through (a callee outside tilelang's headers
    given a shared pointer, or an async-proxy call whose operand is not a named buffer)
    keep a fence before every arrival and every inserted one."""

    def __init__(self, ctx, body):
        self.trace = None  # statement-entry states of a loop body with break/continue
        self.acc = SharedAccesses(ctx)
        self.async_bufs, self.opaque = _async_proxy_memory(body)
        self.cp_async_bars = {b for n in collect(body, lambda n: ir.extern_name(n) ==
                                                 "tl::mbarrier_cp_async_arrive_noinc")
                              for b in call_buffers(n) if b is not None}


    def _touches_async(self, buffers) -> bool:
        return any(self.acc.overlap(b, a) for b in buffers for a in self.async_bufs)

    # ---- the walk: (statement, (dirty, cp.async pending)) -> (statement, state) ------------
    def run(self, body):
        if self.opaque:
            return _fence_every_arrival(body)
        new, _ = self.stmt(body, (False, False))
        return new

    def seq(self, stmts, state):
        out, i = [], 0
        while i < len(stmts):
            s = stmts[i]
            if (is_inserted_proxy_fence(s) and i + 1 < len(stmts)
                    and _is_barrier_call(stmts[i + 1])):
                if state[0]:
                    out.append(s)
                    state = (False, state[1])
                i += 1
                continue
            new, state = self.stmt(s, state)
            out.append(new)
            i += 1
        return out, state

    def stmt(self, s, state):
        if self.trace is not None:
            self.trace.append(state)  # a break/continue may leave the loop from here
        if isinstance(s, ir.Seq):
            items, state = self.seq(s.stmts, state)
            return ir.Seq(tuple(items)), state
        if isinstance(s, (ir.For, ir.While)):
            return self.loop(s, state)
        if isinstance(s, ir.If):
            then, st1 = self.stmt(s.then_body, state)
            other, st2 = (self.stmt(s.else_body, state) if s.else_body is not None
                          else (None, state))
            return ir.If(s.cond, then, other, loc=s.loc), _join(st1, st2)
        if isinstance(s, (ir.LetStmt, ir.Allocate, ir.Attr)):
            dirty = state[0]
            if isinstance(s, ir.LetStmt):
                r, w = self.acc.effects(s.value)
                dirty = dirty or self._touches_async(r | w)
            body, state = self.stmt(s.body, (dirty, state[1]))
            return ir.with_fields(s, body=body), state
        return self.leaf(s, state)

    def loop(self, s, state):
        has_exit = any_node(s.body, lambda n: isinstance(n, (ir.Break, ir.Continue)))
        head = state
        while True:
            saved, self.trace = self.trace, ([] if has_exit else None)
            try:
                body, end = self.stmt(s.body, head)
                inside = self.trace
            finally:
                self.trace = saved
            if inside:
                for st in inside:
                    end = _join(end, st)
            nxt = _join(state, end)
            if nxt == head:
                break
            head = nxt
        return ir.with_fields(s, body=body), _join(state, end)

    def leaf(self, s, state):
        dirty, pending = state
        name = ir.extern_name(s.value) if isinstance(s, ir.Evaluate) else None
        if name is not None:
            if name == "tl::fence_proxy_async":
                return s, (False, pending)
            if name.startswith(("tl::mbarrier_arrive", "tl::mbarrier_cp_async_arrive")):
                if dirty:
                    return ir.Seq((_fence_proxy_async(), s)), (False, pending)
                return s, state
            if name.startswith("tl::cp_async_wait"):
                return s, (dirty or pending, pending)
            if name.startswith(("tl::mbarrier_wait", "tl::mbarrier_try_wait")):
                bar = call_buffers(s.value)[0]
                waits_cp_async = bar is not None and any(
                    self.acc.overlap(bar, b) or bar is b for b in self.cp_async_bars)
                if waits_cp_async:
                    # cp.async writes that other threads' arrivals completed: no writer can
                    # fence them, so the waiting thread does before its wgmma reads them
                    return ir.Seq((s, _fence_proxy_async())), (False, pending)
                return s, state
            if name.startswith(_ASYNC_PROXY_PREFIXES):
                return s, state
            if name.startswith("tl::cp_async") and name != "tl::cp_async_commit":
                dst = call_buffers(s.value)[0]
                if dst is not None and self._touches_async([dst]):
                    pending = True
                return s, (dirty, pending)
        r, w, a = self.acc.all_effects(s)
        if self._touches_async(a):
            pending = True
        return s, (dirty or self._touches_async(r | w), pending)


def _drop_covered_fences(body):
    """Drop a fence this pass put before a barrier when, in the same statement sequence, every
    thread reaches another fence + barrier before any async-proxy operation, mbarrier arrival
    or early exit: that later fence orders the same accesses (all of them precede it in each
    thread's program order) before anything of the async proxy can touch them. A two-stage
    cp.async pipeline feeding wgmma with operands the threads compute (a dequantised tile)
    fenced after its copies' wait and again after the computed stores: one MEMBAR + proxy
    fence per iteration too many. A call of the user's own given a shared pointer ends the
    search (it may touch anything)."""
    from ..ir.visitor import Mutator

    class Drop(Mutator):
        def visit_Seq(self, s):
            stmts = [self.visit(x) for x in s.stmts]
            out = []
            for i, x in enumerate(stmts):
                if (is_inserted_proxy_fence(x) and i + 1 < len(stmts)
                        and _is_barrier_call(stmts[i + 1]) and _fence_follows(stmts[i + 2:])):
                    continue
                out.append(x)
            if len(out) == len(s.stmts) and all(a is b for a, b in zip(out, s.stmts)):
                return s
            return ir.Seq(tuple(out))

    return Drop().visit(body)


def _fence_follows(stmts) -> bool:
    """Whether `stmts` (a continuation, entered through the bodies of allocations, lets and
    annotations that open it) reach a fence + barrier pair before anything that lets the
    async proxy or another role see shared memory."""
    for i, x in enumerate(stmts):
        if (isinstance(x, ir.Evaluate) and ir.extern_name(x.value) == "tl::fence_proxy_async"
                and i + 1 < len(stmts) and _is_barrier_call(stmts[i + 1])):
            return True
        if isinstance(x, (ir.Allocate, ir.LetStmt)) or (
                isinstance(x, ir.Attr) and x.key != "thread_group" and not _is_user_role(x)):
            if isinstance(x, ir.LetStmt) and _publishes(x.value):
                return False
            inner = x.body.stmts if isinstance(x.body, ir.Seq) else (x.body,)
            return _fence_follows(list(inner) + list(stmts[i + 1:]))
        if _publishes(x):
            return False
    return False


def _publishes(node) -> bool:
    """Whether `node` holds an async-proxy operation, an mbarrier arrival, a role split, an
    early exit, or a call outside tilelang's headers given a shared pointer."""
    def bad(n):
        if isinstance(n, (ir.Break, ir.Continue)):
            return True
        if isinstance(n, ir.Attr) and (n.key == "thread_group" or _is_user_role(n)):
            return True
        name = ir.extern_name(n)
        if name is None:
            return False
        if name.startswith(_ASYNC_PROXY_PREFIXES + ("tl::mbarrier_arrive",
                                                    "tl::mbarrier_cp_async_arrive")):
            return True
        return not name.startswith("tl::") and any(
            b is not None and b.scope in SHARED for b in call_buffers(n))

    return any_node(node, bad)


def _join(a, b):
    return (a[0] or b[0], a[1] or b[1])


def _is_barrier_call(s) -> bool:
    return is_barrier(s) or ir.calls_extern(s, "tl::named_barrier_sync")


def _fence_every_arrival(body):
    """A `fence.proxy.async` before each mbarrier arrival (what _ProxyFences does when it
    cannot see which memory the async proxy touches)."""
    from ..ir.visitor import Mutator

    class Fence(Mutator):
        def visit_Evaluate(self, e):
            if ir.calls_extern(e, "tl::mbarrier_arrive"):
                return ir.Seq((_fence_proxy_async(), e))
            return e

    return Fence().visit(body)
