"""Whether shared-memory loads have certainly completed at a point of a statement list: every
value they loaded reached, through element-wise statements, the register operand of a wgmma
issued before that point.

Why it matters (transform/warp_specialize/): a consumer that hands a TMA stage back with an
mbarrier arrival after reading it with ordinary loads needs a `fence.proxy.async` in between
(a MEMBAR plus a proxy fence per iteration), because a load may still be in flight when the
arrival lets the TMA unit overwrite the stage. A wgmma whose A operand holds values computed
from those loads cannot issue before the loads returned their data (the registers are read at
issue), and the arrival, an `asm volatile` like the wgmma, issues after it: the loads are
complete and the fence orders nothing.

The rule is deliberately narrow, so that "every loaded value" is evident from the IR:
  * a statement that loads from the stage is a parallel nest over the whole of the fragments
    it stores, each store at the nest's variables in order, with no branch inside (a select
    may skip a load's consumer);
  * the values travel only through such nests, each reading the fragment it propagates at its
    own variables over its whole shape, into fragments they store likewise;
  * they end in a wgmma gemm whose A operand is the whole of such a fragment, before `end`.
"""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.visitor import collect
from .parallel_nest import parallel_nest

FRAGMENT = "local.fragment"


def _whole_nest(stmt, in_place=False):
    """(loop vars, stores) of a branch-free parallel nest whose every store is to a fragment
    at the nest's variables in order, over the fragment's whole shape; else None.
    `in_place`: the nest may sit in a branch (no else) and hold selects if every fragment it
    stores it also reads at its variables (a mask `X = cond ? X : 0`): the instruction that
    computed X's old value issues before whatever overwrites it, so a value skipped by the
    select was still computed, its loads complete, before the statements that follow."""
    while in_place and isinstance(stmt, ir.If) and stmt.else_body is None:
        stmt = stmt.then_body
    if not isinstance(stmt, ir.For):
        return None
    nest = parallel_nest(stmt, annotated=True)
    if nest is None:
        return None
    loops, _ = nest
    body = loops[-1].body
    if collect(body, lambda n: isinstance(n, (ir.If, ir.For, ir.While))):
        return None
    if collect(body, lambda n: isinstance(n, ir.Call) and n.op in ("if_then_else", "select")) \
            and not in_place:
        return None
    lvars = [lp.var for lp in loops]
    extents = [ir.int_value(lp.extent) for lp in loops]
    stores = collect(body, lambda n: isinstance(n, ir.Store))
    if not stores:
        return None
    for st in stores:
        if st.buffer.scope != FRAGMENT or list(st.buffer.shape) != extents \
                or len(st.indices) != len(lvars) \
                or any(idx is not v for idx, v in zip(st.indices, lvars)):
            return None
        if in_place and not _reads_whole(body, lvars, st.buffer):
            return None
    return lvars, stores


def _reads_whole(stmt, lvars, buf) -> bool:
    """Every load of fragment `buf` in `stmt` is at the nest's variables in order."""
    loads = collect(stmt, lambda n: isinstance(n, ir.Load) and n.buffer is buf)
    return bool(loads) and all(
        len(ld.indices) == len(lvars) and all(i is v for i, v in zip(ld.indices, lvars))
        for ld in loads)


def _whole_a_operand(g: ir.Gemm, tainted) -> bool:
    A = g.A.buffer
    return A in tainted and A.scope == FRAGMENT and \
        [ir.int_value(e) for e in g.A.extents] == list(A.shape) and \
        all(ir.int_value(x) == 0 for x, _ in g.A.region)


def _stmts(stmt):
    return stmt.stmts if isinstance(stmt, ir.Seq) else (stmt,)


def _masks(stmt, chain) -> bool:
    """`stmt` is a branch (a mask decided per tile) each of whose paths overwrites or updates
    in place, with whole nests, only fragments of `chain`, reading no other: the chain's values
    are then either where they were or dead on every path."""
    if not isinstance(stmt, ir.If):
        return False
    for body in (stmt.then_body, stmt.else_body):
        for s in (() if body is None else _stmts(body)):
            if isinstance(s, ir.If):
                if not _masks(s, chain):
                    return False
                continue
            nest = _whole_nest(s) or _whole_nest(s, in_place=True)
            if nest is None or any(st.buffer not in chain for st in nest[1]):
                return False
            read = {ld.buffer for ld in collect(s, lambda n: isinstance(n, ir.Load))}
            if any(b.scope == FRAGMENT and b not in chain for b in read) or \
                    not all(_reads_whole(s, nest[0], b) for b in read & chain):
                return False
    return True


def _chain_consumed(items, frag, is_wgmma) -> bool:
    """The values `frag` holds after `items[0]` reach the whole A operand of a wgmma among
    `items[1:]`, through whole nests (and per-tile masks) only."""
    chain = {frag}
    for later in items[1:]:
        if isinstance(later, tuple):
            if collect(later.value,
                       lambda n: isinstance(n, ir.Load) and n.buffer in chain):
                return False
            continue
        gemms = collect(later, lambda n: isinstance(n, ir.Gemm))
        if gemms:
            if any(is_wgmma(g) and _whole_a_operand(g, chain) for g in gemms):
                return True
            continue
        read = {ld.buffer for ld in collect(later, lambda n: isinstance(n, ir.Load))} & chain
        written = {st.buffer for st in collect(later, lambda n: isinstance(n, ir.Store))}
        if _masks(later, chain):
            continue
        if not read:
            chain -= written  # overwritten: those values are dead
            continue
        step = _whole_nest(later) or _whole_nest(later, in_place=True)
        if step is None or not all(_reads_whole(later, step[0], b) for b in read):
            return False  # the values go where this analysis does not follow them
        chain |= written
    return False


def loads_consumed_by_wgmma(items, end, loads_stage, is_wgmma) -> bool:
    """True when every statement among `items[:end]` for which `loads_stage(item)` holds is a
    whole nest (see `_whole_nest`) every fragment of which carries its values into the whole
    A operand of a wgmma issued within `items[:end]`. `items` may hold lets (tuples): one that
    loads from the stage fails."""
    for i in range(end):
        item = items[i]
        if not loads_stage(item):
            continue
        if isinstance(item, tuple):
            return False
        nest = _whole_nest(item)
        if nest is None:
            return False
        if not all(_chain_consumed(items[i:end], st.buffer, is_wgmma)
                   for st in {st.buffer: st for st in nest[1]}.values()):
            return False
    return True
