"""Specialise a function on dynamic sizes that are multiples of an alignment.

A size the compiler cannot see — `T.dynamic("k")`, `T.dyn["K"]` — stops it from proving that
rows of a global tensor start on 16-byte boundaries, so copies fall back to element loads
with per-element bounds checks, and TMA (which needs 16-byte row strides) is out of reach: a
4096^3 GEMM with symbolic M, N, K ran at 0.30x of the same kernel with constants. The
reference assumes such sizes are aligned; we compile that case too, and keep the exact one.

Expects: a PrimFunc (tile IR) whose global buffers may have symbolic sizes.

Guarantees: `alignment_of_sizes(func)` maps each size variable that sets a row stride of a
global tensor — it is the extent of some dimension other than the outermost — to the number
of elements that makes every such stride a multiple of 16 bytes (16 / the narrowest element
size there). Variables that are scalar parameters, or only ever outermost extents, are not
listed: an outermost extent moves no row start.

`align_sizes(func, alignment)` returns the function with every listed variable v replaced by
`a * v_q` everywhere (buffer shapes, the kernels' grids and bodies), where `v_q` is a new size
variable named after v. The result is the same program for every call in which each v is a
multiple of its a, and the analyzer can now prove divisibility by coefficients alone. The
host passes `v // a` for `v_q` (`derived` maps v_q -> (v, a)) after checking `v % a == 0`;
calls that fail the check run the function as written (engine/build.py keeps both).
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.dtype import PACKED_INTS
from ..ir.visitor import Mutator, collect

TMA_ROW_BYTES = 16


def alignment_of_sizes(func: ir.PrimFunc) -> dict:
    """{size Var: alignment in elements} for the sizes that set a row stride (see above)."""
    scalars = {p for p in func.params if isinstance(p, ir.Var)}
    out: dict = {}
    for b in list(func.buffer_params) + list(func.workspaces):
        if b.strides is not None or (b.dtype.bits < 8 and b.dtype.base not in PACKED_INTS):
            continue
        for dim in b.shape[1:]:
            if isinstance(dim, ir.Var) and dim not in scalars:
                # elements of 16 bytes (packed int4: two a byte, transform/pack_sub_byte.py)
                a = max(1, TMA_ROW_BYTES * 8 // (b.dtype.bits * b.dtype.lanes))
                out[dim] = max(out.get(dim, 1), a)
    # a variable that also appears in a compound extent keeps the exact form: the analysis
    # of `v + 1` or `2 * v` would not improve, and the guard would cost a variant for nothing
    for b in list(func.buffer_params) + list(func.workspaces):
        for dim in b.shape:
            if isinstance(dim, ir.Expr) and not isinstance(dim, ir.Var):
                for v in collect(dim, lambda n: isinstance(n, ir.Var)):
                    out.pop(v, None)
    return {v: a for v, a in out.items() if a > 1}


class _Align(Mutator):
    def __init__(self, replace: dict):
        self.replace = replace  # Var -> Expr
        self.buffers: dict = {}

    def visit_Var(self, v):
        return self.replace.get(v, v)

    def visit_Buffer(self, b):
        new = self.buffers.get(b)
        if new is not None:
            return new
        shape = tuple(self.visit(s) if isinstance(s, ir.Expr) else s for s in b.shape)
        strides = None if b.strides is None else tuple(
            self.visit(s) if isinstance(s, ir.Expr) else s for s in b.strides)
        if all(x is y for x, y in zip(shape, b.shape)) and strides == b.strides and \
                b.view_of is None:
            self.buffers[b] = b
            return b
        view = self.visit_Buffer(b.view_of) if b.view_of is not None else None
        new = ir.Buffer(b.name, shape, b.dtype, b.scope, strides, data=view,
                        elem_offset=b.elem_offset, loc=b.loc,
                        computed_address=b.computed_address)
        self.buffers[b] = new
        return new


def align_sizes(func: ir.PrimFunc, alignment: dict):
    """(the specialised function, {v_q: (v, a)}) for `alignment` = {v: a}."""
    replace, derived = {}, {}
    for v, a in alignment.items():
        vq = ir.Var(f"{v.name}_div{a}", v.dtype)
        replace[v] = ir.binary("mul", vq, a)
        derived[vq] = (v, a)
    m = _Align(replace)
    params = tuple(m.visit_Buffer(p) if isinstance(p, ir.Buffer) else p for p in func.params)
    workspaces = tuple(m.visit_Buffer(w) for w in func.workspaces)
    outputs = tuple(m.visit_Buffer(o) if isinstance(o, ir.Buffer) else o for o in func.outputs)
    body = m.visit(func.body)
    return func.with_body(body, params=params, workspaces=workspaces, outputs=outputs), derived
