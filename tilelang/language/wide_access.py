"""Explicit-width memory accesses: `T.ldg32/64/128/256` and `T.stg32/64/128/256` on global
memory, `T.lds32/64/128` and `T.sts32/64/128` on shared memory.

    words = T.ldg128(x[i:i + 4])                          # 4 x uint32, one 128-bit load
    y[i:i + 4] = T.reinterpret(words, T.float32x4)
    T.stg64(y[j:j + 2], T.ldg64(x[j:j + 2]), pred=j < n)  # skipped where the predicate is false

A load reads `width` bits starting at its element (a region must cover exactly those bits)
and gives them as 32-bit words: a uint32 for the 32-bit forms, a vector of uint32 lanes for
the wider ones; with `pred=` false it reads nothing and gives zeros. A store writes the bits
of its value (a scalar or vector whose total width is `width`) starting at its element. On
CUDA each is one instruction (`ld.global.v4.u32`, ...; the 256-bit forms two) through the
`tl::load_global_128`-style helpers of tl/wide_access.cuh, so the address must be aligned to
the access width, which the CPU interpreter checks; there each access is the element loads and
stores it stands for.
"""

from __future__ import annotations

from ..frontend.builder import current_builder, current_loc, emit, error
from ..ir import bits as ir_bits
from ..ir import nodes as ir
from ..ir.dtype import DType
from .vectors import Vector, VectorVar

WIDTHS = (32, 64, 128, 256)
_SHARED = ("shared", "shared.dyn")


def _start(ref, width: int, what: str, scopes) -> ir.Load:
    """The element an access of `width` bits starts at: `x[i]`, or a region `x[i:i + n]`
    of exactly `width` bits along its last dimension."""
    if isinstance(ref, ir.Buffer):
        ref = ir.BufferRegion.full(ref)
    if isinstance(ref, ir.BufferRegion):
        buf, extents = ref.buffer, ref.extents
        if any(not (isinstance(e, int) and e == 1) for e in extents[:-1]):
            raise error(ValueError, f"{what}: the region of {buf.name} must lie along its last "
                                    f"dimension (extents {list(extents)})")
        last = extents[-1]
        if isinstance(last, ir.Const):
            last = last.value
        if not isinstance(last, int) or last * buf.dtype.bits != width:
            raise error(ValueError, f"{what} moves {width} bits; the region of {buf.name} is "
                                    f"{last} x {buf.dtype}")
        load = ir.Load(buf, tuple(ir.as_expr(s) for s in ref.starts), buf.dtype)
    elif isinstance(ref, ir.Load):
        load = ref
    else:
        raise error(TypeError, f"{what} expects Buffer, BufferRegion, or BufferLoad. Got "
                               f"{type(ref).__name__}: {ref!r}")
    buf = load.buffer
    if buf.scope not in scopes:
        memory = "global" if scopes == ("global",) else "shared"
        raise error(ValueError, f"{what} accesses {memory} memory; {buf.name} is {buf.scope}")
    try:
        ir_bits.check_packable(buf.dtype, what)
    except TypeError as e:
        raise error(TypeError, str(e)) from None
    if buf.dtype.bits > width:
        raise error(ValueError, f"{what} moves {width} bits, less than one {buf.dtype} element")
    return load


def _pred(pred, what):
    if pred is None:
        return None
    p = ir.as_expr(pred)
    if not p.dtype.is_bool:
        p = ir.compare("ne", p, ir.const(0, p.dtype))
    return p


def _load(ref, width, pred, space, what):
    scopes = ("global",) if space == "global" else _SHARED
    start = _start(ref, width, what, scopes)
    p = _pred(pred, what)
    b = current_builder(what=what)
    if not b.in_kernel():
        raise error(RuntimeError, f"{what} must be called inside `with T.Kernel(...)`")
    n = width // ir_bits.WORD_BITS
    words = ir.Buffer(b.fresh_name(f"{space}_words"), (n,), ir_bits.WORD, "local",
                      loc=current_loc())
    b.declare_local(words)
    name = f"tl::load_{space}_{width}" + ("_conditional" if p is not None else "")
    args = (ir.address_of(words, (0,)), ir.Call("address_of", (start,), DType("handle")))
    emit(ir.Evaluate, ir.Call("call_extern", (name,) + args + ((p,) if p is not None else ()),
                              DType("void")))
    lanes = tuple(ir.Load(words, (ir.const(j),), ir_bits.WORD) for j in range(n))
    return lanes[0] if n == 1 else Vector(lanes)


def _value_lanes(value, what) -> tuple:
    if isinstance(value, VectorVar):
        value = value.value()
    if isinstance(value, Vector):
        return value.lanes
    if isinstance(value, (ir.Expr, int, float, bool)) and not isinstance(value, ir.Buffer):
        e = ir.as_expr(value)
        if e.dtype.lanes != 1:
            raise error(TypeError, f"{what}: a vector-typed expression of {e.dtype}; give its "
                                   "lanes as a vector (T.ldg64(...), T.float32x2(a, b))")
        return (e,)
    if isinstance(value, ir.Buffer) and value.scope == "local.var":
        return (ir.Load(value, (ir.const(0),), value.dtype),)
    raise error(TypeError, f"{what} stores a value, got {type(value).__name__}: {value!r}")


def _store(ref, value, width, pred, space, what):
    scopes = ("global",) if space == "global" else _SHARED
    start = _start(ref, width, what, scopes)
    lanes = _value_lanes(value, what)
    total = sum(x.dtype.bits for x in lanes)
    if total != width:
        raise error(ValueError, f"{what} stores {width} bits; the value is {len(lanes)} x "
                                f"{lanes[0].dtype} ({total} bits)")
    try:
        words = ir_bits.pack_words(lanes)
    except (TypeError, ValueError) as e:
        raise error(TypeError, f"{what}: {e}") from None
    p = _pred(pred, what)
    name = f"tl::store_{space}_{width}" + ("_conditional" if p is not None else "")
    args = (ir.Call("address_of", (start,), DType("handle")),) + words
    emit(ir.Evaluate, ir.Call("call_extern", (name,) + args + ((p,) if p is not None else ()),
                              DType("void")))


def ldg32(src, pred=None):
    """Load 32 bits from global memory (one `ld.global.u32`) as a uint32; zero where `pred`
    is false (then nothing is read). `T.ldg32(x[i])`, `T.ldg32(h[i:i + 2])` (two float16)."""
    return _load(src, 32, pred, "global", "T.ldg32")


def ldg64(src, pred=None):
    """Load 64 bits from global memory (one `ld.global.v2.u32`) as a vector of 2 uint32
    (aligned to 8 bytes); zeros where `pred` is false."""
    return _load(src, 64, pred, "global", "T.ldg64")


def ldg128(src, pred=None):
    """Load 128 bits from global memory (one `ld.global.v4.u32`) as a vector of 4 uint32
    (aligned to 16 bytes); zeros where `pred` is false."""
    return _load(src, 128, pred, "global", "T.ldg128")


def ldg256(src, pred=None):
    """Load 256 bits from global memory (two `ld.global.v4.u32`) as a vector of 8 uint32
    (aligned to 16 bytes); zeros where `pred` is false."""
    return _load(src, 256, pred, "global", "T.ldg256")


def stg32(dst, value, pred=None):
    """Store the 32 bits of `value` (a uint32, or any 32-bit value, bits kept) to global memory
    in one `st.global.u32`; nothing where `pred` is false."""
    _store(dst, value, 32, pred, "global", "T.stg32")


def stg64(dst, value, pred=None):
    """Store 64 bits (2 uint32 lanes, or any lanes of 64 bits in all) to global memory in one
    `st.global.v2.u32` (aligned to 8 bytes); nothing where `pred` is false."""
    _store(dst, value, 64, pred, "global", "T.stg64")


def stg128(dst, value, pred=None):
    """Store 128 bits (4 uint32 lanes, or any lanes of 128 bits in all) to global memory in
    one `st.global.v4.u32` (aligned to 16 bytes); nothing where `pred` is false."""
    _store(dst, value, 128, pred, "global", "T.stg128")


def stg256(dst, value, pred=None):
    """Store 256 bits (8 uint32 lanes, or any lanes of 256 bits in all) to global memory in
    two `st.global.v4.u32` (aligned to 16 bytes); nothing where `pred` is false."""
    _store(dst, value, 256, pred, "global", "T.stg256")


def lds32(src):
    """Load 32 bits from shared memory as a uint32."""
    return _load(src, 32, None, "shared", "T.lds32")


def lds64(src):
    """Load 64 bits from shared memory (aligned to 8 bytes) as a vector of 2 uint32."""
    return _load(src, 64, None, "shared", "T.lds64")


def lds128(src):
    """Load 128 bits from shared memory (aligned to 16 bytes) as a vector of 4 uint32."""
    return _load(src, 128, None, "shared", "T.lds128")


def sts32(dst, value):
    """Store the 32 bits of `value` to shared memory."""
    _store(dst, value, 32, None, "shared", "T.sts32")


def sts64(dst, value):
    """Store 64 bits (2 uint32 lanes, or any lanes of 64 bits in all) to shared memory
    (aligned to 8 bytes)."""
    _store(dst, value, 64, None, "shared", "T.sts64")


def sts128(dst, value):
    """Store 128 bits (4 uint32 lanes, or any lanes of 128 bits in all) to shared memory
    (aligned to 16 bytes)."""
    _store(dst, value, 128, None, "shared", "T.sts128")
