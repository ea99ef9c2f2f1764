"""Shared-memory XOR swizzles (HARDWARE.md §4): the layouts TMA writes and wgmma/ldmatrix read.

`swizzled(shape, elem_bits)` swizzles the last two dims (rows R × cols C) of a tile; leading
dims are stacked tiles (pipeline stages, ...), each swizzled independently at offset
`lead * R * C`. A row of W = C * elem_bits / 8 bytes is cut into column blocks of the pattern
width P (128, 64 or 32 bytes) and stored block-major, `[lead][block][row][P bytes]`; inside a
block the 16-byte chunk `c` of row `r` moves to

    P = 128: c ^ (r % 8)        P = 64: c ^ ((r >> 1) & 3)        P = 32: c ^ ((r >> 2) & 1)

Choice of P (`swizzle_mode`): W a multiple of 128 -> 128; else a multiple of 64 -> 64; else a
multiple of 32 -> 32; otherwise (W < 32 or not a multiple of 32 bytes) no swizzle (row-major).

Guarantees (tested in tests/layout/test_swizzle.py):
* each tile is a permutation of [0, R*C) (plus `lead * R * C`);
* with the tile placed at a 1024-byte-aligned address and R a multiple of 8, the byte address
  of every element equals the PTX/TMA formula `a ^ (((a >> 7) & m) << 4)` applied to the dense
  `[block][row][P]` address: exactly what a TMA box of {P bytes, R rows} writes with the
  matching CU_TENSOR_MAP_SWIZZLE_* mode, and what a K-major wgmma descriptor with that swizzle
  and SBO = 8 * P reads (block stride R * P bytes);
* the 16-byte chunks of any 8 consecutive rows at one logical column fall in 8 distinct
  16-byte bank groups, for all three widths (ldmatrix and 16-byte vector accesses are
  bank-conflict-free).

`mode=None` (the default) chooses the width automatically; pass 0 / "none" for row-major.

`recognised_swizzle(layout, elem_bits)`: a hand-written `Layout` (an index map, e.g.
`Layout((M, N), lambda i, j: ...)`) that stores every element where one of these swizzles does
is that swizzle: it returns the equal `swizzled(...)` layout, which carries the facts TMA and
wgmma descriptors need (`swizzle_bytes`, `column_block`). Decided by evaluating both maps at
every index of the tile (never from the expression's text), for tiles of whole swizzle atoms
(rows a multiple of 8, rows of a multiple of the width's bytes).
"""

from __future__ import annotations

import numpy as np

from .index import prod, static_int, xor
from .layout import Layout, row_major

__all__ = ["swizzled", "swizzle_mode", "make_swizzled_layout", "make_mma_swizzle_layout",
           "make_full_bank_swizzled_layout", "make_half_bank_swizzled_layout",
           "make_quarter_bank_swizzled_layout", "make_wgmma_swizzled_layout", "SWIZZLE_MODES",
           "recognised_swizzle"]

SWIZZLE_MODES = (None, 32, 64, 128)


def _parse_mode(mode):
    if mode in (0, False, "none", "None", "NONE", "row_major"):
        return None
    if isinstance(mode, str):
        m = mode.upper().removeprefix("SWIZZLE_").removesuffix("B")
        mode = int(m) if m.isdigit() else mode
    if mode not in (32, 64, 128):
        raise ValueError("swizzle mode must be None (automatic), 0 (none), 32, 64 or 128 "
                         f"(bytes), got {mode!r}")
    return mode


def _row_bytes(shape, elem_bits):
    if len(shape) < 2:
        return None
    cols = static_int(shape[-1])
    if cols is None or static_int(shape[-2]) is None:
        return None
    if (cols * elem_bits) % 8:
        return None
    return cols * elem_bits // 8


def swizzle_mode(shape, elem_bits: int):
    """The swizzle width in bytes `swizzled(shape, elem_bits)` picks: None, 32, 64 or 128."""
    elem_bits = int(elem_bits)
    if elem_bits <= 0 or 128 % elem_bits:
        return None
    w = _row_bytes(tuple(shape), elem_bits)
    if w is None:
        return None
    for p in (128, 64, 32):
        if w % p == 0:
            return p
    return None


def swizzled(shape, elem_bits: int, mode=None) -> Layout:
    """The XOR-swizzled layout of a (stack of) R × C tiles of `elem_bits`-bit elements.

    `mode`: None (default: automatic, see `swizzle_mode`), 0 / "none" (row-major), or
    32 / 64 / 128 (also "128B", "SWIZZLE_128B") to force a width, which must divide the row's
    byte size.
    The returned Layout carries `swizzle_bytes` (None for row-major), `elem_bits` and
    `column_block` (elements per column block: the TMA box's inner extent)."""
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(static_int(s) if static_int(s) is not None else s for s in shape)
    elem_bits = int(elem_bits)
    if mode is None or mode == "auto":
        p = swizzle_mode(shape, elem_bits)
    else:
        p = _parse_mode(mode)
        if p is not None:
            w = _row_bytes(shape, elem_bits)
            if elem_bits <= 0 or 128 % elem_bits:
                raise ValueError(f"cannot swizzle {elem_bits}-bit elements (16-byte chunks must "
                                 "hold whole elements)")
            if w is None or w % p:
                raise ValueError(f"a {p}B swizzle needs rows of a multiple of {p} bytes; shape "
                                 f"{list(shape)} of {elem_bits}-bit elements has rows of "
                                 f"{w if w is not None else 'unknown'} bytes")
    if p is None:
        lay = row_major(shape, name="row_major")
        lay.elem_bits = elem_bits
        return lay
    rows, cols = shape[-2], shape[-1]
    lead_shape = shape[:-2]
    epc = 128 // elem_bits            # elements per 16-byte chunk
    nch = p // 16                     # chunks per pattern row (8, 4 or 2)
    rows_per_phase = 8 // nch         # rows sharing one XOR phase (1, 2 or 4)
    blk = nch * epc                   # elements per column block row
    nblk = cols // blk
    tile = rows * cols

    def fwd(*idx):
        r, c = idx[-2], idx[-1]
        lead = 0
        for i, e in zip(idx[:-2], lead_shape):
            lead = lead * e + i
        chunk, e = c // epc, c % epc
        if nblk > 1:
            kb, ch = chunk // nch, chunk % nch
        else:
            kb, ch = 0, chunk
        phase = r % nch if rows_per_phase == 1 else (r // rows_per_phase) % nch
        swz = xor(ch, phase)
        base = kb * rows + r
        return lead * tile + base * blk + swz * epc + e

    return Layout(shape, fwd, name=f"swizzle{p}B", elem_bits=elem_bits, swizzle_bytes=p,
                  column_block=blk, row_major=False, physical_size=prod(shape),
                  describe=f"swizzle{p}B, elem_bits={elem_bits}")


def recognised_swizzle(layout: Layout, elem_bits: int):
    """The swizzled layout (`swizzled(layout.shape, elem_bits, P)`, P = 128, 64 or 32 bytes)
    that maps every index of `layout`'s tile to the same offset as `layout`, or None.

    Only tiles of whole swizzle atoms qualify: a static shape of at least two dims, rows
    (`shape[-2]`) a multiple of 8 and rows of a multiple of P bytes; 16-byte chunks must hold
    whole `elem_bits`-bit elements. A layout that already carries its swizzle is returned
    as it is. The maps are compared by evaluating them, so a map that differs from the
    swizzle at a single index is not recognised."""
    if not isinstance(layout, Layout):
        return None
    if layout.swizzle_bytes:
        return layout
    elem_bits = int(elem_bits)
    shape = tuple(static_int(s) for s in layout.shape)
    if len(shape) < 2 or None in shape or elem_bits <= 0 or 128 % elem_bits:
        return None
    row_bytes = _row_bytes(shape, elem_bits)
    if row_bytes is None or shape[-2] % 8:
        return None
    widths = [p for p in (128, 64, 32) if row_bytes % p == 0]
    if not widths:
        return None
    try:
        offsets = layout.offsets()
    except (TypeError, ValueError, ZeroDivisionError):
        return None  # a map not defined at every index of the tile is no swizzle
    for p in widths:
        candidate = swizzled(shape, elem_bits, p)
        if np.array_equal(offsets, candidate.offsets()):
            return candidate
    return None


# ---- reference-compatible constructors ---------------------------------------------------------


def _shape_bits(buffer_or_shape, dtype=None):
    obj = getattr(buffer_or_shape, "buffer", buffer_or_shape)  # BufferRegion / BufferLoad
    if hasattr(obj, "shape") and hasattr(obj, "dtype") and dtype is None:
        shape, dtype = obj.shape, obj.dtype
    else:
        shape = obj.shape if hasattr(obj, "shape") else obj
    if dtype is None:
        raise ValueError("a swizzled layout needs the element type: pass a buffer or dtype=")
    if isinstance(dtype, int):
        return tuple(shape), dtype
    from ..ir.dtype import DType

    return tuple(shape), DType(getattr(dtype, "name", dtype)).bits


def make_swizzled_layout(buffer_or_shape, dtype=None, k_major: bool = True,
                         allow_pad: bool = True, mode=None) -> Layout:
    """The default swizzled layout of a shared tile (a Buffer, or a shape with `dtype`).

    The swizzle acts on the last two dims whichever of them is the reduction (K) dim, so
    `k_major` does not change the layout; `allow_pad` is accepted for compatibility (no padding
    is ever added)."""
    shape, bits = _shape_bits(buffer_or_shape, dtype)
    return swizzled(shape, bits, mode)


def make_mma_swizzle_layout(shared_buf, is_smooth: bool = False, dtype=None) -> Layout:
    """Reference name (`tilelang.intrinsics`): the swizzled layout for an mma operand tile;
    `is_smooth=True` asks for the plain row-major layout."""
    shape, bits = _shape_bits(shared_buf, dtype)
    if is_smooth:
        return swizzled(shape, bits, 0)
    return swizzled(shape, bits)


def make_wgmma_swizzled_layout(buffer, continuity=None, k_major: bool = True) -> Layout:
    return make_swizzled_layout(buffer, k_major=k_major)


def _forced(args, mode):
    if len(args) == 1:
        shape, bits = _shape_bits(args[0])
    elif len(args) == 3:
        shape, bits = (args[0], args[1]), int(args[2])
    else:
        raise ValueError(f"expected a buffer or (rows, cols, element_bits), got {args!r}")
    return swizzled(shape, bits, mode)


def make_full_bank_swizzled_layout(*args) -> Layout:
    """128B swizzle of a buffer or of (rows, cols, element_bits)."""
    return _forced(args, 128)


def make_half_bank_swizzled_layout(*args) -> Layout:
    """64B swizzle of a buffer or of (rows, cols, element_bits)."""
    return _forced(args, 64)


def make_quarter_bank_swizzled_layout(*args) -> Layout:
    """32B swizzle of a buffer or of (rows, cols, element_bits)."""
    return _forced(args, 32)
