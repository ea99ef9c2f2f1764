"""Element-wise `T.Parallel` nests read as tile operations: the loops of a perfect nest, and
which loop variable each index of an access runs along (transform/parallel_copies.py,
transform/stage_fragment_atomics.py)."""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.visitor import collect


def parallel_nest(loop: ir.For, annotated: bool = False):
    """(loops, body) of a perfect chain of parallel loops starting at 0, unannotated unless
    `annotated` (layout inference's loop layouts)."""
    loops, s = [], loop
    while isinstance(s, ir.For) and s.kind == "parallel":
        if (s.annotations and not annotated) or s.step != 1 or ir.int_value(s.start) != 0:
            return None
        loops.append(s)
        s = s.body
    return loops, s


def match_indices(analyzer, indices, loop_vars):
    """Per index: (loop var or None, start). None if an index is not `start + var` or a loop
    variable appears twice."""
    out, used = [], set()
    for idx in indices:
        found = None
        for v in loop_vars:
            lin = analyzer.detect_linear(idx, v)
            if lin is None:
                return None
            coef, rest = lin
            if isinstance(coef, int) and coef == 0:
                continue
            if found is not None or not (isinstance(coef, int) and coef == 1) or id(v) in used:
                return None
            found = (v, rest)
        if found is None:
            if any(any(v is lv for lv in loop_vars)
                   for v in collect(idx, lambda n: isinstance(n, ir.Var))):
                return None
            found = (None, idx)
        if found[0] is not None:
            used.add(id(found[0]))
        out.append(found)
    return out if len(used) == len(loop_vars) else None
