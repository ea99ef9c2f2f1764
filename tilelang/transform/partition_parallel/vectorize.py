"""Vectorise the per-thread value loop of a partitioned T.Parallel nest.

Expects: a nest body instantiated for value index `v = vo * vec + vi` (see
partition_parallel), where consecutive `vi` are consecutive elements of the innermost dim.
Guarantees: global/shared loads and unconditional stores whose address is contiguous in `vi`
and aligned move through a register array with one vector access (4, 8 or 16 bytes):

    T a_vec[vec];  copy_vec(a_vec, &A[base])        # or element-wise when the vector may leave
    for vi: ... a_vec[vi] ...  c_vec[vi] = ...      # the tensor (the bounds pass guards those)
    copy_vec(&C[base], c_vec)

A lane loop that only fills a register array from memory (`a_local[k + vi] = A[.. + vi]`, a
vector-aligned constant element k of an array aligned to the access) is the vector access
straight into the array, without the staging array. Everything else keeps its scalar form; a loop computing one staged vector of 16-bit floats may
compute it two lanes at a time (pair_lanes.py). The result computes exactly what the scalar
loop did. A user's `T.vectorized(n)` loop (a thread's own lanes, `A_local[v] = A[.. + v]`) is
the same lane loop and gets the same treatment (`vectorize_explicit_loop`); one longer than a
16-byte access runs as a loop over groups of the widest width every access allows. A thread's
serial loop that only moves values (`vectorize_serial_loop`: no value carried from one
iteration to the next, nothing read that the loop writes) is run the same way, as groups of
the widest width at which one of its accesses vectorises.

When a thread's vector groups read shared memory and store into it (a tile the consumers
expand, say) and their staged vectors are small (DEFER_BYTES in all), the stores of every
group wait until all groups are computed: the CUDA compiler cannot tell the shared loads of
group vo + 1 from the stores of group vo apart, so it would otherwise keep each group's loads
behind the previous group's stores, one load latency per group. Iterations of a T.Parallel
nest are independent and a staged buffer is neither read by the nest nor stored twice, so
the order is free; the two loops stay one partitioned region (no barrier between them, and
plan_shared.py keeps what they touch apart).
"""

from __future__ import annotations

from ...arith import Analyzer
from ...ir import nodes as ir
from ...ir.visitor import Mutator, collect, substitute
from .pair_lanes import pair_lanes
from ..analysis.device_ops import copy_vec_name
from ..analysis.indices import Widen, contiguous, flat_offset, lane_steps, needs_int64
from ..analysis.scopes import MEMORY, SHARED

VOID = ir.DType("void")
PARTITIONED = (("partitioned", True),)  # a thread's share of one T.Parallel nest


_address = ir.address_of


class _Access:
    def __init__(self, node, kind):
        self.node = node
        self.kind = kind  # "load" | "store"
        self.reg = None
        self.full = None  # bounds condition of the whole vector (None: always)


DEFER_BYTES = 64  # staged shared-memory stores held back until every group is computed


class VectorGroups:
    """One vector group's statements (`step`: staged loads, the lane loop, the stores kept
    in place) and, when the stores are held back, `stores` (run for every group after all
    steps) and `regs` (staged registers holding every group's vector, declared around
    both loops)."""

    def __init__(self, step, stores=None, regs=()):
        self.step, self.stores, self.regs = step, stores, regs

    def guarded(self, guards) -> "VectorGroups":
        """The same groups run only where `guards` ((cond, loc), outermost first) hold."""
        def wrap(stmt):
            for cond, loc in reversed(guards):
                stmt = ir.If(cond, stmt, None, loc=loc)
            return stmt

        return VectorGroups(wrap(self.step), None if self.stores is None else
                            wrap(self.stores), self.regs)

    def loops(self, vo, groups: int, loc) -> ir.Stmt:
        def loop(body):
            return ir.For(vo, ir.const(0), ir.const(groups), "unroll", body, 1, PARTITIONED,
                          loc=loc)

        out = loop(self.step)
        if self.stores is not None:
            # still one nest: each thread stores only its own elements, as before
            out = ir.Attr("partitioned", True, ir.Seq((out, loop(self.stores))), loc=loc)
        for reg in reversed(self.regs):
            out = ir.Allocate(reg, out)
        return out


def vectorize_value_loop(ctx, body, vo, vi, vec: int, analyzer: Analyzer, groups: int = 1):
    """The statements of one `vo` step (staged accesses around a `vi` loop) of the `groups`
    a thread runs, as VectorGroups, or None when nothing can be vectorised. Branches around
    the whole body whose condition is the same for every lane (a ragged tile's row bound)
    are taken around the group, so the accesses under them vectorise too."""
    guards = _lane_invariant_guards(body, vi, vec, analyzer)
    if guards:
        body = guards[-1][2]
        inner = vectorize_value_loop(ctx, body, vo, vi, vec, analyzer, groups)
        return None if inner is None else inner.guarded([(c, loc) for c, loc, _ in guards])
    # one walk for the four kinds of node looked at below (each list keeps the walk's order)
    nodes = collect(body, lambda n: isinstance(n, (ir.LetStmt, ir.For, ir.Store, ir.Load,
                                                   ir.Call)))
    lets = {s.var for s in nodes if isinstance(s, (ir.LetStmt, ir.For))}
    stores = [s for s in nodes if isinstance(s, ir.Store)]
    stored = {s.buffer for s in stores}
    loaded = {e.buffer for e in nodes if isinstance(e, ir.Load)}
    # a staged store is written back after the lane loop: only buffers the body neither reads
    # nor writes twice may be staged, or a later statement would read a stale element
    once = {b for b in stored if sum(1 for s in stores if s.buffer is b) == 1} - loaded
    top_stores = [s for s in _unconditional_stores(body) if s.buffer in once]
    candidates = []
    # elements whose address is taken (atomics, address_of) are not values to stage
    seen = {c.args[0] for c in nodes if isinstance(c, ir.Call) and c.args and (
        c.op.startswith("atomic_") or c.op == "address_of") and isinstance(c.args[0], ir.Load)}
    for node in (n for n in nodes if isinstance(n, (ir.Load, ir.Store))):
        buf = node.buffer
        if buf.scope not in MEMORY or node in seen:
            continue
        seen.add(node)
        if isinstance(node, ir.Load):
            if buf in stored or node.dtype.lanes > 1:
                continue
            kind = "load"
        else:
            if not any(node is s for s in top_stores):
                continue
            kind = "store"
        free = set(collect(node.indices, lambda n: isinstance(n, ir.Var)))
        if free & lets:
            continue
        nbytes = vec * buf.dtype.bytes
        if nbytes not in (4, 8, 16):
            continue
        off = flat_offset(ctx, buf, node.indices)
        if off is None:
            continue
        if not contiguous(off, vi, vec, analyzer):
            continue
        acc = _Access(node, kind)
        if buf.scope == "global":
            acc.full = _vector_in_bounds(buf, node.indices, vi, vec, analyzer)
        candidates.append(acc)
    if not candidates:
        atomics = _vector_atomic_add(ctx, body, vi, vec, analyzer)
        if atomics is not None:
            return VectorGroups(atomics)
        return _paired_registers(body, vi, vec, top_stores, analyzer)
    direct = _direct_register_copy(body, candidates, vo, vi, vec, analyzer)
    if direct is not None:
        return VectorGroups(direct)
    vector_stores = [acc for acc in candidates if acc.kind == "store"]
    reads_shared = any(b.scope in SHARED for b in loaded)
    defer = groups > 1 and vector_stores and reads_shared and all(
        acc.node.buffer.scope != "global" for acc in vector_stores) and \
        groups * vec * sum(acc.node.buffer.dtype.bytes for acc in vector_stores) <= DEFER_BYTES
    pre, post, mapping = [], [], {}
    for n, acc in enumerate(candidates):
        buf = acc.node.buffer
        held = defer and acc.kind == "store"
        reg = ir.Buffer(f"{buf.name}_vec", ((groups if held else 1) * vec,), buf.dtype, "local")
        acc.reg = reg
        base = ir.binary("mul", vo, vec) if held else ir.const(0)  # this group's lanes
        nbytes = vec * buf.dtype.bytes
        idx0 = tuple(substitute(i, {vi: ir.const(0)}) for i in acc.node.indices)
        if acc.kind == "load":
            vector = ir.Evaluate(ir.Call("call_extern", (copy_vec_name(nbytes, buf.dtype),
                                                         _address(reg, (ir.const(0),)),
                                                         _address(buf, idx0)), VOID))
            scalar = _lane_loop(vi, vec, ir.Store(reg, (vi,), acc.node))
            pre.append((reg, vector if acc.full is None else
                        ir.If(acc.full, vector, scalar)))
            mapping[id(acc.node)] = ir.Load(reg, (vi,), buf.dtype)
        else:
            vector = ir.Evaluate(ir.Call("call_extern", (copy_vec_name(nbytes, buf.dtype),
                                                         _address(buf, idx0),
                                                         _address(reg, (base,))),
                                         VOID))
            lane = ir.binary("add", base, vi)
            scalar = _lane_loop(vi, vec, ir.Store(buf, acc.node.indices,
                                                  ir.Load(reg, (lane,), buf.dtype),
                                                  loc=acc.node.loc))
            post.append(vector if acc.full is None else ir.If(acc.full, vector, scalar))
            mapping[id(acc.node)] = ("store", reg, base)

    class Replace(Mutator):
        def visit_Load(self, e):
            new = mapping.get(id(e))
            return new if new is not None else self.generic(e)

        def visit_Store(self, s):
            new = mapping.get(id(s))
            if new is not None:
                return ir.Store(new[1], (ir.binary("add", new[2], vi),), self.visit(s.value),
                                loc=s.loc)
            return self.generic(s)

    lanes = Replace().visit(body)
    inner = _vector_atomic_add(ctx, lanes, vi, vec, analyzer) or _lane_loop(vi, vec, lanes)
    staged = [m for m in mapping.values() if isinstance(m, tuple)]
    if len(staged) == 1:
        sm = ctx.target.sm if ctx.target.is_cuda else 0
        inner = pair_lanes(inner, staged[0][1], staged[0][2], analyzer, sm) or inner
    loaded = [reg for reg, _ in pre]
    step = ir.Seq(tuple(st for _, st in pre) + (inner,) + (() if defer else tuple(post)))
    held = [m[1] for m in staged]
    for reg in reversed(loaded + ([] if defer else held)):
        step = ir.Allocate(reg, step)
    if defer:
        return VectorGroups(step, ir.Seq(tuple(post)), held)
    return VectorGroups(step)


def _direct_register_copy(body, candidates, vo, vi, vec: int, analyzer):
    """The lane loop `dst[.. vi ..] = src[.. vi ..]` that fills a register array from memory
    as one vector access straight into the array (`copy_vec(&dst[k], &src[..])`), without a
    staging register and an element loop, or None. The CUDA compiler unrolled the K loop of
    the dequantising GEMV (its operands loaded by `T.vectorized` loops) 4 times around the
    staged form and 8 times around this one, as around the reference's direct
    `*(uint4*)(A_local) = *(uint4*)(A + ..)`: more loads in flight per thread. Only where
    the array's first lane is a vector-aligned element at a constant (or unrolled group)
    offset of an array aligned to at least the access width (codegen/cuda.py `_allocate`
    aligns register arrays to their size, up to 16 bytes), so the array stays in registers
    and the access is aligned."""
    if not isinstance(body, ir.Store) or len(candidates) != 1:
        return None
    acc = candidates[0]
    src, dst = acc.node.buffer, body.buffer
    if acc.kind != "load" or body.value is not acc.node or dst.scope != "local" or \
            dst.dtype != src.dtype or any(ir.int_value(d) is None for d in dst.shape):
        return None
    offset, stride = ir.const(0), 1
    for i, d in reversed(list(zip(body.indices, dst.shape))):
        offset = ir.binary("add", offset, ir.binary("mul", i, stride))
        stride *= ir.int_value(d)
    if not contiguous(offset, vi, vec, analyzer):
        return None
    first = analyzer.simplify(substitute(offset, {vi: ir.const(0)}))
    free = set(collect(first, lambda n: isinstance(n, ir.Var)))
    if free - ({vo} if isinstance(vo, ir.Var) else set()) or \
            not analyzer.is_divisible(first, vec):
        return None
    nbytes = vec * src.dtype.bytes
    size = stride * dst.dtype.bytes
    align = max(16 if size >= 16 else size if size & (size - 1) == 0 else 0, dst.dtype.bytes)
    if align < nbytes:
        return None
    idx0 = tuple(substitute(i, {vi: ir.const(0)}) for i in acc.node.indices)
    dst0 = tuple(substitute(i, {vi: ir.const(0)}) for i in body.indices)
    vector = ir.Evaluate(ir.Call("call_extern", (copy_vec_name(nbytes, src.dtype),
                                                 _address(dst, dst0), _address(src, idx0)),
                                 VOID), loc=body.loc)
    if acc.full is None:
        return vector
    return ir.If(acc.full, vector, _lane_loop(vi, vec, body))


# element types whose consecutive elements one atomic instruction adds (tl::atomic_addx2/x4),
# with the oldest architecture that has it
_VECTOR_ATOMIC_SM = {"float16": 70, "bfloat16": 80, "float32": 90}


def _vector_atomic_add(ctx, body, vi, vec, analyzer):
    """The statements replacing the lane loop of `body` when it is one relaxed `T.atomic_add`
    into consecutive, aligned elements of a global tensor (the dQ, dK and dV updates of
    attention backward kernels): the lanes' values staged in registers, then added 4 or 2 at
    a time (`tl::atomic_addx4/x2`), one instruction per group instead of one per element;
    None otherwise (branches the same for every lane are taken around it by
    `vectorize_value_loop`). Relaxed atomics to distinct addresses are unordered, so grouping
    them changes nothing a program can observe."""
    if not (isinstance(body, ir.Evaluate) and isinstance(body.value, ir.Call)):
        return None
    call = body.value
    if call.op != "atomic_add" or dict(call.attrs).get("memory_order", "relaxed") != "relaxed":
        return None
    target, value = call.args
    buf = target.buffer if isinstance(target, ir.Load) else None
    if buf is None or buf.scope != "global" or target.dtype.lanes != 1 or \
            ctx.target.sm < _VECTOR_ATOMIC_SM.get(buf.dtype.name, 10 ** 9):
        return None
    width = 4 if vec % 4 == 0 else 2 if vec % 2 == 0 else 0
    if not width:
        return None
    off = flat_offset(ctx, buf, target.indices)
    if off is None or not contiguous(off, vi, vec, analyzer):
        return None
    values = ir.Buffer(f"{buf.name}_add", (vec,), buf.dtype, "local")
    stage = _lane_loop(vi, vec, ir.Store(values, (vi,), ir.cast_to(value, buf.dtype),
                                         loc=body.loc))
    groups = []
    for k in range(0, vec, width):
        at = tuple(substitute(i, {vi: ir.const(k)}) for i in target.indices)
        groups.append(ir.Evaluate(ir.Call(f"atomic_addx{width}", (
            ir.Load(buf, at, buf.dtype), ir.Load(values, (ir.const(k),), buf.dtype)),
            buf.dtype, (("lanes", width),)), loc=body.loc))
    vector = ir.Seq(tuple(groups))
    full = _vector_in_bounds(buf, target.indices, vi, vec, analyzer)
    if full is not None:
        scalar = _lane_loop(vi, vec, ir.Evaluate(ir.Call("atomic_add", (
            target, ir.Load(values, (vi,), buf.dtype)), call.dtype, call.attrs), loc=body.loc))
        vector = ir.If(full, vector, scalar)
    return ir.Allocate(values, ir.Seq((stage, vector)))


def _lane_invariant_guards(body, vi, vec, analyzer) -> list:
    """The branches without else around the whole of `body` whose condition has one value
    for all lanes, outermost first, as (the first lane's condition, which no longer names
    the lane; loc; the branch's body)."""
    guards = []
    while isinstance(body, ir.If) and body.else_body is None and \
            lane_invariant(body.cond, vi, vec, analyzer):
        guards.append((substitute(body.cond, {vi: ir.const(0)}), body.loc, body.then_body))
        body = body.then_body
    return guards


def lane_invariant(cond, vi, vec, analyzer) -> bool:
    """Whether `cond` has one value for all `vec` lanes."""
    first = analyzer.simplify(substitute(cond, {vi: ir.const(0)}))
    return all(analyzer.can_prove_equal(first, substitute(cond, {vi: ir.const(k)}))
               for k in range(1, vec))


MAX_HOISTED_LANES = 64  # a T.vectorized loop wider than this keeps its per-lane assumptions


def hoist_lane_assumptions(loop: ir.For) -> ir.Stmt:
    """`for i in T.vectorized(n): T.assume(c(i)); body` as `T.assume(c(0) and ... and
    c(n-1)); for i in T.vectorized(n): body`: the same promise (every lane runs), but made
    where the lanes are issued together, so the vector accesses may rely on it (no guard on
    `A[base + i]` when `base + i < N` is assumed). The loop itself when its body does not
    start with an assumption or its extent is not a small constant."""
    n = ir.int_value(loop.extent)
    if n is None or n > MAX_HOISTED_LANES or ir.int_value(loop.start) is None:
        return loop
    conds, body = [], loop.body
    while isinstance(body, ir.Attr) and body.key == "assume":
        conds.append(body.value)
        body = body.body
    if not conds:
        return loop
    start = ir.int_value(loop.start)
    every_lane = None
    for cond in conds:
        for k in range(n):
            lane = substitute(cond, {loop.var: ir.const(start + k * loop.step, loop.var.dtype)})
            every_lane = lane if every_lane is None else ir.logical_and(every_lane, lane)
    return ir.Attr("assume", every_lane, ir.with_fields(loop, body=body), loc=loop.loc)


def vectorize_explicit_loop(ctx, loop: ir.For, analyzer: Analyzer):
    """A `T.vectorized(n)` loop as a partitioned lane loop with vector accesses (one vector
    group), or None when it is not a constant-extent loop from 0 of straight-line statements
    or nothing in it vectorises."""
    if loop.kind != "vectorized" or loop.step != 1 or ir.int_value(loop.start) != 0 or \
            ir.int_value(loop.extent) is None or \
            collect(loop.body, lambda n: isinstance(n, (ir.For, ir.While))):
        return None
    vec = ir.int_value(loop.extent)
    widest = max((n.buffer.dtype.bytes for n in _memory_accesses(loop.body)), default=0)
    if vec * widest > MAX_VECTOR_BYTES:
        return _split_explicit_loop(ctx, loop, vec, analyzer)
    with analyzer.scope():
        analyzer.bind(loop.var, 0, vec)
        groups = vectorize_value_loop(ctx, loop.body, ir.const(0), loop.var, vec, analyzer)
    return None if groups is None else groups.step


MAX_VECTOR_BYTES = 16  # the widest access one thread makes (128 bits)

# what a serial loop that only moves values may hold
_MOVES = (ir.Seq, ir.Store, ir.Load, ir.Cast, ir.Var, ir.Const, ir.Binary, ir.Unary,
          ir.Compare, ir.Logical, ir.Select, ir.Buffer)


def vectorize_serial_loop(ctx, loop: ir.For, analyzer: Analyzer):
    """A thread's own serial loop that only moves values (`for k: S[r, k] = G[x + k]`: the
    reference's naive GEMV copying a row of B per thread) as a loop over groups of `w`
    lanes whose contiguous, aligned accesses are vector accesses (the others stay element
    by element, in order), `w` the widest width (16 bytes at most) at which one global or
    shared access vectorises; None where the loop is anything else. The element stores
    happen in the loop's order; a group's loads move ahead of its earlier lanes' stores,
    which no value can notice: the loop reads nothing it writes (and parameters do not
    alias, as __restrict__ says). Scalar 2-byte loads of a row per lane take one request per
    lane and element; 16-byte ones an eighth of them (naive GEMV on sm_90a)."""
    if loop.kind != "serial" or loop.step != 1 or ir.int_value(loop.start) != 0:
        return None
    extent = ir.int_value(loop.extent)
    if extent is None or extent < 2:
        return None
    nodes = collect(loop.body, lambda n: True)
    if not all(isinstance(n, _MOVES) or not isinstance(n, ir.Node) for n in nodes):
        return None
    accesses = [n for n in nodes if isinstance(n, (ir.Load, ir.Store))]
    storage = (lambda b: b.view_of or b)
    written = {storage(n.buffer) for n in accesses if isinstance(n, ir.Store)}
    if any(storage(n.buffer) in written for n in accesses if isinstance(n, ir.Load)) or \
            not any(n.buffer.scope in MEMORY for n in accesses):
        return None
    widest = max(n.buffer.dtype.bytes for n in _memory_accesses(loop.body))
    groups = _vector_groups(ctx, loop, extent, analyzer,
                            lambda w: w * widest <= MAX_VECTOR_BYTES, _some_lanes_vectorise)
    if groups is not None:
        n = ir.int_value(groups.extent)
        ctx.note(f"serial loop {loop.var.name}: moves values only, run as {n} groups of "
                 f"{extent // n} lanes with vector accesses")
    return groups


def _some_lanes_vectorise(ctx, body, vi, width: int, analyzer: Analyzer) -> bool:
    for node in _memory_accesses(body):
        if width * node.buffer.dtype.bytes not in (4, 8, 16):
            continue
        off = flat_offset(ctx, node.buffer, node.indices)
        if off is not None and contiguous(off, vi, width, analyzer):
            return True
    return False


def _memory_accesses(body):
    return [n for n in collect(body, lambda n: isinstance(n, (ir.Load, ir.Store)))
            if n.buffer.scope in MEMORY]


def _split_explicit_loop(ctx, loop: ir.For, extent: int, analyzer: Analyzer):
    """A `T.vectorized` loop longer than one vector access (`for row in T.vectorized(128)`
    over float32) as `extent / w` groups of `w` lanes, `w` the widest width at which every
    global or shared access of the body is either contiguous and aligned (a vector access)
    or the same element for all lanes of a group (`C[i, j // K]` with `w` dividing K, read
    once per group); None when no width > 1 qualifies (the loop stays scalar)."""
    return _vector_groups(ctx, loop, extent, analyzer, lambda w: w < extent, _lanes_vectorise)


def _vector_groups(ctx, loop: ir.For, extent: int, analyzer: Analyzer, fits, lanes_ok):
    """`loop` as a plain loop over `extent / w` vector groups of `w` lanes (nvcc unrolls short
    ones itself), `w` the widest of 16, 8, 4, 2 lanes dividing `extent` that `fits(w)`, at
    which `lanes_ok(ctx, body, vi, w, analyzer)` holds and something vectorises; else None."""
    vo, vi = ir.Var(f"{loop.var.name}_vo"), ir.Var(f"{loop.var.name}_vi")
    for width in (16, 8, 4, 2):
        if extent % width or not fits(width):
            continue
        body = substitute(loop.body, {loop.var: ir.binary("add", ir.binary("mul", vo, width),
                                                          vi)})
        with analyzer.scope():
            analyzer.bind(vo, 0, extent // width)
            analyzer.bind(vi, 0, width)
            if not lanes_ok(ctx, body, vi, width, analyzer):
                continue
            groups = vectorize_value_loop(ctx, body, vo, vi, width, analyzer)
        if groups is not None:
            return ir.For(vo, ir.const(0), ir.const(extent // width), "serial", groups.step,
                          loc=loop.loc)
    return None


def _lanes_vectorise(ctx, body, vi, width: int, analyzer: Analyzer) -> bool:
    vector = False
    for node in _memory_accesses(body):
        off = flat_offset(ctx, node.buffer, node.indices)
        if off is None:
            return False
        if width * node.buffer.dtype.bytes in (4, 8, 16) and \
                contiguous(off, vi, width, analyzer):
            vector = True
        elif not lane_invariant(off, vi, width, analyzer):
            return False
    return vector


def _paired_registers(body, vi, vec, top_stores, analyzer):
    """A value loop with no memory vector whose one store fills consecutive registers of a
    fragment (a gemm's A operand expanded from packed codes): its lanes computed in pairs
    when they pair up (pair_lanes.py), else None."""
    regs = [s for s in top_stores if s.buffer.scope == "local"]
    if len(regs) != 1 or len(top_stores) != 1:
        return None
    (index,) = regs[0].indices
    if not contiguous(index, vi, vec, analyzer, aligned=False):
        return None
    base = analyzer.simplify(substitute(index, {vi: ir.const(0)}))
    reg = regs[0].buffer

    class Rebase(Mutator):
        def visit_Store(self, s):
            if s is regs[0]:
                return ir.Store(reg, (ir.binary("add", base, vi),), s.value, loc=s.loc)
            return self.generic(s)

    paired = pair_lanes(_lane_loop(vi, vec, Rebase().visit(body)), reg, base, analyzer)
    return None if paired is None else VectorGroups(paired)


def _lane_loop(vi, vec, body):
    return ir.For(vi, ir.const(0), ir.const(vec), "unroll", body, 1, PARTITIONED)


def _unconditional_stores(body):
    out = []

    def walk(s):
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                walk(x)
        elif isinstance(s, (ir.LetStmt, ir.Allocate)):
            walk(s.body)
        elif isinstance(s, ir.Store):
            out.append(s)

    walk(body)
    return out


def _vector_in_bounds(buf, indices, vi, vec, analyzer):
    """Condition that all `vec` elements are inside the tensor; None when provable.

    A contiguous vector may cross rows (a gather whose row is k // 2 for lanes k), so no dim
    is assumed constant along it: a dim's index is checked at the first and last lane when it
    grows by constant steps along the vector, else at every distinct value the lanes give."""
    if needs_int64(buf):
        indices = [Widen().visit(i) for i in indices]
    conds = []
    for i, n in zip(indices, buf.shape):
        lanes = [analyzer.simplify(substitute(i, {vi: ir.const(k)})) for k in range(vec)]
        steps = lane_steps(i, vi, vec, analyzer)
        if None not in steps and steps == sorted(steps):
            lows, highs = lanes[:1], lanes[-1:]
        else:
            lows = highs = _distinct(lanes)
        conds += [ir.compare("ge", e, 0) for e in lows] + [ir.compare("lt", e, n) for e in highs]
    cond = None
    for c in conds:
        if not analyzer.prove(c):
            cond = c if cond is None else ir.logical_and(cond, c)
    return cond


def _distinct(exprs):
    out = []
    for e in exprs:
        if not any(ir.structural_equal(e, o) for o in out):
            out.append(e)
    return out
