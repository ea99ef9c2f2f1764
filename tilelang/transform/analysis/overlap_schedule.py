"""The statement schedule of `T.Pipelined(n, order=[...], stage=[...], group=[...])`.

Expects: the top-level statements of a pipelined loop body (tile IR, lets excluded) and the
ones the producer performs (the copies a TMA producer warpgroup issues). `group` partitions the
statement indices into groups (default: one statement per group); `stage[g]` says how many
passes of the loop later group g runs than in the plain loop (-1: a producer copy), `order[g]`
where it runs within one pass.

Guarantees: `schedule(...)` returns the consumer statements as `Slot`s (statement, stage,
order key) or None with a reason when the annotation is malformed, leaves a compute statement
at stage -1, or reorders two statements that touch a common buffer (one writing it) relative to
the plain loop: the pipelined loop `for t: for slot in order: slot.stmt(iteration t - stage)`
then computes what the plain loop computes. The check compares, for every conflicting pair and
every iteration distance that the stages can bring together, the order in the plain loop with
the order in the pipelined one.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import nodes as ir
from ...ir.visitor import collect
from .buffer_use import touched_buffers, written_buffers


@dataclass
class Slot:
    stmt: ir.Stmt
    stage: int
    order: int
    pos: int  # index in the plain loop body

    @property
    def key(self):
        """Place within one pass of the pipelined loop."""
        return (self.order, self.pos)


def has_annotation(loop: ir.For) -> bool:
    return loop.annotation("order") is not None or loop.annotation("stage") is not None


def schedule(loop: ir.For, stmts: list, producer_ids: set, annotation=None):
    """(slots, None) or (None, reason). `stmts`: the loop body's statements without lets;
    `producer_ids`: id() of those the producer performs; `annotation`: (order, stage, group)
    to use instead of the loop's own (auto_schedule's)."""
    if annotation is not None:
        order, stage, group = annotation
    else:
        order, stage = loop.annotation("order"), loop.annotation("stage")
        group = loop.annotation("group")
    if order is None or stage is None:
        return None, "order= and stage= go together"
    order, stage = list(order), list(stage)
    n = len(stmts)
    groups = [list(g) for g in group] if group is not None else [[i] for i in range(n)]
    if len(order) != len(groups) or len(stage) != len(groups):
        return None, (f"order/stage have {len(order)}/{len(stage)} entries for "
                      f"{len(groups)} statement groups")
    flat = sorted(i for g in groups for i in g)
    if flat != list(range(n)):
        return None, f"group must list each of the {n} loop-body statements once"
    slots = []
    for g, members in enumerate(groups):
        for i in members:
            st = stmts[i]
            if id(st) in producer_ids:
                continue  # loaded by the producer ahead of time whatever its stage
            if stage[g] < 0:
                return None, f"statement {i} has stage -1 but is not a copy the producer issues"
            slots.append(Slot(st, int(stage[g]), int(order[g]), i))
    if not slots:
        return None, "no statement left for the consumers"
    reason = _check(slots)
    if reason:
        return None, reason
    return sorted(slots, key=lambda s: (s.stage, s.key)), None


def depth(slots) -> int:
    return max(s.stage for s in slots)


def _check(slots):
    """A reason when the pipelined loop would order a conflicting pair differently."""
    eff = [(touched_buffers(s.stmt), written_buffers(s.stmt)) for s in slots]
    span = depth(slots) - min(s.stage for s in slots) + 1
    for a in range(len(slots)):
        for b in range(a + 1, len(slots)):
            sa, sb = slots[a], slots[b]
            if sa.pos > sb.pos:
                sa, sb = sb, sa
            (ta, wa), (tb, wb) = eff[a], eff[b]
            common = (wa & tb) | (wb & ta)
            if not common:
                continue
            # sa of iteration i against sb of iteration i + d: the plain loop runs sa first
            # exactly when d >= 0
            for d in range(-span, span + 1):
                first = (sa.stage, sa.key) < (d + sb.stage, sb.key)
                if first != (d >= 0):
                    name = sorted(b.name for b in common)[0]
                    return (f"statements {sa.pos} and {sb.pos} both use {name}; order/stage "
                            f"would run them out of order {abs(d)} iteration(s) apart")
    return None


# The fewest iterations a loop whose scores are masked on some tiles must be known to be
# able to run for the derived schedule: its extra prologue and epilogue cost more than the
# overlap gains on short loops (H200: a 2-iteration 128x128 loop 10.0 -> 11.4 µs, a varlen
# loop bounded only at run time 21.0 -> 24.0 µs; a causal loop of up to 32: 2.54 -> 2.32 ms).
MIN_TRIPS_FOR_MASKED_OVERLAP = 8


def auto_schedule(stmts: list, producer_ids: set, is_wgmma, trip_bound=None, why=None):
    """(order, stage, group) overlapping an attention-like loop body, or None (with the
    reason appended to `why` where it is not the body's shape). `trip_bound`: an upper
    bound of the loop's trip count known at compile time, or None.

    The body must hold exactly two wgmma gemms G1 (scores: S = Q K^T) and, after it, G2
    (O += P V) whose accumulator G1 does not touch. G2 and the statements after G1 that write
    only G2's accumulator (the rescale of O) run one iteration late (stage 1); within a pass
    the order is: G1 and what precedes it (stage 0), the late rescale, the late G2, then the
    rest of this iteration (the softmax of S). That is FlashAttention-3's schedule: S(k) and
    P(k-1) V(k-1) run on the tensor cores while the softmax of S(k) runs on the CUDA cores.
    `schedule` then checks that the order keeps every dependency of the plain loop."""
    gemms = [i for i, st in enumerate(stmts) if isinstance(st, ir.Gemm)]
    if len(gemms) != 2 or not all(is_wgmma(stmts[i]) for i in gemms):
        return None
    i1, i2 = gemms
    g1, g2 = stmts[i1], stmts[i2]
    acc = g2.C.buffer
    if acc in touched_buffers(g1) or g1.C.buffer is acc:
        return None
    if g2.A.buffer is g1.C.buffer:
        return None  # G2 reads the raw scores: nothing to overlap with
    for st in stmts[:i1]:
        if id(st) in producer_ids or _clears(st, g1.C.buffer):
            continue
        if not _clears_off_the_edge(st, g1.C.buffer):
            # a mask written into the scores before G1 on every tile: the derived schedule
            # measured slower there (causal 128/128: 2.45 against 2.33 ms, H200)
            return None
        if trip_bound is None or trip_bound < MIN_TRIPS_FOR_MASKED_OVERLAP:
            if why is not None:
                why.append(f"scores masked on some tiles and the loop not known to run "
                           f"{MIN_TRIPS_FOR_MASKED_OVERLAP} times or more (bound: {trip_bound})")
            return None
    groups, order, stage = [], [], []
    for i, st in enumerate(stmts):
        if id(st) in producer_ids:
            groups.append([i]), order.append(-1), stage.append(-1)
        elif i <= i1:
            groups.append([i]), order.append(0), stage.append(0)
        elif i == i2:
            groups.append([i]), order.append(2), stage.append(1)
        elif written_buffers(st) == {acc}:
            groups.append([i]), order.append(1), stage.append(1)
        else:
            groups.append([i]), order.append(3), stage.append(0)
    return order, stage, groups


def _clears_off_the_edge(st, buf) -> bool:
    """Whether `st` is a mask unswitch_masks versioned per tile: a chain of block-uniform
    branches storing into `buf` alone, one of which clears it (`if <no element masked>:
    T.clear(buf) elif <all masked>: T.fill(buf, -inf) else: <the mask>`), so only the tiles
    the mask's edge crosses compute it."""
    if not (isinstance(st, ir.If) and written_buffers(st) == {buf}):
        return False
    branches, rest = [], st
    while isinstance(rest, ir.If) and rest.else_body is not None:
        branches.append(rest.then_body)
        rest = rest.else_body
    return any(_clears(b, buf) for b in branches)


def _clears(st, buf) -> bool:
    """Whether `st` only stores constants into `buf` (a T.clear / T.fill, as a tile op or as
    the parallel loop lower_elementwise made of it)."""
    if isinstance(st, ir.Fill):
        return st.dst.buffer is buf and isinstance(st.value, ir.Const)
    stores = collect(st, lambda n: isinstance(n, (ir.Store, ir.Fill, ir.Copy, ir.Gemm)))
    return bool(stores) and all(isinstance(n, ir.Store) and n.buffer is buf and
                                isinstance(n.value, ir.Const) for n in stores)
