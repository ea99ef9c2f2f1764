"""The wgmma shared-memory operand descriptor of a swizzled tile (HARDWARE.md §6), as the
reference's `compute_gmma_descriptor` reports it.

    p = compute_gmma_descriptor(make_full_bank_swizzled_layout(buf), buf, transposed=False)
    p.swizzle_mode, p.leading_byte_offset, p.stride_byte_offset   # SWIZZLE_128B, 1, 64

A wgmma operand tile is [MN, K] (K contiguous: "K-major") or, `transposed`, [K, MN] (MN
contiguous). wgmma reads it as 8 × 16-byte core matrices; the descriptor gives the swizzle and
two strides in 16-byte units (the descriptor's own unit):

* K-major: SBO = the distance between groups of 8 MN rows; LBO is unused when swizzled
  (reported as 1, the value the descriptor carries).
* MN-major: a swizzle atom spans the pattern width along MN; SBO = the distance between groups
  of 8 K rows, LBO = the distance between MN atoms (0 when the tile is one atom wide); without
  a swizzle the two trade places.

The strides are read from the layout itself (any tile whose element placement is canonical,
not only this project's swizzled layouts): the physical offsets are un-swizzled back to the
linear address the descriptor starts from (the hardware re-applies the XOR of address bits 4-6
with bits 7-9), then checked to be the canonical core-matrix arrangement. A layout that is not
raises ValueError naming the first element that does not fit.

This project's `T.gemm` builds its descriptors itself (codegen); this function is for programs
that inspect or hand-build them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....ir.dtype import DType
from ....layout.swizzle_enum import SwizzleMode

__all__ = ["WGMMADescriptorParams", "compute_gmma_descriptor"]

_CORE_ROWS = 8      # rows of a core matrix
_CHUNK = 16         # bytes of a core-matrix row, and the descriptor's stride unit


@dataclass(frozen=True)
class WGMMADescriptorParams:
    """The descriptor fields of one operand tile. `leading_byte_offset` and
    `stride_byte_offset` are in 16-byte units; `swizzle_atom_elems` is the elements of one
    swizzle atom along the contiguous dim (the whole MN extent without a swizzle), `k_atom_size`
    the wgmma K steps per atom, `slice_byte_offset` the linear byte offset of a sliced operand's
    origin (0 for the whole tile), by which the start address advances."""

    swizzle_mode: SwizzleMode
    leading_byte_offset: int
    stride_byte_offset: int
    swizzle_atom_elems: int
    k_atom_size: int
    elems_in_bytes: int
    is_k_major: bool
    slice_byte_offset: int = 0


def _unswizzle(byte_addr: np.ndarray, mode: SwizzleMode) -> np.ndarray:
    """The linear address whose swizzled form is `byte_addr` (the XOR is an involution)."""
    if mode.is_none():
        return byte_addr
    phase_mask = mode.swizzle_atom_size() - 1          # 7, 3, 1 for 128B, 64B, 32B
    return byte_addr ^ (((byte_addr >> 7) & phase_mask) << 4)


def _detect_mode(layout, byte_offsets: np.ndarray) -> SwizzleMode:
    """The layout's swizzle: its own record when it has one (layout/swizzle.py), else the first
    width under which it un-swizzles to a tile of whole 16-byte chunks stored in order."""
    if getattr(layout, "elem_bits", None) is not None:
        return SwizzleMode.from_bytes(getattr(layout, "swizzle_bytes", None))
    for mode in (SwizzleMode.NONE, SwizzleMode.SWIZZLE_32B, SwizzleMode.SWIZZLE_64B,
                 SwizzleMode.SWIZZLE_128B):
        lin = _unswizzle(byte_offsets, mode)
        if np.all(np.diff(lin, axis=-1) >= 0):
            return mode
    raise ValueError("WGMMA operand layout: no swizzle width makes its rows ascending; it is not "
                     "a canonical GMMA layout")


def _region_bounds(region, shape):
    if region is None:
        return [0] * len(shape), list(shape)
    starts, extents = [], []
    for r in region:
        lo, ext = (r.min, r.extent) if hasattr(r, "extent") else r
        starts.append(int(lo))
        extents.append(int(ext))
    if len(starts) != len(shape):
        raise ValueError(f"region has {len(starts)} ranges for a {len(shape)}-d buffer")
    return starts, extents


def compute_gmma_descriptor(tl_layout, buffer, transposed: bool, micro_size_k: int = 16,
                            region=None) -> WGMMADescriptorParams:
    """The wgmma descriptor of `buffer` (a 2-d shared tile, or a stack of them sliced to one
    with `region`: one (start, extent) pair or Range per dim) placed by `tl_layout`.
    `transposed=False`: the tile is [MN, K] (K-major); True: [K, MN] (MN-major)."""
    elem_bits = DType(getattr(buffer.dtype, "name", buffer.dtype)).bits
    if elem_bits % 8 or _CHUNK * 8 % elem_bits:
        raise ValueError(f"WGMMA operands have 8-, 16- or 32-bit elements, got {elem_bits}-bit")
    nbytes = elem_bits // 8
    per_chunk = _CHUNK // nbytes
    shape = tuple(int(s) for s in buffer.shape)
    byte_offsets = np.asarray(tl_layout.offsets(), dtype=np.int64) * nbytes
    if byte_offsets.shape != shape:
        raise ValueError(f"layout shape {list(byte_offsets.shape)} does not match the buffer's "
                         f"{list(shape)}")
    mode = _detect_mode(tl_layout, byte_offsets)
    lin = _unswizzle(byte_offsets, mode)
    starts, extents = _region_bounds(region, shape)
    origin = int(lin[tuple(starts)])
    tile = lin[tuple(slice(s, s + e) for s, e in zip(starts, extents))]
    tile = tile.reshape([e for e in extents if e != 1] or [1])
    if tile.ndim != 2:
        raise ValueError(f"a WGMMA operand is one 2-d tile, got extents {extents}")
    tile = tile - origin
    rows, cols = tile.shape
    if cols % per_chunk or rows % _CORE_ROWS:
        raise ValueError(f"WGMMA operand tile {rows} x {cols} is not whole 8-row x 16-byte core "
                         "matrices")
    atom = mode.swizzle_atom_size()                  # 16-byte chunks per swizzle atom (W)

    def at(r, c):
        return int(tile[r, c]) // _CHUNK if r < rows and c < cols else 0

    k_major = not transposed
    # distances in 16-byte units, read at atom-aligned coordinates (where the swizzle and the
    # linear address agree): next row, next chunk, next 8 rows, next atom along the row
    row_step, chunk_step, group_step = at(1, 0), at(0, per_chunk), at(_CORE_ROWS, 0)
    atom_step = at(0, atom * per_chunk)
    # the canonical arrangement these distances describe, checked for every element
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    chunk = c // per_chunk
    if k_major or not mode.is_none():
        expect = ((r % _CORE_ROWS) * row_step + (r // _CORE_ROWS) * group_step
                  + (chunk % atom) * chunk_step + (chunk // atom) * atom_step) * _CHUNK
    else:  # MN-major without swizzle: core matrices of 8 chunks down K, 1 chunk along MN
        expect = ((r % _CORE_ROWS) * row_step + (r // _CORE_ROWS) * group_step
                  + chunk * chunk_step) * _CHUNK
    expect = expect + (c % per_chunk) * nbytes
    bad = np.argwhere(expect != tile)
    if bad.size:
        br, bc = (int(x) for x in bad[0])
        raise ValueError(f"WGMMA operand layout is not a canonical GMMA layout ({mode.name}): "
                         f"element {(br, bc)} of the tile is at byte {int(tile[br, bc])}, the "
                         f"core-matrix arrangement puts it at {int(expect[br, bc])}")
    if not mode.is_none() and chunk_step != 1:
        raise ValueError(f"not a canonical GMMA layout: the 16-byte chunks of a {mode.name} "
                         "atom row are not adjacent")
    if k_major:
        if row_step != atom:
            raise ValueError(f"not a canonical K-major GMMA layout: rows are {row_step} chunks "
                             f"apart, the {mode.name} atom is {atom}")
        sbo, lbo = group_step, (1 if not mode.is_none() else chunk_step)
    else:
        if row_step != atom:
            raise ValueError(f"not a canonical MN-major GMMA layout: K rows are {row_step} "
                             f"chunks apart, the {mode.name} atom is {atom}")
        if mode.is_none():
            sbo, lbo = chunk_step, group_step
        else:
            sbo, lbo = group_step, atom_step
    mn_extent = cols if transposed else rows
    atom_elems = mn_extent if mode.is_none() else mode.swizzle_byte_size() // nbytes
    return WGMMADescriptorParams(
        swizzle_mode=mode, leading_byte_offset=int(lbo), stride_byte_offset=int(sbo),
        swizzle_atom_elems=atom_elems, k_atom_size=max(atom_elems // micro_size_k, 1),
        elems_in_bytes=nbytes, is_k_major=k_major, slice_byte_offset=origin)
