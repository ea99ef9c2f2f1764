"""Helpers of the mma.sync emitters (the reference's `layout.utils`): ldmatrix row addresses
by operand, the accumulator store map, micro-tile sizes."""

from __future__ import annotations

from ....ir.dtype import DType
from .mma_layout import (get_swizzle_layout, ldmatrix_32x4_to_shared_16x8_layout_a,  # noqa: F401
                         ldmatrix_32x4_to_shared_16x8_layout_b,
                         ldmatrix_32x8_to_shared_16x16_layout,
                         ldmatrix_32x16_to_shared_16x32_layout_a,
                         ldmatrix_32x16_to_shared_16x32_layout_b,
                         ldmatrix_trans_32x8_to_shared_16x16_layout,
                         make_mma_swizzle_layout, mma_store_32x2_to_shared_8x8_layout_fp64,
                         mma_store_32x8_to_shared_16x16_layout,
                         shared_16x16_to_mma_a_32x8_layout as shared_16x16_to_mma_32x8_layout,
                         shared_16x32_to_mma_a_32x16_layout as shared_16x32_to_mma_32x16_layout)

__all__ = ["get_ldmatrix_offset", "mma_store_index_map", "mma_store_index_map_fp64",
           "get_mma_micro_size", "get_swizzle_layout", "make_mma_swizzle_layout"]


def get_ldmatrix_offset(matrix, row_idx, col_idx, stride, dtype="float16", transposed=False):
    """(row, col) in the operand's shared tile of the address lane `row_idx` gives to an
    ldmatrix.x4 (`col_idx`: element within the row). A is M x K (K x M when `transposed`);
    B is N x K when `transposed`, K x N otherwise. 8- and 32-bit operands load by ldmatrix
    only K-contiguous (A not transposed, B transposed)."""
    if matrix not in ("A", "B"):
        raise ValueError(f"matrix must be 'A' or 'B', got {matrix!r}")
    bits = DType(dtype).bits
    if bits == 16:
        # A row-major and B stored K x N (read with .trans) take the rows-first order; A
        # stored K x M (.trans) and B stored N x K the order that finishes one n8 atom first
        return (ldmatrix_32x8_to_shared_16x16_layout if not transposed else
                ldmatrix_trans_32x8_to_shared_16x16_layout)(row_idx, col_idx)
    k_contiguous = (matrix == "A" and not transposed) or (matrix == "B" and transposed)
    if not k_contiguous:
        raise ValueError(f"ldmatrix loads {bits}-bit operands only K-contiguous (A not "
                         "transposed, B transposed)")
    if bits == 32:
        return (ldmatrix_32x4_to_shared_16x8_layout_a if matrix == "A" else
                ldmatrix_32x4_to_shared_16x8_layout_b)(row_idx, col_idx)
    if bits <= 8:
        row, col = (ldmatrix_32x16_to_shared_16x32_layout_a if matrix == "A" else
                    ldmatrix_32x16_to_shared_16x32_layout_b)(row_idx, col_idx)
        return row, col * (8 // bits)
    raise ValueError(f"no ldmatrix layout for {dtype}")


def mma_store_index_map(thread_id, local_id):
    """(row, col) of accumulator value `local_id` of lane `thread_id` in a 16 x 16 C tile."""
    return mma_store_32x8_to_shared_16x16_layout(thread_id, local_id)


def mma_store_index_map_fp64(thread_id, local_id):
    return mma_store_32x2_to_shared_8x8_layout_fp64(thread_id, local_id)


def get_mma_micro_size(dtype="float16"):
    """(x, y, k) of one mma micro tile: 16 x 16 x 16, k = 32 for 8-bit operands."""
    k = 32 if DType(dtype).bits == 8 else 16
    return 16, 16, k
