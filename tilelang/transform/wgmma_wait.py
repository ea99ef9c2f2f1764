"""Wait for asynchronous wgmma gemms where their results are needed (sm_90a).

Expects: tile IR after pipelining (Gemm nodes still present, their backend in
`ctx.gemm_info`). A wgmma gemm with `wg_wait=-1` is issued and committed as one wgmma group
without waiting (`T.gemm(..., wg_wait=-1)`, or the order/stage schedule of warp_specialize/__init__.py);
one with `wg_wait=n >= 0` waits until at most n groups are in flight; `T.wait_wgmma(n)` does
the same on its own.

Guarantees: before any statement that touches the accumulator of a gemm still in flight,
writes its register A operand, writes shared memory that may hold a tile it reads (a tile
whose lifetime overlaps those of the gemm's tiles has its own bytes; in the gemm's own
multi-buffered tile, a pipeline stage other than those the gemm reads is other memory),
synchronises threads while it still reads shared memory, or calls something unknown, a
`tl::wgmma_wait_in_place<n>` with the largest n that completes that gemm (groups complete in
commit order), followed by `tl::wgmma_fence_operands` on the accumulators it completes and
no gemm still in flight writes, so the compiler cannot move their reads above the wait
(`wgmma_wait_in_place`: ptxas would otherwise hoist the wait above the independent work
meant to overlap the gemm). Back-to-back gemms accumulating into the same registers need no
wait between them. Mbarrier arrivals marked ("releases", tiles) (the consumer handing a
shared tile back to the TMA producer) move down their statement list to just after the wait
that completes the gemms reading those tiles, at the latest to its end. Other arrivals,
barriers and TMA loads wait for every gemm reading shared memory, in a branch as at the top
level. Loops are analysed to a
fixed point (a group issued late in one iteration is still in flight early in the next);
branches join conservatively; nothing is left in flight at the end of a thread-group region
or of the kernel. Everything else is unchanged; without wg_wait=-1 gemms this pass only
proves that nothing needs a wait.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import any_stmt, children
from .analysis.buffer_use import touched_buffers, written_buffers
from .analysis.device_ops import WGMMA_WAIT, WGMMA_WAIT_PREFIX, Effect, has_effect
from .analysis.scopes import SHARED

VOID = ir.DType("void")


class _Group:
    """A committed wgmma group: its gemm, how many groups are known committed after it, the
    buffers it reads and writes until it completes, and whether it may have been issued in an
    earlier iteration of an enclosing loop (its index expressions then name other values)."""

    __slots__ = ("gemm", "after", "reads", "writes", "smem", "carried")

    def __init__(self, gemm, after=0, carried=False):
        self.gemm = gemm
        self.after = after
        self.carried = carried
        self.writes = {gemm.C.buffer}
        self.reads = {gemm.A.buffer, gemm.B.buffer, gemm.C.buffer}
        self.smem = {b for b in (gemm.A.buffer, gemm.B.buffer) if b.scope in SHARED}


class _State:
    """The groups possibly in flight, each with the fewest groups committed after it on any
    path (so `wait<after>` completes it on every path)."""

    def __init__(self, groups=None):
        self.groups = dict(groups or {})  # gemm -> _Group

    def copy(self, carried=False):
        return _State({g: _Group(x.gemm, x.after, x.carried or carried)
                       for g, x in self.groups.items()})

    def join(self, other):
        out = self.copy()
        for g, x in other.groups.items():
            if g in out.groups:
                out.groups[g].after = min(out.groups[g].after, x.after)
                out.groups[g].carried |= x.carried
            else:
                out.groups[g] = _Group(x.gemm, x.after, x.carried)
        return out

    def key(self):
        return {(id(g), x.after, x.carried) for g, x in self.groups.items()}

    def commit(self, gemm):
        for x in self.groups.values():
            x.after += 1
        # an instance of the same gemm from an earlier iteration still in flight reads other
        # stages: the group answers for both
        self.groups[gemm] = _Group(gemm, carried=gemm in self.groups)

    def wait(self, n):
        """`wgmma.wait_group n`: the groups with at least n younger ones are complete."""
        done = [x for x in self.groups.values() if x.after >= n]
        for x in done:
            del self.groups[x.gemm]
        return done


class _Placer:
    def __init__(self, ctx, kernel):
        from .analysis.shared_memory import Liveness, fresh_buffers

        self.ctx = ctx
        self.inserted = 0
        self.async_stmts: dict = {}  # statement -> holds_async(statement)
        self.stmt_buffers: dict = {}  # statement -> buffers_of(statement)
        self.liveness = Liveness(fresh_buffers(ctx))
        self.liveness.walk(kernel.body)
        self.liveness.finish()

    # ---- what a statement needs finished -------------------------------------------------
    def blockers(self, stmt, state):
        """The in-flight groups `stmt` must wait for."""
        if not state.groups:
            return []
        if isinstance(stmt, ir.Gemm) and self.ctx.is_wgmma(stmt):
            reads = {stmt.A.buffer, stmt.B.buffer, stmt.C.buffer}
            out = []
            for x in state.groups.values():
                chained = x.writes == {stmt.C.buffer} and stmt.C.buffer not in \
                    (stmt.A.buffer, stmt.B.buffer) and x.gemm.C.buffer not in \
                    (x.gemm.A.buffer, x.gemm.B.buffer)
                if chained:
                    continue  # wgmmas accumulating into the same registers chain in order
                if (reads & x.writes) or (stmt.C.buffer in x.reads):
                    out.append(x)
            return out
        name = ir.extern_name(stmt.value) if isinstance(stmt, ir.Evaluate) else None
        if name is not None:
            if has_effect(name, Effect.QUIET):
                return []
            if has_effect(name, Effect.PUBLISHES):
                return [x for x in state.groups.values() if x.smem]
        touched, written, opaque = self.buffers_of(stmt)
        shared_written = {b for b in written if b.scope in SHARED}
        out = []
        for x in state.groups.values():
            if touched & x.writes or (written - shared_written) & x.reads or \
                    (shared_written and x.smem and not self.misses(stmt, shared_written, x)):
                out.append(x)
            elif opaque:
                out.append(x)
        return out

    def buffers_of(self, stmt):
        """(buffers `stmt` names, buffers it writes, whether it calls a header function this
        pass knows nothing about), remembered: seq() asks of a loop body's statements on
        every pass of the loop's fixed point."""
        got = self.stmt_buffers.get(stmt)
        if got is None:
            got = self.stmt_buffers[stmt] = \
                touched_buffers(stmt), written_buffers(stmt), _opaque_call(stmt)
        return got

    def misses(self, stmt, tiles, group) -> bool:
        """Whether `stmt`'s writes of shared `tiles` surely miss what `group` reads: a tile
        the gemm reads only in other pipeline stages than `stmt` writes (both index the stage
        as (e + c) % S with the same e; the group issued in this iteration), or one whose
        lifetime overlaps that of every tile the gemm reads, so that shared-memory planning
        gives them distinct bytes (plan_shared.py's liveness, computed here on this IR)."""
        for b in tiles:
            if b in group.smem:
                if group.carried or not _other_stages(_write_stages(stmt, b),
                                                      _read_stages(group.gemm, b)):
                    return False
            elif not all(self.live_together(b, c) for c in group.smem):
                return False
        return True

    def live_together(self, a, b) -> bool:
        first, last = self.liveness.first, self.liveness.last
        if a not in first or b not in first:
            return False
        return first[a] <= last[b] and first[b] <= last[a]

    def wait_stmts(self, groups, state):
        """The wait that completes `groups` (and the fences of what it completes)."""
        n = min(x.after for x in groups)
        done = state.wait(n)
        self.inserted += 1
        return [_extern(f"tl::wgmma_wait_in_place<{n}>")] + self.fences(done, state)

    def fences(self, done, state=None):
        """Fences on the accumulators `done` completed, except those a gemm still in flight
        (in `state`) accumulates into: nothing may read them yet, and the fence would touch
        registers the tensor cores are writing."""
        busy = {x.gemm.C.buffer for x in state.groups.values()} if state is not None else set()
        out = []
        for c in sorted({x.gemm.C.buffer for x in done} - busy, key=lambda b: b.name):
            reg = self.ctx.register_of(c)
            out.append(_extern("tl::wgmma_fence_operands", reg, ir.const(reg.shape[0])))
        return out

    # ---- walking ------------------------------------------------------------------------
    def seq(self, stmts, state):
        out, pending = [], []  # pending: deferred releases

        def flush_ready():
            keep = []
            for rel, tiles in pending:
                if any(x.smem & tiles for x in state.groups.values()):
                    keep.append((rel, tiles))
                else:
                    out.append(rel)
            pending[:] = keep

        for s in stmts:
            tiles = _releases(s)
            if tiles is not None:
                pending.append((s, tiles))
                flush_ready()
                continue
            if not isinstance(s, ir.Seq):
                blocking = self.blockers(s if not self.interesting(s) or
                                         isinstance(s, (ir.Gemm, ir.Evaluate)) else _head(s),
                                         state)
                if blocking:
                    out.extend(self.wait_stmts(blocking, state))
                    flush_ready()  # a release may go right after the wait, before `s`
            before = len(state.groups)
            new, state = self.stmt(s, state)
            out.extend(new)
            if pending and len(state.groups) < before:
                flush_ready()
        if pending:
            tiles = set().union(*(t for _, t in pending))
            blocking = [x for x in state.groups.values() if x.smem & tiles]
            if blocking:
                out.extend(self.wait_stmts(blocking, state))
            out.extend(rel for rel, _ in pending)
        return out, state

    def block(self, s, state):
        items, state = self.seq(list(s.stmts) if isinstance(s, ir.Seq) else [s], state)
        return (items[0] if len(items) == 1 else ir.Seq(tuple(items))), state

    def stmt(self, s, state):
        """(statements replacing s, state after); seq() has already waited for what `_head(s)`
        needs."""
        if isinstance(s, ir.Seq):
            return self.seq(list(s.stmts), state)
        if not self.interesting(s):
            return [s], state
        if isinstance(s, ir.Gemm):
            pre = []
            state.commit(s)
            if s.wg_wait >= 0:  # the template waits itself
                pre.append(s)
                done = [x for x in state.wait(s.wg_wait) if x.gemm is not s]
                return pre + self.fences(done, state), state
            return pre + [s], state
        if isinstance(s, ir.Evaluate):  # T.wait_wgmma(n)
            n = int(WGMMA_WAIT.match(s.value.args[0]).group(1))
            return [s] + self.fences(state.wait(n), state), state
        if isinstance(s, ir.LetStmt):
            body, state = self.block(s.body, state)
            return [ir.LetStmt(s.var, s.value, body, loc=s.loc)], state
        if isinstance(s, ir.Attr):
            body, state = self.block(s.body, state)
            if s.key == "thread_group":
                body, state = self.drain(body, state)
            return [ir.Attr(s.key, s.value, body, loc=s.loc)], state
        if isinstance(s, ir.Allocate):
            body, state = self.block(s.body, state)
            return [ir.Allocate(s.buffer, body, s.init, loc=s.loc)], state
        if isinstance(s, ir.If):
            then, st1 = self.block(s.then_body, state.copy())
            if s.else_body is not None:
                other, st2 = self.block(s.else_body, state.copy())
            else:
                other, st2 = None, state
            return [ir.If(s.cond, then, other, loc=s.loc)], st1.join(st2)
        if isinstance(s, (ir.For, ir.While)):
            return self.loop(s, state)
        raise AssertionError(type(s).__name__)

    def loop(self, s, state):
        entry = state
        for _ in range(8):
            saved = self.inserted
            _, end = self.block(s.body, entry.copy(carried=True))
            self.inserted = saved
            nxt = state.join(end)
            if nxt.key() == entry.key():
                break
            entry = nxt
        else:  # no fixed point: start every iteration with nothing in flight
            body, end = self.block(s.body, state.copy(carried=True))
            body, _ = self.drain(body, end)
            entry = state
        body, end = self.block(s.body, entry.copy(carried=True))
        if isinstance(s, ir.For):
            new = ir.For(s.var, s.start, s.extent, s.kind, body, s.step, s.annotations, loc=s.loc)
        else:
            new = ir.While(s.cond, body, loc=s.loc)
        # past the loop its variable no longer names the iteration the groups came from
        return [new], entry.join(end).copy(carried=True)

    def drain(self, body, state):
        """Nothing in flight past the end of `body`."""
        if not state.groups:
            return body, state
        tail = self.wait_stmts(list(state.groups.values()), state)
        return ir.Seq((body,) + tuple(tail)), state

    def interesting(self, s) -> bool:
        """Statements holding an async-relevant node need structural walking."""
        if isinstance(s, ir.Gemm):
            return self.ctx.is_wgmma(s)
        if isinstance(s, ir.Evaluate):
            return bool(WGMMA_WAIT.match(ir.extern_name(s.value) or ""))
        if isinstance(s, (ir.LetStmt, ir.Attr, ir.Allocate, ir.If, ir.For, ir.While)):
            # a publication nested in a branch (a stage hand-back from the second iteration
            # on) is checked where it is, like one at the top level
            return self.holds_async(s)
        return False

    def holds_async(self, s) -> bool:
        """Whether statement `s` or anything in it is a wgmma, a wait, a publication or a
        release. Remembered per statement: seq() asks of every compound statement at every
        depth, and loops are walked until their state settles."""
        known = self.async_stmts.get(s)
        if known is not None:
            return known
        found, stack = _async_relevant(self.ctx, s), list(children(s))
        while stack and not found:
            n = stack.pop()
            if n is None:
                continue
            if isinstance(n, ir.Stmt):
                found = self.holds_async(n)
            elif _async_relevant(self.ctx, n):
                found = True
            else:
                stack.extend(children(n))
        self.async_stmts[s] = found
        return found


def _async_relevant(ctx, n) -> bool:
    if isinstance(n, ir.Gemm):
        return ctx.is_wgmma(n)
    name = ir.extern_name(n)
    return name is not None and bool(WGMMA_WAIT.match(n.args[0])
                                     or has_effect(n.args[0], Effect.PUBLISHES)
                                     or dict(n.attrs).get("releases"))


def _head(s):
    """What a compound statement does before anything nested in it runs: the value of a let,
    the condition of a branch or a while loop, the bounds of a for loop."""
    if isinstance(s, ir.LetStmt):
        return ir.Evaluate(s.value)
    if isinstance(s, (ir.If, ir.While)):
        return ir.Evaluate(s.cond)
    if isinstance(s, ir.For):
        return ir.Evaluate(ir.binary("add", s.start, s.extent))
    return ir.Evaluate(ir.const(0))


_extern = ir.extern_stmt


def _releases(s):
    if isinstance(s, ir.Evaluate) and isinstance(s.value, ir.Call):
        tiles = dict(s.value.attrs).get("releases")
        if tiles is not None:
            return set(tiles)
    return None


def _write_stages(stmt, buf):
    """The leading index of every write of `buf` in `stmt` (None: a write of it as a whole)."""
    from ..ir.visitor import collect

    out = []
    for n in collect(stmt, lambda n: isinstance(n, (ir.Store, ir.Copy, ir.Fill, ir.Gemm,
                                                    ir.Reduce, ir.CumSum, ir.AtomicTile,
                                                    ir.TmaCopy, ir.Allocate))):
        if isinstance(n, ir.Store):
            if n.buffer is buf:
                out.append(n.indices[0])
        elif isinstance(n, ir.Copy) and n.dst.buffer is buf:
            start, extent = n.dst.region[0]
            if ir.int_value(extent) != 1:
                return None
            out.append(start)
        elif not isinstance(n, ir.Allocate) and buf in written_buffers(n):
            return None
    return out


def _read_stages(gemm, buf):
    out = []
    for op in (gemm.A, gemm.B):
        if op.buffer is buf:
            start, extent = op.region[0]
            if ir.int_value(extent) != 1:
                return None
            out.append(start)
    return out


def _other_stages(writes, reads) -> bool:
    """Whether every stage index in `writes` differs from every one in `reads`: both
    (e + c) % S for one S and expressions e + c differing by a constant that S does not
    divide."""
    from ..arith import Analyzer

    if writes is None or reads is None:
        return False
    analyzer = Analyzer()
    for w in writes:
        for r in reads:
            if not all(isinstance(x, ir.Binary) and x.op == "floormod" for x in (w, r)):
                return False
            S = ir.int_value(w.b)
            if S is None or ir.int_value(r.b) != S:
                return False
            d = ir.int_value(analyzer.simplify(ir.binary("sub", w.a, r.a)))
            if d is None or d % S == 0:
                return False
    return True


def _opaque_call(stmt) -> bool:
    """A call_extern this pass knows nothing about (it may touch anything)."""
    from ..ir.visitor import collect

    for c in collect(stmt, ir.is_extern_call):
        name = ir.extern_name(c) or ""
        if not has_effect(name, Effect.QUIET | Effect.PUBLISHES) and \
                not name.startswith(WGMMA_WAIT_PREFIX):
            return True
    return False


def place_wgmma_waits(kernel: ir.Kernel, ctx) -> ir.Kernel:
    if not ctx.target.is_hopper or not ctx.gemm_info:
        return kernel
    if not any_stmt(kernel.body, lambda n: isinstance(n, ir.Gemm) and n.wg_wait != 0):
        return kernel  # every gemm waits for itself: nothing can be in flight
    placer = _Placer(ctx, kernel)
    body, state = placer.block(kernel.body, _State())
    body, _ = placer.drain(body, state)
    if placer.inserted:
        ctx.note(f"{placer.inserted} wgmma wait(s) placed where asynchronous results are used")
    return ir.with_fields(kernel, body=body)
