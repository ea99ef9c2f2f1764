"""CuTe's XOR swizzle and the swizzled layout `Swizzle o offset o Layout`.

`Sw<b,m,s>` flips the `b` bits starting at bit `m` with the `b` bits starting at bit `m + s`:

    apply(x) = x ^ ((x & (((1 << b) - 1) << (m + s))) >> s)

The TMA / wgmma swizzles are `Sw<1..3, 4, 3>` over byte addresses (32/64/128-byte rows of
16-byte chunks). `recast` moves a swizzle or a composed layout between element widths, as
CuTe's recast_layout does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import check
from .int_tuple import IntTupleConst, IntTupleTuple, tuple_of
from .layout import Layout

__all__ = ["Swizzle", "ComposedLayout"]


def _log2_exact(v: int) -> int:
    """log2(v) for a positive power of two, else -1."""
    return v.bit_length() - 1 if v > 0 and v & (v - 1) == 0 else -1


def _recast_factor(old_bits: int, new_bits: int):
    """(factor, upcast): recasting to wider elements is CuTe's upcast<new/old>, to narrower
    ones downcast<old/new>."""
    old_log, new_log = _log2_exact(int(old_bits)), _log2_exact(int(new_bits))
    check(old_log >= 0 and new_log >= 0,
          f"recast expects power-of-two element sizes, got {old_bits} -> {new_bits}")
    up = new_bits >= old_bits
    return 1 << abs(new_log - old_log), up


@dataclass(frozen=True, eq=False)
class Swizzle:
    b_bits: int
    m_base: int
    s_shift: int

    @property
    def is_swizzled(self) -> bool:
        return self.b_bits > 0

    def apply(self, offset):
        """The swizzled offset (ints or numpy integer arrays)."""
        if self.b_bits <= 0:
            return offset
        yyy = ((1 << self.b_bits) - 1) << (self.m_base + self.s_shift)
        return offset ^ ((offset & yyy) >> self.s_shift)

    def recast(self, old_bits: int, new_bits: int) -> "Swizzle":
        """The same swizzle over elements of `new_bits` instead of `old_bits`: m_base moves by
        the log2 ratio (an upcast below bit 0 narrows b_bits instead)."""
        if not self.is_swizzled:
            return Swizzle(0, 0, 0)
        factor, up = _recast_factor(old_bits, new_bits)
        shift = factor.bit_length() - 1
        if not up:
            return Swizzle(self.b_bits, self.m_base + shift, self.s_shift)
        m = self.m_base - shift
        if m >= 0:
            return Swizzle(self.b_bits, m, self.s_shift)
        return Swizzle(max(self.b_bits + m, 0), 0, self.s_shift)

    def to_swizzle_mode(self):
        """The hardware swizzle (a byte-address swizzle: Sw<1..3,4,3> or none)."""
        from .swizzle_mode import SwizzleMode

        if self.b_bits == 0:
            return SwizzleMode.NONE
        check(self.m_base == 4 and self.s_shift == 3 and 1 <= self.b_bits <= 3,
              f"not a canonical GMMA swizzle atom {self}; expected Sw<{{1,2,3}},4,3>")
        return SwizzleMode.from_ordinal(self.b_bits)

    def same_as(self, other) -> bool:
        return isinstance(other, Swizzle) and (self.b_bits, self.m_base, self.s_shift) == (
            other.b_bits, other.m_base, other.s_shift)

    @staticmethod
    def parse(text: str) -> "Swizzle":
        """Read `Sw<b,m,s>`."""
        match = re.fullmatch(r"\s*Sw<\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*>\s*", str(text))
        check(match is not None, f"Swizzle text must be 'Sw<b,m,s>', got {text!r}")
        return Swizzle(*(int(g) for g in match.groups()))

    def __str__(self):
        return f"Sw<{self.b_bits},{self.m_base},{self.s_shift}>"

    __repr__ = __str__


def _recast_mode(factor: int, up: bool, shape: int, stride: int):
    """CuTe upcast/downcast of one mode: the unit-stride mode scales its shape, other modes
    their stride (a stride-1 mode cannot take a fractional stride)."""
    if factor == 1 or (up and stride == 0):
        return shape, stride
    if up:
        a = abs(stride)
        sign = 1 if stride > 0 else -1
        return -(-shape // -(-factor // a)), sign * -(-a // factor)
    if stride in (1, -1):
        return shape * factor, stride
    return shape, stride * factor


def _recast_tree(factor, up, shape, stride):
    if isinstance(shape, IntTupleTuple):
        pairs = [_recast_tree(factor, up, s, d) for s, d in zip(shape.fields, stride.fields)]
        return tuple_of(p[0] for p in pairs), tuple_of(p[1] for p in pairs)
    check(isinstance(shape, IntTupleConst) and isinstance(stride, IntTupleConst),
          "recast requires static integer shapes and strides")
    s, d = _recast_mode(factor, up, shape.value, stride.value)
    return IntTupleConst(s), IntTupleConst(d)


@dataclass(frozen=True, eq=False)
class ComposedLayout:
    """`Swizzle o offset o Layout`: x -> swizzle.apply(offset + layout(x))."""

    swizzle: Swizzle
    offset: int
    layout: Layout

    def __call__(self, coord):
        return self.swizzle.apply(self.offset + self.layout(coord))

    def recast(self, old_bits: int, new_bits: int) -> "ComposedLayout":
        """The same storage seen as elements of `new_bits` (e.g. `recast(16, 8)`: float16
        offsets to byte offsets)."""
        factor, up = _recast_factor(old_bits, new_bits)
        shape, stride = _recast_tree(factor, up, self.layout.shape_tuple,
                                     self.layout.stride_tuple)
        if up:
            check(self.offset % factor == 0,
                  f"recast cannot scale offset {self.offset} up by {factor}")
            offset = self.offset // factor
        else:
            offset = self.offset * factor
        return ComposedLayout(self.swizzle.recast(old_bits, new_bits), offset,
                              Layout(shape, stride))

    @staticmethod
    def from_tilelang(layout, buffer=None):
        """The TileLang layout as `Swizzle o offset o Layout` in element offsets, or in byte
        offsets when `buffer` (whose dtype gives the element size) is given; None when it is
        no swizzle of an affine layout."""
        from .recovery import composed_layout_from_tilelang

        composed = composed_layout_from_tilelang(layout)
        if buffer is None or composed is None:
            return composed
        return composed.recast(_element_bits(buffer), 8)

    def same_as(self, other) -> bool:
        return (isinstance(other, ComposedLayout) and self.swizzle.same_as(other.swizzle)
                and self.offset == other.offset and self.layout.same_as(other.layout))

    def __str__(self):
        return f"{self.swizzle} o {self.offset} o {self.layout}"

    __repr__ = __str__


def _element_bits(buffer) -> int:
    from ...ir.dtype import DType

    dtype = getattr(buffer, "dtype", None)
    check(dtype is not None, f"expected a buffer with a dtype, got {buffer!r}")
    return DType(dtype).bits

