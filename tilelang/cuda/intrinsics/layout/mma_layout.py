"""Index maps between shared-memory tiles and the registers of mma.sync / ldmatrix, under
the reference's names (PTX ISA, "Matrix fragments for mma.m16n8k*").

Notation: a lane t of a warp has group g = t // 4 and position q = t % 4 in its group.
Every function takes ints, numpy arrays or kernel expressions.

* `ldmatrix_*_layout(t, local)`: the (row, col) of the tile element at which lane t's row
  address points for one ldmatrix.x4 (plus `local` elements along the row).
* `mma_load_*_layout(t, v)` / `mma_store_*_layout(t, v)`: the (row, col) of register value v
  of lane t (A: row m, col k; B: row n, col k, i.e. B stored N x K; C: row m, col n).
* `shared_*_to_mma_*_layout(i, j)`: the inverse, (lane, value) of tile element (i, j);
  `_sr_` forms take (spatial, reduction) indices, `_rs_` forms the transpose.
"""

from __future__ import annotations

from ....ir.dtype import DType

__all__ = [
    "ldmatrix_32x4_to_shared_16x8_layout_a", "ldmatrix_32x4_to_shared_16x8_layout_b",
    "ldmatrix_32x8_to_shared_16x16_layout", "ldmatrix_trans_32x8_to_shared_16x16_layout",
    "ldmatrix_32x16_to_shared_16x32_layout_a", "ldmatrix_32x16_to_shared_16x32_layout_b",
    "mma_store_32x8_to_shared_16x16_layout", "mma_store_32x2_to_shared_8x8_layout_fp64",
    "mma_32x8_to_shared_16x16_layout", "mma_load_a_32x4_to_shared_16x8_layout",
    "mma_load_b_32x4_to_shared_16x8_layout", "mma_load_a_32x8_to_shared_16x16_layout",
    "mma_load_b_32x8_to_shared_16x16_layout", "mma_load_a_32x16_to_shared_16x32_layout",
    "mma_load_b_32x16_to_shared_16x32_layout", "get_swizzle_layout", "make_mma_swizzle_layout",
]


# ---- ldmatrix row addresses (x4: four 8-row matrices per lane group of 8) --------------------
def _x4_rows_first(t, row_len, local):
    """Matrices in order (rows 0-7, cols 0..), (rows 8-15, cols 0..), (rows 0-7, next cols),
    (rows 8-15, next cols): what A (M x K, row-major) needs."""
    return t % 16, row_len * (t // 16) + local % row_len


def _x4_cols_first(t, row_len, local):
    """Matrices in order (rows 0-7, cols 0..), (rows 0-7, next cols), (rows 8-15, cols 0..),
    (rows 8-15, next cols): what B stored N x K needs (one n8 atom's k halves first)."""
    return 8 * (t // 16) + t % 8, row_len * ((t // 8) % 2) + local % row_len


def ldmatrix_32x8_to_shared_16x16_layout(thread_id, local_id):
    return _x4_rows_first(thread_id, 8, local_id)


def ldmatrix_trans_32x8_to_shared_16x16_layout(thread_id, local_id):
    return _x4_cols_first(thread_id, 8, local_id)


def ldmatrix_32x4_to_shared_16x8_layout_a(thread_id, local_id):
    return _x4_rows_first(thread_id, 4, local_id)


def ldmatrix_32x4_to_shared_16x8_layout_b(thread_id, local_id):
    return _x4_cols_first(thread_id, 4, local_id)


def ldmatrix_32x16_to_shared_16x32_layout_a(thread_id, local_id):
    return _x4_rows_first(thread_id, 16, local_id)


def ldmatrix_32x16_to_shared_16x32_layout_b(thread_id, local_id):
    return _x4_cols_first(thread_id, 16, local_id)


# ---- register values -> tile coordinates ---------------------------------------------------
def mma_store_32x8_to_shared_16x16_layout(thread_id, local_id):
    """C of two m16n8 atoms side by side (16 x 16): value v = 4 * atom + c."""
    g, q, c = thread_id // 4, thread_id % 4, local_id % 4
    return g + 8 * (c // 2), 8 * (local_id // 4) + 2 * q + c % 2


mma_32x8_to_shared_16x16_layout = mma_store_32x8_to_shared_16x16_layout


def mma_store_32x2_to_shared_8x8_layout_fp64(thread_id, local_id):
    """C of m8n8k4 (fp64): two values per lane."""
    return thread_id // 4, 2 * (thread_id % 4) + local_id


def mma_load_a_32x8_to_shared_16x16_layout(thread_id, local_id):
    """A of m16n8k16 (16-bit): a_v at row g + 8*((v//2)%2), col 2q + v%2 + 8*(v//4)."""
    g, q, v = thread_id // 4, thread_id % 4, local_id
    return g + 8 * ((v // 2) % 2), 2 * q + v % 2 + 8 * (v // 4)


def mma_load_b_32x8_to_shared_16x16_layout(thread_id, local_id):
    """B of two n8 atoms (16-bit) as (n, k): b_v of atom v//4 at k = 2q + v%2 + 8*((v%4)//2)."""
    g, q, v = thread_id // 4, thread_id % 4, local_id
    return g + 8 * (v // 4), 2 * q + v % 2 + 8 * ((v % 4) // 2)


def mma_load_a_32x4_to_shared_16x8_layout(thread_id, local_id):
    """A of m16n8k8 (tf32): a_v at row g + 8*(v%2), col q + 4*(v//2)."""
    g, q, v = thread_id // 4, thread_id % 4, local_id
    return g + 8 * (v % 2), q + 4 * (v // 2)


def mma_load_b_32x4_to_shared_16x8_layout(thread_id, local_id):
    """B of two n8 atoms (tf32) as (n, k): atom v//2, k = q + 4*(v%2)."""
    g, q, v = thread_id // 4, thread_id % 4, local_id
    return g + 8 * (v // 2), q + 4 * (v % 2)


def mma_load_a_32x16_to_shared_16x32_layout(thread_id, local_id):
    """A of m16n8k32 (8-bit): a_v at row g + 8*((v//4)%2), col 4q + v%4 + 16*(v//8)."""
    g, q, v = thread_id // 4, thread_id % 4, local_id
    return g + 8 * ((v // 4) % 2), 4 * q + v % 4 + 16 * (v // 8)


def mma_load_b_32x16_to_shared_16x32_layout(thread_id, local_id):
    """B of two n8 atoms (8-bit) as (n, k): atom v//8, k = 4q + v%4 + 16*((v%8)//4)."""
    g, q, v = thread_id // 4, thread_id % 4, local_id
    return g + 8 * (v // 8), 4 * q + v % 4 + 16 * ((v % 8) // 4)


# ---- tile coordinates -> (lane, value): the inverses ----------------------------------------
def shared_16x16_to_mma_a_32x8_layout(i, j):
    return 4 * (i % 8) + (j % 8) // 2, j % 2 + 2 * (i // 8) + 4 * (j // 8)


def shared_16x16_to_mma_b_32x8_layout(i, j):
    return 4 * (i % 8) + (j % 8) // 2, j % 2 + 2 * (j // 8) + 4 * (i // 8)


def shared_16x8_to_mma_a_32x4_layout(i, j):
    return 4 * (i % 8) + j % 4, i // 8 + 2 * (j // 4)


def shared_16x8_to_mma_b_32x4_layout(i, j):
    return 4 * (i % 8) + j % 4, j // 4 + 2 * (i // 8)


def shared_16x32_to_mma_a_32x16_layout(i, j):
    return 4 * (i % 8) + (j % 16) // 4, j % 4 + 4 * (i // 8) + 8 * (j // 16)


def shared_16x32_to_mma_b_32x16_layout(i, j):
    return 4 * (i % 8) + (j % 16) // 4, j % 4 + 4 * (j // 16) + 8 * (i // 8)


def _transposed(fn):
    def t(i, j):
        return fn(j, i)
    t.__name__ = fn.__name__ + "_trans"
    t.__doc__ = f"`{fn.__name__}` of the transposed tile."
    return t


shared_16x16_to_mma_a_32x8_layout_trans = _transposed(shared_16x16_to_mma_a_32x8_layout)
shared_16x16_to_mma_b_32x8_layout_trans = _transposed(shared_16x16_to_mma_b_32x8_layout)
shared_16x8_to_mma_a_32x4_layout_trans = _transposed(shared_16x8_to_mma_a_32x4_layout)
shared_16x8_to_mma_b_32x4_layout_trans = _transposed(shared_16x8_to_mma_b_32x4_layout)
shared_32x16_to_mma_a_32x16_layout_trans = _transposed(shared_16x32_to_mma_a_32x16_layout)
shared_32x16_to_mma_b_32x16_layout_trans = _transposed(shared_16x32_to_mma_b_32x16_layout)

shared_16x8_to_mma_32x4_layout_sr_a = shared_16x8_to_mma_a_32x4_layout
shared_16x8_to_mma_32x4_layout_sr_b = shared_16x8_to_mma_b_32x4_layout
shared_16x8_to_mma_32x4_layout_rs_a = shared_16x8_to_mma_a_32x4_layout_trans
shared_16x8_to_mma_32x4_layout_rs_b = shared_16x8_to_mma_b_32x4_layout_trans
shared_16x16_to_mma_32x8_layout_sr_a = shared_16x16_to_mma_a_32x8_layout
shared_16x16_to_mma_32x8_layout_sr_b = shared_16x16_to_mma_b_32x8_layout
shared_16x16_to_mma_32x8_layout_rs_a = shared_16x16_to_mma_a_32x8_layout_trans
shared_16x16_to_mma_32x8_layout_rs_b = shared_16x16_to_mma_b_32x8_layout_trans
shared_16x32_to_mma_32x16_layout_sr_a = shared_16x32_to_mma_a_32x16_layout
shared_16x32_to_mma_32x16_layout_sr_b = shared_16x32_to_mma_b_32x16_layout
shared_16x32_to_mma_32x16_layout_rs_a = shared_32x16_to_mma_a_32x16_layout_trans
shared_16x32_to_mma_32x16_layout_rs_b = shared_32x16_to_mma_b_32x16_layout_trans


def shared_16x16_to_mma_32x8_smoothlayout(i, j):
    return i * 2 + j // 8, j % 8


def shared_16x32_to_mma_32x16_smoothlayout(i, j):
    return i * 2 + j // 16, j % 16


shared_32x16_to_mma_32x16_smoothlayout = shared_16x32_to_mma_32x16_smoothlayout


# ---- shared-memory swizzles -------------------------------------------------------------------
def get_swizzle_layout(row_idx, col_idx, row_size, dtype, swizzle_bytes=None):
    """(column block, row, swizzled column) of element (row_idx, col_idx) in rows of `row_size`
    elements: 16-byte chunks of each row are XOR-permuted by the row (mod 8) within blocks of
    `swizzle_bytes` (default: the row's bytes, at most 128), so the 8 rows of an ldmatrix
    matrix fall in different banks."""
    bits = DType(dtype).bits
    row_bytes = bits * row_size // 8
    if row_bytes % 32:
        raise ValueError(f"get_swizzle_layout: rows of {row_bytes} bytes; a multiple of 32 is "
                         "needed")
    swizzle_bytes = min(128, row_bytes) if swizzle_bytes is None else int(swizzle_bytes)
    per_chunk = 128 // bits
    chunks = swizzle_bytes // 16
    chunk, within = col_idx // per_chunk, col_idx % per_chunk
    phase = (row_idx % 8) // (8 // chunks)
    return chunk // chunks, row_idx, ((chunk % chunks) ^ phase) * per_chunk + within


def make_mma_swizzle_layout(shared_buf, is_smooth: bool = False):
    """The swizzled layout of an mma operand tile (row-major when `is_smooth`)."""
    from ....layout.swizzle import make_mma_swizzle_layout as _make

    return _make(shared_buf, is_smooth)
