"""Software pipelining of `T.Pipelined` loops with cp.async (sm_80+).

Expects: tile IR after layout inference; global→shared `Copy` nodes still present.
Producers are those copies and gather nests (`T.Parallel` loads of global data into a shared
tile that are not a window, e.g. an im2col tile; see transform/partition_parallel/async_gather.py).

Guarantees: a pipelined loop of n iterations with S = num_stages >= 2 whose body contains
global→shared copies that depend only on the loop variable and loop-invariant values becomes

    for s in [0, S-1):  if s < n: copies(s) -> stage s;  commit        # prologue
    for k in [0, n):
        wait_group(S-2); __syncthreads()      # stage k%S has landed and every thread is done
                                              # with the stage about to be overwritten
        if k + S - 1 < n: copies(k + S - 1) -> stage (k+S-1) % S
        commit                                # always, so group counts stay uniform
        rest of the body, reading stage k % S
    wait_group(0)

With two stages the loop issues first and waits after (`__syncthreads(); copies(k + 1);
commit; wait_group(1); __syncthreads(); rest`), so stage k + 1 is in flight while stage k is
waited for (one barrier more per iteration).

When the stage tiles are read only by copies into registers at the top of the body (a
GEMV's `T.copy(A_shared, A_frag)`), a stage is free as soon as those copies are done: S
iterations are issued before the loop, each iteration waits with cp_async_wait<S-1>, and the
load of iteration k + S goes into stage k % S right after the copies (insert_sync puts the
barrier before it), so S loads are in flight while the rest of the body computes
(`_early_release`; gemv_alloc_reducer 19.9 -> 16.1 µs on an H200).

A body that is one branch on a block-uniform condition after lets (`if BlockMask[by, bx, k]:
copies; gemm`, analysis/uniform.py) is pipelined the same way with the condition evaluated
for each iteration it touches: the copies issued for iteration j run under `if cond(j)`, the
rest of the body under `if cond(k)`; a skipped iteration leaves its stage and commit group
empty, so the group counts and the stage of every iteration are those of the unguarded loop.

Each copy destination gets a leading stage dimension (`S` buffers in one allocation). Issued
gather nests carry the annotation ("async_gather", True): partition_parallel lowers them to
cp.async with zero-fill where it can prove the vector width, else to synchronous stores, which
are just as correct at that point of the schedule (the barrier after the next wait orders
them). The results are those of the serial loop (SEMANTICS §7).

With num_stages = 1 and tiles first read at different statements (FlashAttention's K and V),
each tile keeps one buffer and its load for the next iteration is issued after its last
reader (`_single_stage`), under a block-uniform branch too. Other loops with num_stages <= 1,
loops without such copies, or whose copy destinations are used outside the loop run as
serial loops with synchronous copies.
"""

from __future__ import annotations

from .. import layout as L
from ..ir import nodes as ir
from ..ir.thread_range import has_user_roles
from ..ir.visitor import Mutator, any_node, collect, substitute
from .analysis.buffer_use import uses_buffer, whole_buffer_user, written_buffers
from .analysis.device_ops import inserted_proxy_fence
from .analysis.gather import ASYNC_GATHER, gather_parts
from .analysis.loop_items import (Rebuffer, copy_lets_needed, flatten, gather_exprs,
                                  gather_producer, lets_needed, rebuild, stack_layout)
from .analysis.scopes import MEMORY, SHARED, is_global_to_shared
from .analysis.uniform import uniform_fragments, uniform_guard
from .pass_config import PassConfigKey

VOID = ir.DType("void")


_call = ir.extern_stmt


class Pipeliner:
    def __init__(self, ctx):
        self.ctx = ctx

    def run(self, loop: ir.For, outside) -> ir.Stmt:
        stages = int(loop.annotation("num_stages", 0) or 0)
        serial = ir.For(loop.var, loop.start, loop.extent, "serial", loop.body, loop.step,
                        loop.annotations, loc=loop.loc)
        if stages < 1 or loop.step != 1:
            return serial
        written = written_buffers(loop.body)
        guard = uniform_guard(loop.body, self.ctx.kernel, written,
                              uniform_fragments(self.ctx.kernel, self.ctx.layouts))
        items = guard.items if guard else flatten(loop.body)
        lets = {it.var: it for it in items if isinstance(it, tuple)}
        producers = []
        for idx, st in enumerate(items):
            if isinstance(st, ir.Copy) and is_global_to_shared(st):
                deps = copy_lets_needed(st, lets, written)
                dst = st.dst.buffer
                if deps is None or uses_buffer(outside, dst) or st.src.buffer in written or \
                        whole_buffer_user(loop.body, dst):
                    continue
                producers.append((idx, st, deps))
            elif gather_producer(self.ctx.kernel, st, items, outside, written):
                deps = lets_needed(gather_exprs(st), lets, written)
                if deps is not None:
                    producers.append((idx, st, deps))
        if not producers:
            return serial
        cond_lets = lets_needed([guard.cond], lets, written) if guard else []
        if cond_lets is None:
            return serial
        if stages == 1:
            return self._single_stage(loop, items, producers, guard, cond_lets) or serial
        mapping = {}
        for _, st, _ in producers:
            b = _destination(st)
            if b not in mapping:
                nb = ir.Buffer(b.name, (stages,) + tuple(b.shape), b.dtype, b.scope, loc=b.loc)
                mapping[b] = nb
                self.ctx.layouts[nb] = stack_layout(self.ctx.layouts[b], stages, b.dtype.bytes)
                self.ctx.replaced_shared[b] = nb
        k = loop.var
        n = loop.extent
        start = loop.start
        S = stages

        def issue(iter_expr, stage_expr):
            """Copies (with the lets they need) for iteration `iter_expr` into `stage_expr`."""
            out = []
            for _, st, deps in producers:
                sub = {k: iter_expr}
                if isinstance(st, ir.Copy):
                    stmt = ir.Copy(st.src, st.dst, st.options + (("async", True),), loc=st.loc)
                else:
                    stmt = ir.with_fields(st, annotations=st.annotations + (ASYNC_GATHER,))
                stmt = substitute(stmt, sub)
                stmt = Rebuffer(mapping, stage_expr).visit(stmt)
                for let in reversed(deps):
                    stmt = ir.LetStmt(let.var, substitute(let.value, sub), stmt, loc=let.loc)
                out.append(stmt)
            if guard is None:
                return ir.Seq(tuple(out))
            # a skipped iteration loads nothing; its stage and commit group stay empty
            stmt = ir.If(substitute(guard.cond, {k: iter_expr}), ir.Seq(tuple(out)), None,
                         loc=guard.loc)
            for let in reversed(cond_lets):
                stmt = ir.LetStmt(let.var, substitute(let.value, {k: iter_expr}), stmt,
                                  loc=let.loc)
            return stmt

        producer_ids = {id(st) for _, st, _ in producers}
        rest = [it for it in items if not (not isinstance(it, tuple) and id(it) in producer_ids)]
        # a gemm left running under a branch would be waited for in the next iteration's
        # branch, which may not run (wgmma_wait.py): the plain order under a guard
        under_gemm = guard is None and self._issue_under_gemm(rest)
        if under_gemm:
            rest = [ir.with_fields(it, wg_wait=-1) if isinstance(it, ir.Gemm) else it
                    for it in rest]
        stage_k = ir.binary("floormod", ir.binary("sub", k, start), S)
        released = None if guard is not None or under_gemm else _register_staged(rest, mapping)
        if released is not None:
            return self._early_release(loop, rest, released, issue, mapping, stage_k)
        if guard is not None:
            n_lets = len(guard.lets)  # lets are never producers: rest starts with them
            rest = rest[:n_lets] + [ir.If(guard.cond, rebuild(rest[n_lets:]), None,
                                          loc=guard.loc)]
        body_rest = Rebuffer(mapping, stage_k).visit(rebuild(rest))
        prologue = _prologue(loop, issue, S - 1)
        fence = self._fence()
        # the stage written here is read by no statement of this iteration (insert_sync.py)
        ahead = ir.binary("add", ir.binary("sub", k, start), S - 1)
        issue_ahead = _issue_ahead("issue_ahead", loop, issue, S - 1,
                                   ir.binary("floormod", ahead, S))
        if S == 2 and not under_gemm:
            # two stages: waiting for stage k before issuing k + 1 would leave no load in
            # flight during the wait (every iteration pays the whole memory latency, which
            # an L2 miss makes long: the intrinsics GEMM 30.7 against the reference's 22.5
            # µs after a flush); a barrier first (every thread done reading the stage k + 1
            # overwrites), then the issue, then the wait for k alone
            steady = ir.Seq((_call("__syncthreads"), issue_ahead,
                             _call("tl::cp_async_wait<1>")) + fence +
                            (_call("__syncthreads"), body_rest))
        else:
            wait = (_call(f"tl::cp_async_wait<{S - 2}>"),) + fence + (_call("__syncthreads"),)
            steady = ir.Seq(wait + ((body_rest, issue_ahead) if under_gemm
                                    else (issue_ahead, body_rest)))
        main = ir.For(k, start, n, "serial", steady, 1, (("pipelined_from", S),), loc=loop.loc)
        drain = _call("tl::cp_async_wait<0>")
        n_gathers = sum(1 for _, st, _ in producers if not isinstance(st, ir.Copy))
        self.ctx.note(f"pipelined loop over {k.name}: {S} stages, {len(producers)} async "
                      f"copies ({', '.join(b.name for b in mapping)})"
                      + (f", {n_gathers} of them gathers" if n_gathers else "")
                      + (", under a block-uniform branch (skipped iterations load nothing)"
                         if guard else ""))
        return ir.Seq((prologue, main, drain))

    def _early_release(self, loop, rest, released, issue, mapping, stage_k):
        """The stage tiles are read only by copies into registers at the top of the body
        (`_register_staged`): stage k % S is free again once they are done, so the load of
        iteration k + S goes into it right there and S loads, not S - 1, are in flight
        while the rest of the body computes on the registers. A memory-bound loop over few
        blocks (a GEMV of 32 blocks) is bounded by the bytes each SM has in flight."""
        k, start, n, S = loop.var, loop.start, loop.extent, int(loop.annotation("num_stages"))
        # the barrier between the register copies and this overwrite comes from insert_sync
        # (async copies wait for earlier readers of their destination)
        refill = _issue_ahead("refill_stage", loop, issue, S, stage_k)
        body = Rebuffer(mapping, stage_k).visit(
            rebuild(rest[:released + 1] + [refill] + rest[released + 1:]))
        steady = ir.Seq((_call(f"tl::cp_async_wait<{S - 1}>"),) + self._fence() +
                        (_call("__syncthreads"), body))
        main = ir.For(k, start, n, "serial", steady, 1, (("pipelined_from", S),), loc=loop.loc)
        self.ctx.note(f"pipelined loop over {k.name}: {S} stages, each stage refilled as soon "
                      f"as its copies into registers are done ({', '.join(b.name for b in mapping)}"
                      f"): {S} loads in flight during the rest of the body")
        return ir.Seq((_prologue(loop, issue, S), main, _call("tl::cp_async_wait<0>")))

    def _fence(self) -> tuple:
        """The proxy fence after a wait for cp.async data, where wgmma may read it (sm_90a)."""
        return (inserted_proxy_fence(),) if self.ctx.target.is_hopper else ()

    def _single_stage(self, loop, items, producers, guard, cond_lets):
        """`num_stages=1` with tiles first read at different statements (FlashAttention's K by
        Q K^T, V by P V): one buffer per tile, each tile's load for iteration k+1 issued just
        after its last reader in iteration k and waited for just before its first reader, so
        it overlaps the statements in between (V's load the next Q K^T and softmax, K's the
        softmax and P V). None when every tile is first read by one statement (a GEMM's A and
        B: nothing to overlap) or a tile is read before its copy.

        Under a block-uniform branch (`guard`: block-sparse attention's `if block_mask[k]`)
        iteration k+1's loads are issued only if it runs (cond(k+1)); an iteration whose
        predecessor did not run ("fresh": k is the first, or cond(k-1) is false) issues its
        own loads at its top instead, one commit group per tile, and its waits count the
        groups of that path."""
        if not all(isinstance(st, ir.Copy) for _, st, _ in producers):
            return None
        tiles = {}
        for idx, st, deps in producers:
            tiles.setdefault(st.dst.buffer, []).append((idx, st, deps))
        producer_ids = {id(st) for _, st, _ in producers}
        readers = {}
        for b, copies in tiles.items():
            at = [i for i, it in enumerate(items)
                  if (uses_buffer(it.value, b) if isinstance(it, tuple) else
                      id(it) not in producer_ids and uses_buffer(it, b))]
            if not at or at[0] < max(idx for idx, _, _ in copies) or \
                    b in written_buffers(rebuild([it for it in items if
                                                  isinstance(it, tuple) or
                                                  id(it) not in producer_ids])):
                return None
            readers[b] = (at[0], at[-1])
        if len({first for first, _ in readers.values()}) < 2:
            return None
        order = sorted(tiles, key=lambda b: readers[b][0])
        rank = {b: i for i, b in enumerate(order)}
        release = {b: (readers[b][1], rank[b]) for b in order}
        k, start, n = loop.var, loop.start, loop.extent

        def issue(b, iter_expr):
            out = []
            for _, st, deps in tiles[b]:
                sub = {k: iter_expr}
                stmt = substitute(ir.Copy(st.src, st.dst, st.options + (("async", True),),
                                          loc=st.loc), sub)
                for let in reversed(deps):
                    stmt = ir.LetStmt(let.var, substitute(let.value, sub), stmt, loc=let.loc)
                out.append(stmt)
            return ir.Seq(tuple(out))

        def runs(iter_expr):
            """The guard's condition for iteration `iter_expr`, its lets inlined."""
            cond = guard.cond
            for let in reversed(cond_lets):
                cond = substitute(cond, {let.var: let.value})
            return substitute(cond, {k: iter_expr})

        def groups_after(b, path):
            """cp.async groups committed after the one holding tile b of this iteration, at
            b's first reader: the releases of this iteration before it ("early"), plus the
            tiles issued after b at the top of a fresh iteration (the prologue's, unguarded)
            or the releases after b's in the previous iteration; unguarded, the wait takes
            the fewer of the two."""
            early = sum(1 for u in order if readers[u][1] < readers[b][0])
            first = sum(1 for u in order if rank[u] > rank[b])
            later = sum(1 for u in order if release[u] > release[b])
            return early + {"fresh": first, "prefetched": later, None: min(first, later)}[path]

        fresh = None
        if guard is not None:
            fresh = ir.Var("fresh", ir.DType("bool"))
            top = [x for b in order for x in (issue(b, k), _call("tl::cp_async_commit"))]
            prologue = []
        else:
            prologue = [ir.If(ir.compare("lt", ir.const(0), n), issue(b, start), None)
                        for b in order]
            prologue = [x for st in prologue for x in (st, _call("tl::cp_async_commit"))]

        def wait(b):
            if fresh is None:
                return _call(f"tl::cp_async_wait<{groups_after(b, None)}>")
            first, later = groups_after(b, "fresh"), groups_after(b, "prefetched")
            if first == later:
                return _call(f"tl::cp_async_wait<{first}>")
            return ir.If(fresh, _call(f"tl::cp_async_wait<{first}>"),
                         _call(f"tl::cp_async_wait<{later}>"))

        fence = self._fence()
        body = []
        nxt = ir.binary("add", k, 1)
        remaining = ir.compare("lt", ir.binary("add", ir.binary("sub", k, start), 1), n)
        for i, it in enumerate(items):
            if not isinstance(it, tuple) and id(it) in producer_ids:
                continue
            for b in order:
                if readers[b][0] == i:
                    body += [wait(b), *fence, _call("__syncthreads")]
            body.append(it)
            for b in order:
                if readers[b][1] == i:
                    # the barrier before this overwrite (every thread done reading b) comes
                    # from insert_sync: async copies wait for earlier readers
                    load = issue(b, nxt) if guard is None else \
                        ir.If(runs(nxt), issue(b, nxt), None, loc=guard.loc)
                    body += [ir.If(remaining, load, None), _call("tl::cp_async_commit")]
        if guard is not None:
            n_lets = len(guard.lets)  # the branch's lets come first (uniform.py)
            first_iter = ir.compare("eq", k, start)
            then = ir.LetStmt(fresh, ir.logical_or(first_iter,
                                                   ir.logical_not(runs(ir.binary("sub", k, 1)))),
                              rebuild([ir.If(fresh, ir.Seq(tuple(top)), None)] +
                                      body[n_lets:]), loc=guard.loc)
            body = body[:n_lets] + [ir.If(guard.cond, then, None, loc=guard.loc)]
        main = ir.For(k, start, n, "serial", rebuild(body), 1, (), loc=loop.loc)
        self.ctx.note(f"single-stage loop over {k.name}: each tile's next load issued after "
                      f"its last reader ({', '.join(b.name for b in order)})"
                      + (", under a block-uniform branch (loads for iterations that run)"
                         if guard else ""))
        return ir.Seq(tuple(prologue) + (main, _call("tl::cp_async_wait<0>")))

    def _issue_under_gemm(self, rest) -> bool:
        """Whether the consumers' part of the loop is wgmma gemms alone (sm_90a): they are then
        issued first and left running while the threads compute the addresses of the next
        stage and issue its copies; wgmma_wait.py waits for them at the next barrier."""
        stmts = [it for it in rest if not isinstance(it, tuple)]
        return bool(stmts) and all(self.ctx.is_wgmma(g) and g.wg_wait == 0 for g in stmts) \
            and not self.ctx.flag(PassConfigKey.TL_DISABLE_WGMMA_OVERLAP)

def _prologue(loop, issue, count):
    """Iterations start .. start + count - 1 issued before the loop (those that exist), one
    commit group each."""
    s = ir.Var("s")
    return ir.For(s, ir.const(0), ir.const(count), "unroll", ir.Seq((
        ir.If(ir.compare("lt", s, loop.extent), issue(ir.binary("add", loop.start, s), s), None),
        _call("tl::cp_async_commit"))), loc=loop.loc)


def _issue_ahead(key, loop, issue, distance, stage):
    """Iteration k + distance issued into `stage` (if it exists) and committed, marked
    `key` for insert_sync."""
    ahead = ir.binary("add", ir.binary("sub", loop.var, loop.start), distance)
    return ir.Attr(key, distance, ir.Seq((
        ir.If(ir.compare("lt", ahead, loop.extent),
              issue(ir.binary("add", loop.var, distance), stage), None),
        _call("tl::cp_async_commit"))))


def _register_staged(rest, mapping):
    """The index in `rest` of the last statement reading a stage tile when every statement
    up to it that reads one is a copy of it into registers (a fragment or local tile) and a
    statement after it does the work; None otherwise (a gemm reading the tiles in shared
    memory, a tile read late in the body)."""
    tiles = tuple(mapping)
    last = None
    for i, it in enumerate(rest):
        if isinstance(it, tuple):
            if any(uses_buffer(it.value, b) for b in tiles):
                return None
            continue
        if any(uses_buffer(it, b) for b in tiles):
            if not _copy_to_registers(it):
                return None
            last = i
    if last is None or not any(not isinstance(it, tuple) for it in rest[last + 1:]):
        return None
    return last


def _copy_to_registers(st) -> bool:
    """A `T.copy` into a fragment or local tile (as a Copy node, or the element loop layout
    inference made of it)."""
    if isinstance(st, ir.Copy):
        return st.dst.buffer.scope not in MEMORY
    if not (isinstance(st, ir.For) and st.annotation("from_tile_op") == "copy"):
        return False
    stores = collect(st, lambda n: isinstance(n, ir.Store))
    return bool(stores) and all(x.buffer.scope not in MEMORY for x in stores)


def _destination(st) -> ir.Buffer:
    """The shared tile a producer (a Copy or a gather nest) writes."""
    if isinstance(st, ir.Copy):
        return st.dst.buffer
    return gather_parts(st)[0].buffer


class _Pipeline(Mutator):
    def __init__(self, ctx, root):
        self.ctx = ctx
        self.root = root

    def visit_For(self, s):
        s = self.generic(s)
        if s.kind != "pipelined":
            return s
        outside = _without(self.root, s)
        return Pipeliner(self.ctx).run(s, outside)


def _without(root, loop):
    """`root` with `loop` replaced by nothing (to ask whether a buffer is used elsewhere)."""

    class Drop(Mutator):
        def visit_For(self, s):
            if s is loop or (s.var is loop.var):
                return ir.Seq(())
            return self.generic(s)

    return Drop().visit(root)


def pipeline_loops(kernel: ir.Kernel, ctx) -> ir.Kernel:
    if has_user_roles(kernel):
        return _RoleLoops(kernel, ctx).run()
    body = _Pipeline(ctx, kernel.body).visit(kernel.body)
    if body is kernel.body:
        return kernel
    allocs = tuple(ctx.replaced_shared.get(b, b) for b in kernel.allocs)
    return ir.with_fields(kernel, body=body, allocs=allocs)


class _RoleLoops:
    """T.Pipelined loops in a kernel whose roles the user wrote (T.ws, thread ranges) and
    synchronised with their own mbarriers. The roles run in different warps, so each
    thread's sequence of statements is already the serial loop's; what `num_stages` = S >= 2
    adds is buffers: each shared tile the loop loads from global memory and each mbarrier it
    uses get S copies, iteration k using copy (k - start) % S. The copy of an mbarrier then
    completes one phase every S iterations, so the parity p(k) the user waits for becomes
    p(start + (k - start) // S): the m-th use of a copy waits for the phase the one barrier
    had at its m-th use. A wait for the previous iteration's release of a tile thus becomes a
    wait for the release S iterations back, when this copy of the tile was last read: the
    producer role runs up to S - 1 iterations ahead (the reference's schedule for
    example_warp_specialize_gemm_copy_1_gemm_0).

    Loops that do not fit the pattern run serially as written, one buffer per tile: the
    shared tiles the loop writes are all such loads' destinations and (like the barriers)
    used only in the loop, every use of a barrier sits in the loop body outside nested loops
    with a constant index, and every wait on one has a parity that depends on the loop
    variable (one phase per iteration)."""

    def __init__(self, kernel, ctx):
        self.kernel = kernel
        self.ctx = ctx
        # (other attributes' values are not (buffer, counts) pairs: cluster_dims, ...)
        self.barriers = {value[0]: value[1] for key, value in kernel.attrs
                         if key == "barrier_init"}
        self.replaced = {}  # barrier -> its S copies

    def run(self) -> ir.Kernel:
        root = self.kernel.body

        class Loops(Mutator):
            def visit_For(m, s):
                s = m.generic(s)
                if s.kind != "pipelined":
                    return s
                return self._versioned(s, root) or ir.For(
                    s.var, s.start, s.extent, "serial", s.body, s.step, (), loc=s.loc)

        body = Loops().visit(root)
        if body is root:
            return self.kernel
        allocs = tuple(self.replaced.get(b, self.ctx.replaced_shared.get(b, b))
                       for b in self.kernel.allocs)
        attrs = tuple((key, (self.replaced[v[0]], tuple(c for c in v[1] for _ in range(
            self.replaced[v[0]].shape[0] // len(v[1])))))
                      if key == "barrier_init" and v[0] in self.replaced else (key, v)
                      for key, v in self.kernel.attrs)
        return ir.with_fields(self.kernel, body=body, allocs=allocs, attrs=attrs)

    def _why(self, loop, reason):
        self.ctx.note(f"T.Pipelined loop over {loop.var.name} in user roles runs with one "
                      f"buffer per tile: {reason}")
        return None

    def _versioned(self, loop, root):
        S = int(loop.annotation("num_stages", 0) or 0)
        if S < 2 or loop.step != 1:
            return None
        body, k, start = loop.body, loop.var, loop.start
        outside = _without(root, loop)
        bars = [b for b in self.barriers if uses_buffer(body, b)]
        if not bars:
            return None  # nothing orders the roles' accesses that copies could relax
        if any(uses_buffer(outside, b) for b in bars):
            return self._why(loop, "a barrier it uses is also used outside it")
        nested = collect(body, lambda n: isinstance(n, ir.For))
        if any(uses_buffer(f.body, b) for f in nested for b in bars):
            return self._why(loop, "a barrier is used in a loop inside its body")
        loads = collect(body, lambda n: isinstance(n, ir.Load) and n.buffer in bars)
        if any(ir.int_value(i) is None for ld in loads for i in ld.indices):
            return self._why(loop, "a barrier element is chosen by a computed index")
        waits = collect(body, lambda n: ir.is_extern_call(n) and n.args[0] ==
                        "tl::mbarrier_wait")
        if any(not any_node(w.args[2], lambda n: n is k) for w in waits):
            return self._why(loop, "a barrier wait's parity does not follow the loop")
        written = {b for b in written_buffers(body) if b.scope in SHARED} - set(bars)
        loaded = {c.dst.buffer for c in collect(body, lambda n: isinstance(
            n, (ir.Copy, ir.TmaCopy)) and n.src.buffer.scope == "global")}
        stores = {n.buffer for n in collect(body, lambda n: isinstance(n, ir.Store))}
        if written - loaded or loaded & stores:
            return self._why(loop, "it writes shared memory other than by loads of whole "
                             "tiles")
        if any(uses_buffer(outside, b) or whole_buffer_user(body, b) for b in loaded):
            return self._why(loop, "a tile it loads is used outside it")
        read = {n.buffer for n in collect(body, lambda n: isinstance(n, ir.Load))} | {
            n.src.buffer for n in collect(body, lambda n: isinstance(n, (ir.Copy, ir.TmaCopy)))}
        passed = {b for b in written_buffers(body) if b.scope == "global"} & read
        if passed:  # a wait for an earlier iteration's arrival may order these accesses too
            return self._why(loop, "it writes and reads global "
                             f"{', '.join(sorted(b.name for b in passed))}")
        stage = ir.binary("floormod", ir.binary("sub", k, start), S)
        use = ir.binary("add", start, ir.binary("floordiv", ir.binary("sub", k, start), S))
        mapping = {}
        for b in sorted(loaded, key=lambda b: b.name):
            nb = ir.Buffer(b.name, (S,) + tuple(b.shape), b.dtype, b.scope, loc=b.loc)
            self.ctx.layouts[nb] = stack_layout(self.ctx.layouts[b], S, b.dtype.bytes)
            self.ctx.replaced_shared[b] = nb
            mapping[b] = nb
        for b in bars:
            n = b.shape[0]
            self.replaced[b] = ir.Buffer(b.name, (n * S,), b.dtype, b.scope, loc=b.loc)
            self.ctx.layouts[self.replaced[b]] = L.row_major((n * S,))
        replaced = self.replaced

        class Version(Mutator):
            def visit_Call(m, c):
                if ir.is_extern_call(c) and c.args[0] == "tl::mbarrier_wait":
                    return ir.with_fields(c, args=(c.args[0], m.visit(c.args[1]),
                                                   substitute(c.args[2], {k: use})))
                return m.generic(c)

            def visit_Load(m, e):
                nb = replaced.get(e.buffer)
                if nb is None or e.buffer not in bars:
                    return m.generic(e)
                index = ir.binary("add", ir.binary("mul", e.indices[0], S), stage)
                return ir.Load(nb, (index,), e.dtype)

        body = Rebuffer(mapping, stage).visit(Version().visit(body))
        self.ctx.note(f"T.Pipelined loop over {k.name} in user roles: {S} copies of "
                      f"{', '.join(b.name for b in list(mapping) + bars)} (iteration k uses "
                      f"copy k % {S}; barrier parities follow each copy's phases)")
        return ir.For(k, start, loop.extent, "serial", body, 1, (), loc=loop.loc)
