"""Constant integer bounds of sums and atoms, under an analyzer's variable ranges.

A bound is a pair `(lo, hi)` of Python ints, `None` for an unbounded side; both ends are
inclusive. Bounds are sound (every value the expression can take lies inside) but not tight:
interval arithmetic loses correlations (`x - x//8*8` would be [-inf, inf] if the simplifier
had not already turned it into `x % 8`).

`int32`/`int64` values are treated as mathematical integers (overflow is ignored, like the
rest of the simplifier); narrower and unsigned types contribute their value ranges.

Symbolic ranges (`bind(i, 0, n)` with unknown n) are used by `sym_bound`: it substitutes each
such variable by its symbolic end (the lower or upper one, by the sign of its coefficient) and
bounds the result, so `i - n` gives hi = -1 even though neither i nor n is bounded.
"""

from __future__ import annotations

from . import atoms as A

UNBOUNDED = (None, None)


def dtype_range(dt):
    """Value range of a dtype that the analysis may rely on; int32/int64 count as unbounded."""
    if dt.is_bool:
        return (0, 1)
    if dt.is_int:
        if dt.is_unsigned:
            return (0, (1 << dt.bits) - 1)
        if dt.bits < 32:
            return (-(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1)
    return UNBOUNDED


def real_range(dt):
    """The exact value range of an integer or bool dtype."""
    if dt.is_bool:
        return (0, 1)
    if dt.is_int:
        return (dt.min_value(), dt.max_value())
    return UNBOUNDED


def fits(b, rng) -> bool:
    lo, hi = b
    rlo, rhi = rng
    return ((rlo is None or (lo is not None and lo >= rlo))
            and (rhi is None or (hi is not None and hi <= rhi)))


def intersect(a, b):
    lo = a[0] if b[0] is None else b[0] if a[0] is None else max(a[0], b[0])
    hi = a[1] if b[1] is None else b[1] if a[1] is None else min(a[1], b[1])
    return (lo, hi)


def union(a, b):
    lo = None if a[0] is None or b[0] is None else min(a[0], b[0])
    hi = None if a[1] is None or b[1] is None else max(a[1], b[1])
    return (lo, hi)


def scale(b, k):
    lo, hi = b
    if k >= 0:
        return (None if lo is None else lo * k, None if hi is None else hi * k)
    return (None if hi is None else hi * k, None if lo is None else lo * k)


def mul(a, b):
    alo, ahi = a
    blo, bhi = b
    if None not in (alo, ahi, blo, bhi):
        p = (alo * blo, alo * bhi, ahi * blo, ahi * bhi)
        return (min(p), max(p))
    # one side is half-open: only the sign-definite cases are worth the trouble
    if alo is not None and blo is not None and alo >= 0 and blo >= 0:
        return (alo * blo, None if ahi is None or bhi is None else ahi * bhi)
    return UNBOUNDED


def fdiv(b, c):
    lo, hi = b
    return (None if lo is None else lo // c, None if hi is None else hi // c)


def fmod(b, c):
    lo, hi = b
    if lo is not None and hi is not None and lo // c == hi // c:
        k = lo // c
        return (lo - k * c, hi - k * c)
    if lo is not None and lo >= 0 and hi is not None:
        return (0, min(hi, c - 1))
    return (0, c - 1)


def _minb(a, b):
    lo = None if a[0] is None or b[0] is None else min(a[0], b[0])
    hi = b[1] if a[1] is None else a[1] if b[1] is None else min(a[1], b[1])
    return (lo, hi)


def _maxb(a, b):
    lo = b[0] if a[0] is None else a[0] if b[0] is None else max(a[0], b[0])
    hi = None if a[1] is None or b[1] is None else max(a[1], b[1])
    return (lo, hi)


# ---- sums and atoms --------------------------------------------------------------------------


def sum_bound(ana, s: dict):
    lo = hi = 0
    abound = ana._abound
    for m, k in s.items():
        if not m:
            if lo is not None:
                lo += k
            if hi is not None:
                hi += k
            continue
        if len(m) == 1:
            b = abound.get(m[0])
            if b is None:
                b = atom_bound(ana, A.ATOMS[m[0]])
        else:
            b = mono_bound(ana, m)
        blo, bhi = b
        if k > 0:
            lo = None if lo is None or blo is None else lo + blo * k
            hi = None if hi is None or bhi is None else hi + bhi * k
        else:
            lo = None if lo is None or bhi is None else lo + bhi * k
            hi = None if hi is None or blo is None else hi + blo * k
        if lo is None and hi is None:
            return UNBOUNDED
    return (lo, hi)


def mono_bound(ana, m: tuple):
    b = None
    for aid in m:
        ab = ana._abound.get(aid)
        if ab is None:
            ab = atom_bound(ana, A.ATOMS[aid])
        b = ab if b is None else mul(b, ab)
    if len(m) == 2 and m[0] == m[1] and b is not None:
        # a square is never negative
        lo, hi = b
        b = (max(lo, 0) if lo is not None else 0, hi)
    return b


def atom_bound(ana, a) -> tuple:
    b = ana._abound.get(a.id)
    if b is not None:
        return b
    ana._abound[a.id] = UNBOUNDED  # guards against cycles; replaced below
    k = a.kind
    if k == "var":
        b = ana._vb.get(a.id)
        if b is None:
            b = dtype_range(a.dtype)
    elif k == "fdiv":
        s, c = a.data
        b = fdiv(sum_bound(ana, s), c)
    elif k == "fmod":
        s, c = a.data
        b = fmod(sum_bound(ana, s), c)
    elif k == "min":
        b = _minb(sum_bound(ana, a.data[0]), sum_bound(ana, a.data[1]))
    elif k == "max":
        b = _maxb(sum_bound(ana, a.data[0]), sum_bound(ana, a.data[1]))
    else:
        b = opaque_bound(ana, a.data[1], a.dtype)
    ana._abound[a.id] = b
    return b


def opaque_bound(ana, hint, dt):
    kind = hint[0]
    rng = dtype_range(dt)
    if kind == "sel":
        return union(sum_bound(ana, hint[1]), sum_bound(ana, hint[2]))
    if kind == "cast":  # a value that fits is kept; otherwise it wraps
        b = ana._expr_bound(hint[1])
        return b if fits(b, real_range(dt)) else rng
    if kind == "bit":
        op, sa, sb = hint[1], hint[2], hint[3]
        return intersect(_bitop_bound(op, sum_bound(ana, sa), sum_bound(ana, sb)), rng)
    if kind == "tdiv":
        lo, hi = sum_bound(ana, hint[1])
        c = hint[2]
        if lo is None or hi is None:
            return rng
        return (_tdiv(lo, c), _tdiv(hi, c)) if c > 0 else (_tdiv(hi, c), _tdiv(lo, c))
    if kind == "tmod":
        lo, hi = sum_bound(ana, hint[1])
        c = abs(hint[2]) - 1
        return (0 if lo is not None and lo >= 0 else -c, 0 if hi is not None and hi <= 0 else c)
    if kind == "sdiv":  # floor division by a non-constant divisor
        a, b = sum_bound(ana, hint[1]), sum_bound(ana, hint[2])
        if b[0] is not None and b[0] > 0 and a[0] is not None and a[0] >= 0:
            return (0, None if a[1] is None else a[1] // b[0])
        return rng
    if kind == "smod":
        b = sum_bound(ana, hint[2])
        if b[0] is not None and b[0] > 0:
            return (0, None if b[1] is None else b[1] - 1)
        if b[1] is not None and b[1] < 0:
            return (None if b[0] is None else b[0] + 1, 0)
        return rng
    return rng


def _tdiv(a, c):
    q = abs(a) // abs(c)
    return q if (a >= 0) == (c > 0) else -q


def _bitop_bound(op, a, b):
    alo, ahi = a
    blo, bhi = b
    a_nn = alo is not None and alo >= 0
    b_nn = blo is not None and blo >= 0
    if op == "bitand":
        # x & y with y >= 0 keeps a subset of y's bits: the result lies in [0, y]
        his = [h for nn, h in ((a_nn, ahi), (b_nn, bhi)) if nn and h is not None]
        if a_nn or b_nn:
            return (0, min(his) if his else None)
        return UNBOUNDED
    if op in ("bitor", "bitxor"):
        if a_nn and b_nn:
            if ahi is None or bhi is None:
                return (0, None)
            top = (1 << max(ahi, bhi).bit_length()) - 1
            return ((max(alo, blo) if op == "bitor" else 0), top)
        return UNBOUNDED
    if op == "shr":
        if a_nn and b_nn:
            return (alo >> bhi if bhi is not None else 0, None if ahi is None else ahi >> blo)
        return UNBOUNDED
    if op == "shl":
        if a_nn and b_nn and ahi is not None and bhi is not None and bhi < 64:
            return (alo << blo, ahi << bhi)
        return UNBOUNDED
    return UNBOUNDED


# ---- symbolic ranges -------------------------------------------------------------------------


def sym_bound(ana, s: dict):
    """The bound of `s` after replacing variables of symbolic range by their symbolic ends
    (a few rounds, for ranges that refer to other such variables), intersected with the plain
    interval bound."""
    sym = ana._sym
    best = sum_bound(ana, s)
    lo_s = hi_s = s
    for _ in range(3):
        changed = False
        new_lo, new_hi = {}, {}
        for src, dst, low in ((lo_s, new_lo, True), (hi_s, new_hi, False)):
            for m, k in src.items():
                ends = sym.get(m[0]) if len(m) == 1 else None
                end = None
                if ends is not None:
                    end = ends[0] if (k > 0) == low else ends[1]
                if end is None:
                    dst[m] = dst.get(m, 0) + k
                else:
                    changed = True
                    for m2, k2 in end.items():
                        dst[m2] = dst.get(m2, 0) + k2 * k
        if not changed:
            break
        lo_s = {m: k for m, k in new_lo.items() if k}
        hi_s = {m: k for m, k in new_hi.items() if k}
        best = intersect(best, (sum_bound(ana, lo_s)[0], sum_bound(ana, hi_s)[1]))
    return best
