"""Masks decided per tile: a `T.Parallel` loop that stores a select on an affine condition is
versioned on whether the condition holds on the whole tile.

Expects: tile IR after lower_elementwise (parallel loop nests), before layout inference.

Guarantees: a parallel loop nest with constant starts and extents whose body is one store
into a fragment of `T.if_then_else(cond, a, b)`, where `cond` compares integer expressions
affine in the nest's variables (`and`/`or` of such comparisons) and otherwise reads only
values every thread of the block agrees on (no thread index; loads only through lets, and
only of global tensors the kernel never writes), becomes

    if <cond holds at every element>:   the nest storing a   (nothing when a is the element)
    elif <cond fails at every element>: the nest storing b   (likewise)
    else:                               the nest as written

(analysis/affine.py derives the two branch conditions; a branch whose condition folds to
false is left out, one that folds to true replaces the statement). A branch decided at run
time is added only where it makes the tile cheap: it stores nothing (the value is the element
itself) or zeros (a clear). All threads of a block
take the same branch and every element gets the value it got before. A causal or
sliding-window mask (`acc_s[i, j] = T.if_then_else(bx * bM + i >= k * bN + j, 0, -inf)`, or
`T.if_then_else(cond, acc_s[i, j], -inf)` after the gemm) is then computed only on the tiles
the mask's edge crosses: the others clear or keep the scores, a form the attention schedule
recognises (analysis/overlap_schedule.py). `tl.disable_mask_unswitching` keeps every loop
as written.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import Mutator, any_node
from .analysis.affine import fails_everywhere, holds_everywhere
from .analysis.buffer_use import written_buffers
from .analysis.uniform import buffers_loaded, depends_on, let_values
from .pass_config import PassConfigKey


def unswitch_masks(kernel: ir.Kernel, ctx) -> ir.Kernel:
    if ctx.flag(PassConfigKey.TL_DISABLE_MASK_UNSWITCHING):
        return kernel
    lets = let_values(kernel.body)
    # values every thread agrees on: no thread index, and loads (through lets: the varlen
    # examples' `q_len = cu_seqlens[bz + 1] - cu_seqlens[bz]`) only of global tensors the
    # kernel never writes (a fragment or shared element may differ between threads)
    written = written_buffers(kernel.body)
    walk = _Unswitch(set(kernel.thread_vars), lets, written)
    body = walk.visit(kernel.body)
    if walk.versioned:
        names = ", ".join(sorted({b.name for b in walk.versioned}))
        ctx.note(f"{len(walk.versioned)} mask(s) on {names} decided per tile: computed only on "
                 "tiles the mask's edge crosses (tl.disable_mask_unswitching keeps them on "
                 "every tile)")
    return kernel if body is kernel.body else ir.with_fields(kernel, body=body)


class _Unswitch(Mutator):
    def __init__(self, thread_vars, lets, written):
        self.thread_vars, self.lets, self.written = thread_vars, lets, written
        self.versioned = []  # the fragment of each loop versioned

    def visit_For(self, s: ir.For):
        if s.kind != "parallel":
            return self.generic(s)
        # a parallel nest is matched whole or left alone (the variables of an enclosing
        # parallel loop differ between threads)
        new = _versioned(s, self)
        if new is None:
            return s
        self.versioned.append(_nest(s)[1].buffer)
        return new

    def uniform(self, cond) -> bool:
        if any_node(cond, lambda n: isinstance(n, (ir.Load, ir.Call))):
            return False
        if depends_on([cond], self.thread_vars, self.lets):
            return False
        return all(b.scope == "global" and b not in self.written
                   for b in buffers_loaded([cond], self.lets))


def _nest(loop: ir.For):
    """(the loops of a perfect parallel nest, its innermost body)."""
    loops = [loop]
    while isinstance(loops[-1].body, ir.For) and loops[-1].body.kind == "parallel":
        loops.append(loops[-1].body)
    return loops, loops[-1].body


def _versioned(loop: ir.For, walk: _Unswitch):
    loops, store = _nest(loop)
    if not (isinstance(store, ir.Store) and store.buffer.scope == "local.fragment"):
        return None
    box = {}
    for f in loops:
        if not (isinstance(f.start, ir.Const) and isinstance(f.extent, ir.Const) and f.step == 1):
            return None
        box[f.var] = (int(f.start.value), int(f.extent.value))
    value, cast = store.value, None
    if isinstance(value, ir.Cast):
        value, cast = value.value, value.dtype
    if not isinstance(value, ir.Select):
        return None
    cond = value.cond
    if not walk.uniform(cond):
        return None
    holds, fails = holds_everywhere(cond, box), fails_everywhere(cond, box)
    if holds is None and fails is None:
        return None

    def storing(v):
        """The nest storing `v` (None: `v` is the element itself, nothing to store)."""
        if (isinstance(v, ir.Load) and v.buffer is store.buffer
                and all(ir.structural_equal(a, b) for a, b in zip(v.indices, store.indices))):
            return None
        body = ir.with_fields(store, value=v if cast is None else ir.cast_to(v, cast))
        for f in reversed(loops):
            body = ir.with_fields(f, body=body)
        return body

    result = loop
    for branch_cond, branch_value in ((fails, value.false_value), (holds, value.true_value)):
        if branch_cond is None or _is_const(branch_cond, False):
            continue
        then = storing(branch_value)
        if _is_const(branch_cond, True):
            return then if then is not None else ir.Seq(())
        if then is None:
            result = ir.If(ir.logical_not(branch_cond), result, None, loc=loop.loc)
        elif _is_const(branch_value, 0):
            result = ir.If(branch_cond, then, result, loc=loop.loc)
        # (any other value, such as the -inf of a tile wholly masked, is left to the loop as
        # written: such tiles are rare, loops usually skip them, and every version is code
        # a short kernel fetches from memory cold)
    return None if result is loop else result


def _is_const(e, value) -> bool:
    return isinstance(e, ir.Const) and (bool(e.value) is value if isinstance(value, bool)
                                        else e.value == value)
