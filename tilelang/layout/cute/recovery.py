"""Reading a TileLang `Layout` back as CuTe: an affine layout, a coordinate-valued
(multi-output) layout, or a swizzle over an affine layout.

All three work on the layout's address table: the physical offset of every logical index
(outputs linearised row-major), enumerated once with numpy. A candidate is built from a few
probes and then checked against the whole table, so an answer is exact for every index, and
a layout that is not of the asked-for form (a non-linear map, dependent output axes) gives
None.

* Strides: each input dim is split into one mode per factor 2 of its extent plus an odd
  remainder; a mode's stride is the (unswizzled, offset-free) address of the index that
  activates only that mode. Splitting by bits lets a dim whose halves live in distant parts of
  the address space (a swizzle atom tiled by column blocks) still be described.
* Swizzle: XOR-ing the address of each one-bit index against the address of index 0 gives that
  bit's image. A plain bit maps to one address bit; a swizzled bit to two, {lo, lo + s}, whose
  low bit is also some plain bit's image (that cross-check tells a swizzle from a two-bit
  image of an odd stride). The lowest run of such targets sharing one s gives Sw<b, lo, s>.
"""

from __future__ import annotations

import numpy as np

from .errors import check
from .int_tuple import (IntTupleConst, IntTupleScaledBasis, ZERO, add, is_congruent, is_const,
                        mul, tuple_of)
from .layout import Layout, _flat_modes, coalesce
from .swizzle import ComposedLayout, Swizzle

__all__ = ["layout_from_tilelang", "layout_from_tilelang_hierarchical",
           "composed_layout_from_tilelang"]

_IDENTITY = Swizzle(0, 0, 0)


# =============================================================================================
# Address tables
# =============================================================================================


def _static_input_shape(layout) -> tuple:
    shape = []
    for extent in layout.get_input_shape():
        value = extent if isinstance(extent, (int, np.integer)) else getattr(extent, "value", None)
        check(isinstance(value, (int, np.integer)),
              f"input extent {extent} of a shared tensor layout must be constant")
        shape.append(int(value))
    return tuple(shape)


def _address_table(layout) -> np.ndarray:
    """The physical offset of every logical index (int64 array of the input shape)."""
    _static_input_shape(layout)
    return np.asarray(layout.offsets(), dtype=np.int64)


def _axis_tables(layout) -> list:
    """One table per output axis of a (possibly multi-output) layout."""
    shape = _static_input_shape(layout)
    outs = layout._fn(*np.indices(shape, dtype=np.int64))
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    return [np.broadcast_to(np.asarray(o, dtype=np.int64), shape) for o in outs]


def _column_major_index(shape) -> np.ndarray:
    """The column-major linear index of every logical index (mode 0 fastest, as CuTe)."""
    idx = np.indices(shape, dtype=np.int64)
    linear = np.zeros(shape, dtype=np.int64)
    place = 1
    for k, extent in enumerate(shape):
        linear += idx[k] * place
        place *= max(extent, 1)
    return linear


def _evaluate_flat(plain: Layout, linear: np.ndarray) -> np.ndarray:
    shapes, strides = _flat_modes(plain)
    out = np.zeros_like(linear)
    rest = linear
    for s, d in zip(shapes, strides):
        out += (rest % s.value) * d.value
        rest = rest // s.value
    return out


# =============================================================================================
# Recovery
# =============================================================================================


def _recover_plain(table: np.ndarray, swizzle: Swizzle, offset: int):
    """The affine layout L with table == swizzle(offset + L(column-major index)), or None."""
    shape = table.shape
    shapes, strides = [], []
    for k, extent in enumerate(shape):
        if extent <= 1:
            shapes.append(1)
            strides.append(0)
            continue
        rest, place = extent, 1
        while rest > 1:
            part = 2 if rest % 2 == 0 else rest
            probe = [0] * len(shape)
            probe[k] = place
            shapes.append(part)
            strides.append(int(swizzle.apply(int(table[tuple(probe)]))) - offset)
            rest //= part
            place *= part
    plain = coalesce(Layout(tuple_of(map(IntTupleConst, shapes)),
                            tuple_of(map(IntTupleConst, strides))))
    if swizzle.is_swizzled and swizzle.m_base + swizzle.s_shift + swizzle.b_bits >= 31:
        return None  # beyond 32-bit addresses, as the reference
    expected = swizzle.apply(offset + _evaluate_flat(plain, _column_major_index(shape)))
    return plain if np.array_equal(expected, table) else None


def _shape_of(table: np.ndarray):
    return tuple_of(IntTupleConst(int(s)) for s in table.shape)


def _layout_from_table(table: np.ndarray):
    if table.ndim == 0:
        return None
    plain = _recover_plain(table, _IDENTITY, 0)
    return None if plain is None else plain.with_shape(_shape_of(table))


def layout_from_tilelang(layout):
    """The layout as an affine CuTe layout congruent to its input shape, or None."""
    return _layout_from_table(_address_table(layout))


def layout_from_tilelang_hierarchical(layout):
    """Each output axis recovered on its own and rerouted onto basis E<i>; None when an axis
    is not affine or one input leaf drives two axes (no CuTe layout has such a stride)."""
    axes = []
    for table in _axis_tables(layout):
        axis = _layout_from_table(table)
        if axis is None:
            return None
        axes.append(axis)
    # Conform every axis to one shape profile: threading the refined profile forward hands the
    # last axis all split points, and refining the earlier ones to it makes all shapes equal.
    # with_shape is an exact composition, so no axis changes as a function.
    conformed = list(axes)
    for i in range(1, len(axes)):
        conformed[i] = axes[i].with_shape(conformed[i - 1].shape_tuple)
    finest = conformed[-1].shape_tuple
    for i in range(len(axes) - 1):
        conformed[i] = axes[i].with_shape(finest)
        check(conformed[i].shape_tuple.same_as(finest),
              f"hierarchical recovery produced incompatible axis profiles: "
              f"{conformed[i].shape_tuple} vs {finest}")
    # Broadcast (stride-0) leaves stay the plain additive identity so that leaves no axis
    # drives keep a scalar stride.
    stride = ZERO
    for i, axis in enumerate(conformed):
        basis = IntTupleScaledBasis(IntTupleConst(1), (i,))
        stride = add(stride, axis.stride_tuple.map_leaves(
            lambda d: d if is_const(d, 0) else mul(d, basis)))
    if not is_congruent(finest, stride):
        return None
    return Layout(finest, stride)


def _detect_swizzle(table: np.ndarray):
    """The XOR swizzle the table's one-bit images reveal (identity when none); None when the
    images are not a swizzle's."""
    origin = int(table[(0,) * table.ndim])
    images, plain_bits = [], 0
    for k, extent in enumerate(table.shape):
        trailing_zeros = (extent & -extent).bit_length() - 1
        for p in range(trailing_zeros):  # bit p toggles cleanly only when 2^(p+1) | extent
            probe = [0] * table.ndim
            probe[k] = 1 << p
            image = (int(table[tuple(probe)]) ^ origin) & ((1 << 64) - 1)
            images.append(image)
            if bin(image).count("1") == 1:
                plain_bits |= image
    shift_at = {}  # swizzle target bit -> its source distance
    for image in images:
        if bin(image).count("1") != 2:
            continue
        lo, hi = (image & -image).bit_length() - 1, image.bit_length() - 1
        if not plain_bits & (1 << lo):
            continue  # a two-bit image of a plain stride
        if lo in shift_at:
            return None  # two sources on one target bit
        shift_at[lo] = hi - lo
    if not shift_at:
        return _IDENTITY
    m_base = min(shift_at)
    s_shift = shift_at[m_base]
    b_bits = 0
    while shift_at.get(m_base + b_bits) == s_shift:
        b_bits += 1
    if s_shift < b_bits:
        return None  # source and target fields overlap
    return Swizzle(b_bits, m_base, s_shift)


def composed_layout_from_tilelang(layout):
    """The layout as Swizzle o offset o Layout (element offsets), congruent to its input
    shape, or None."""
    table = _address_table(layout)
    if table.ndim == 0:
        return None
    swizzle = _detect_swizzle(table)
    if swizzle is None:
        return None
    # The swizzle is an involution, so the base offset is Sw(A(0)).
    offset = int(swizzle.apply(int(table[(0,) * table.ndim])))
    plain = _recover_plain(table, swizzle, offset)
    if plain is None:
        return None
    return ComposedLayout(swizzle, offset, plain.with_shape(_shape_of(table)))
