"""Values as 32-bit words and back, built as IR: the meaning of the explicit-width memory
accesses (`T.ldg64`, `T.sts128`, ...) and of reinterpreting a vector as a vector of another
lane width (`T.reinterpret(T.ldg64(x[i:i + 4]), T.float16x4)`).

Word j holds bits [32j, 32j + 32) of the values laid out one after the other in memory order
(little-endian, as on the GPU): two float16 share a word (the first in the low half), a 64-bit
value spans two (the low word first).
"""

from __future__ import annotations

from . import nodes as ir
from .dtype import DType

WORD = DType("uint32")
WORD_BITS = 32
# element widths that tile a word, or that a whole number of words holds
PACKABLE_BITS = (8, 16, 32, 64)


def _uint(bits: int) -> DType:
    return DType(f"uint{bits}")


def _as_uint(value: ir.Expr) -> ir.Expr:
    """The bits of `value` as an unsigned integer of its own width."""
    target = _uint(value.dtype.bits)
    if value.dtype is target:
        return value
    return ir.Call("reinterpret", (value,), target)


def _from_uint(bits: ir.Expr, dtype: DType) -> ir.Expr:
    """The unsigned integer `bits` (of dtype's width) read as a `dtype` value."""
    if bits.dtype is dtype:
        return bits
    return ir.Call("reinterpret", (bits,), dtype)


def check_packable(dtype: DType, what: str):
    """Raises TypeError unless `dtype` is a scalar type of 8, 16, 32 or 64 bits."""
    if dtype.lanes != 1 or dtype.is_bool or dtype.bits not in PACKABLE_BITS:
        raise TypeError(f"{what}: elements of {dtype} cannot be packed into 32-bit words "
                        f"(8-, 16-, 32- and 64-bit types can)")


def pack_words(values) -> tuple:
    """The 32-bit words (uint32 expressions) holding `values`, scalar expressions of one dtype
    whose total width is a whole number of words."""
    values = tuple(ir.as_expr(v) for v in values)
    dtype = values[0].dtype
    check_packable(dtype, "packing")
    if any(v.dtype is not dtype for v in values):
        raise TypeError(f"packing values of different types: {[str(v.dtype) for v in values]}")
    bits = dtype.bits
    if (bits * len(values)) % WORD_BITS:
        raise ValueError(f"{len(values)} values of {dtype} are {bits * len(values)} bits, not "
                         "a whole number of 32-bit words")
    if bits == WORD_BITS:
        return tuple(_as_uint(v) for v in values)
    if bits == 2 * WORD_BITS:
        words = []
        for v in values:
            u = _as_uint(v)
            words.append(ir.cast_to(u, WORD))
            words.append(ir.cast_to(ir.binary("shr", u, ir.const(WORD_BITS, u.dtype)), WORD))
        return tuple(words)
    per_word = WORD_BITS // bits
    words = []
    for w in range(len(values) // per_word):
        word = None
        for m in range(per_word):
            part = ir.cast_to(_as_uint(values[w * per_word + m]), WORD)
            if m:
                part = ir.binary("shl", part, ir.const(m * bits, WORD))
            word = part if word is None else ir.binary("bitor", word, part)
        words.append(word)
    return tuple(words)


def unpack_words(words, dtype) -> tuple:
    """The `dtype` values the uint32 expressions `words` hold (inverse of `pack_words`)."""
    dtype = DType(dtype)
    check_packable(dtype, "unpacking")
    words = tuple(ir.cast_to(w, WORD) for w in words)
    bits = dtype.bits
    if bits == WORD_BITS:
        return tuple(_from_uint(w, dtype) for w in words)
    if bits == 2 * WORD_BITS:
        if len(words) % 2:
            raise ValueError(f"{len(words)} words do not hold whole {dtype} values")
        u64 = _uint(64)
        out = []
        for lo, hi in zip(words[::2], words[1::2]):
            high = ir.binary("shl", ir.cast_to(hi, u64), ir.const(WORD_BITS, u64))
            out.append(_from_uint(ir.binary("bitor", ir.cast_to(lo, u64), high), dtype))
        return tuple(out)
    narrow = _uint(bits)
    out = []
    for w in words:
        for m in range(WORD_BITS // bits):
            part = ir.binary("shr", w, ir.const(m * bits, WORD)) if m else w
            out.append(_from_uint(ir.cast_to(part, narrow), dtype))
    return tuple(out)
