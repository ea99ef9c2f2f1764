"""Fragment derivations the lowering needs beyond the layout library: a unit dim inserted
(keep-dim reductions), a lower-rank fragment extended to a loop's iteration space, the fully
replicated fragment of a block-level scalar, dims permuted (transposed register operands,
accesses in another dim order) and a lower-rank map placed in a fragment whose other dims are
held whole by every thread (dims indexed by a serial loop variable); per-value tables written
as affine functions of a fragment's value digits; a dim split in two (a window of a dim
read at a runtime multiple of the window's size)."""

from __future__ import annotations

import numpy as np

from ...ir import nodes as ir
from ...layout import Fragment
from ...layout.build import replicated_fragment  # noqa: F401 (imported from here)


def _place(strides, dims, ndim):
    out = [0] * ndim
    for k, d in enumerate(dims):
        out[d] = strides[k]
    return tuple(out)


def insert_unit_dim(frag: Fragment, dim: int) -> Fragment:
    """The same map over a shape with an extra dim of extent 1 at `dim`."""
    shape = list(frag.shape)
    shape.insert(dim, 1)

    def ins(modes):
        return [(m.extent, tuple(list(m.strides[:dim]) + [0] + list(m.strides[dim:])))
                for m in modes]

    return Fragment(tuple(shape), ins(frag.thread_modes), ins(frag.value_modes))


def extend_fragment(frag: Fragment, dims, extents, num_threads: int) -> Fragment:
    """A fragment over `extents` whose projection on `dims` is `frag`: the missing dims are
    spread first over frag's replicated threads, then over new per-thread values."""
    nd = len(extents)
    thread_modes, free = [], []
    for m in frag.thread_modes:
        if any(m.strides):
            thread_modes.append((m.extent, _place(m.strides, dims, nd)))
        else:
            free.append(len(thread_modes))
            thread_modes.append((m.extent, (0,) * nd))
    value_modes = [(m.extent, _place(m.strides, dims, nd)) for m in frag.value_modes]
    for d in reversed([d for d in range(nd) if d not in dims]):
        need, stride = extents[d], 1
        for idx in list(free):
            e = thread_modes[idx][0]
            if e > 1 and need % e == 0:
                unit = tuple(stride if k == d else 0 for k in range(nd))
                thread_modes[idx] = (e, unit)
                free.remove(idx)
                stride *= e
                need //= e
        if need > 1:
            value_modes.append((need, tuple(stride if k == d else 0 for k in range(nd))))
    return Fragment(tuple(extents), thread_modes, value_modes)




def permute_dims(frag: Fragment, order) -> Fragment:
    """The same map with dims reordered: new dim k is old dim order[k]."""
    order = list(order)
    if order == list(range(frag.ndim)):
        return frag

    def perm(modes):
        return [(m.extent, tuple(m.strides[o] for o in order)) for m in modes]

    return Fragment(tuple(frag.shape[o] for o in order), perm(frag.thread_modes),
                    perm(frag.value_modes))


def transpose_fragment(frag: Fragment) -> Fragment:
    """The map of a register tile stored transposed (its last two dims swapped): an
    instruction's operand layout over a buffer indexed the other way round."""
    order = list(range(frag.ndim))
    order[-2], order[-1] = order[-1], order[-2]
    return permute_dims(frag, order)


def place_dims(base: Fragment, dims, shape, fixed=()) -> Fragment:
    """A fragment over `shape` whose dims `dims` (in base's dim order) map like `base`, whose
    `fixed` dims each get a value mode of their own (outermost: every thread holds the whole
    dim, the register slot moves by a multiple of base's values along it) and whose other
    dims have extent 1."""
    nd = len(shape)
    dims = list(dims)

    def spread(modes):
        return [(m.extent, _place(m.strides, dims, nd)) for m in modes]

    values = spread(base.value_modes)
    for d in fixed:
        if shape[d] > 1:
            values.append((shape[d], tuple(int(k == d) for k in range(nd))))
    return Fragment(tuple(shape), spread(base.thread_modes), values)


def split_dim(frag: Fragment, dim: int, period: int) -> Fragment | None:
    """The same map over the shape with dim `dim` (extent n) replaced by (n // period,
    period): element (.., q, r, ..) is element (.., q * period + r, ..). A mode moving along
    the dim by a multiple of `period` moves the outer dim; one moving by less moves the inner
    dim, and is split in two where its extent crosses the period (the thread or value index
    keeps its digits: a mode of extent a * b is the modes a, b). None when the inner moves
    could carry into the outer dim (their largest sum reaches `period`), or the layout
    covers more than its shape."""
    n = frag.shape[dim]
    if period < 1 or n % period or frag.guard_dims:
        return None

    def at(strides, outer, inner):
        return strides[:dim] + (outer, inner) + strides[dim + 1:]

    out, reach = ([], []), 0  # reach: the largest sum of inner moves
    for modes, dst in zip((frag.thread_modes, frag.value_modes), out):
        for m in modes:
            s, e = m.strides[dim], m.extent
            if s % period == 0:  # includes modes not moving along the dim
                dst.append((e, at(m.strides, s // period, 0)))
                continue
            inner = e
            if s * e > period:
                if period % s or e % (period // s):
                    return None
                inner = period // s
            dst.append((inner, at(m.strides, 0, s)))
            if inner < e:
                dst.append((e // inner, at(m.strides, 1, 0)))
            reach += s * (inner - 1)
    if reach >= period:
        return None
    shape = frag.shape[:dim] + (n // period, period) + frag.shape[dim + 1:]
    return Fragment(shape, out[0], out[1])


def value_digit_exprs(layout, v):
    """The mixed-radix digits of value index `v` over the layout's value modes."""
    out, prefix = [], 1
    for m in layout.value_modes:
        d = v if prefix == 1 else ir.binary("floordiv", v, prefix)
        if m.extent != layout.num_values // prefix or prefix * m.extent != layout.num_values:
            d = ir.binary("floormod", d, m.extent) if m.extent > 1 else ir.const(0)
        out.append(d if m.extent > 1 else ir.const(0))
        prefix *= m.extent
    return out


def fit_affine_in_digits(layout, table, valid=None, bound=None):
    """Express `table[v]` (one int per value index) as Σ digit_k * c_k + c0 over the layout's
    value digits; returns a function v -> Expr, or None when it is not of that form.

    With `valid` (a bool per value index), only those entries must match: the others are
    iterations whose element lies outside the fragment (the program guards them, or reads
    undefined values), where any slot in [0, `bound`) will do, so the fit must stay inside
    it there too."""
    V = layout.num_values
    exts = [m.extent for m in layout.value_modes]
    prefix = np.cumprod([1] + exts)[:-1]
    vs = np.arange(V)
    digits = [(vs // p) % e for p, e in zip(prefix, exts)]
    if valid is not None and not np.all(valid):
        return _fit_where_valid(layout, np.asarray(table), np.asarray(valid, bool), digits,
                                bound)
    if np.array_equal(table, vs):
        return lambda v: v
    c0 = int(table[0])
    coeffs = []
    for k, (p, e) in enumerate(zip(prefix, exts)):
        coeffs.append(int(table[p]) - c0 if e > 1 else 0)
    pred = c0 + sum(d * c for d, c in zip(digits, coeffs))
    if not np.array_equal(pred, table):
        return None
    return _affine_expr(layout, c0, coeffs)


def _fit_where_valid(layout, table, valid, digits, bound):
    vs = np.arange(layout.num_values)
    if not valid.any() or bound is None:
        return None
    if np.array_equal(table[valid], vs[valid]) and vs.max() < bound:
        return lambda v: v
    A = np.stack([np.ones(len(vs))] + [d.astype(float) for d in digits], axis=1)
    sol, *_ = np.linalg.lstsq(A[valid], table[valid].astype(float), rcond=None)
    c = np.rint(sol).astype(np.int64)
    pred = c[0] + sum(d * ck for d, ck in zip(digits, c[1:]))
    if not np.array_equal(pred[valid], table[valid]) or pred.min() < 0 or pred.max() >= bound:
        return None
    return _affine_expr(layout, int(c[0]), [int(x) for x in c[1:]])


def _affine_expr(layout, c0, coeffs):
    def make(v):
        total = ir.const(c0)
        for d, c in zip(value_digit_exprs(layout, v), coeffs):
            if c:
                total = ir.binary("add", total, ir.binary("mul", d, c))
        return total

    return make
