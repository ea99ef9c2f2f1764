"""`T.gemm_sp`: GEMM with a 2:4 structured-sparse A (the reference's sparse GEMM).

    T.gemm_sp(A_sparse, E, B, C, transpose_A=False, transpose_E=False, transpose_B=False)

`A_sparse` holds the kept elements of A (K/2 columns: two of every four for 8- and 16-bit
types, one of every two for float32) and `E` the metadata in the reference's natural row-major
format (its `compress` / `torch_compress`): each group of 4 dense columns (2 for float32) has a
4-bit code, 2 bits for the position of each kept element (float32: positions count 16-bit
halves, so 0 and 2 name the first and second element), and one `E` word holds the codes of
`bits / 4` consecutive groups, the first group in the lowest bits. With `transpose_A` /
`transpose_E` the tiles are stored K-major (`A_sparse[k, m]`, `E[k, m]`).

Here the sparse tile is expanded into a dense shared tile (zeros where A had none) by all the
block's threads, and `T.gemm` multiplies it on the tensor cores: the same results as the
reference's mma.sp / wgmma.sp, at the cost of the dense K (twice the MMA work) and a
`block_M x block_K` shared tile. A fragment operand goes through shared memory first.
"""

from __future__ import annotations

from ..frontend.builder import error
from ..ir import nodes as ir

__all__ = ["gemm_sp", "gemm_sp_v2", "wgmma_gemm_sp"]


def _tile(x, name):
    from .tile_ops import to_region

    r = to_region(x, "T.gemm_sp")
    if r is None:
        raise error(TypeError, f"T.gemm_sp operand {name} must be a buffer or a region")
    ext = [ir.int_value(e) for e in r.extents]
    if any(e is None for e in ext) or len(ext) != 2:
        raise error(ValueError, f"T.gemm_sp operand {name} ({r.buffer.name}) must be a 2-D "
                                f"tile of static shape, got extents {list(r.extents)}")
    if r.buffer.scope not in ("shared", "shared.dyn", "local.fragment"):
        raise error(ValueError, f"T.gemm_sp operand {name} ({r.buffer.name}) is a "
                                f"{r.buffer.scope} buffer; operands are shared tiles or "
                                "fragments")
    return r, ext


def _in_shared(region, ext):
    """The region itself when it is a whole shared tile, else a shared copy of it."""
    from .alloc import alloc_shared
    from .tile_ops import copy

    if region.buffer.scope in ("shared", "shared.dyn") and \
            list(region.buffer.shape) == list(ext) and all(
                ir.int_value(s) == 0 for s in region.starts):
        return region.buffer
    tile = alloc_shared(ext, region.buffer.dtype)
    copy(region, tile)
    return tile


def gemm_sp(A_sparse, E, B, C, transpose_A=False, transpose_E=False, transpose_B=False,
            policy=None, clear_accum=False, k_pack=1, wg_wait=0, annotations=None):
    """`C += A @ op(B)` where A (M x K) is given 2:4-sparse: `A_sparse` (M x K/2, or K/2 x M
    with `transpose_A`) and its metadata `E` (M x K/e, or K/e x M with `transpose_E`; e the
    dense columns one metadata word covers). See the module docstring for the format."""
    from ..cuda.intrinsics.sparse_layout import GROUP_CONFIG
    from .alloc import alloc_shared
    from .loops import Parallel
    from .math import if_then_else
    from .tile_ops import GemmWarpPolicy, _check_tile_context, gemm

    _check_tile_context("T.gemm_sp")
    a, a_ext = _tile(A_sparse, "A_sparse")
    e, e_ext = _tile(E, "E")
    c, c_ext = _tile(C, "C")
    dt, mdt = a.buffer.dtype, e.buffer.dtype
    if dt not in GROUP_CONFIG:
        raise error(TypeError, f"T.gemm_sp: A of dtype {dt} has no 2:4 sparse form (float32, "
                               f"float16, bfloat16, int8, uint8, float8_e4m3, float8_e5m2)")
    if not mdt.is_int or mdt.bits not in (8, 16, 32):
        raise error(TypeError, f"T.gemm_sp: metadata E must be an 8-, 16- or 32-bit integer "
                               f"tile, got {mdt}")
    kept, group = GROUP_CONFIG[dt]
    m, k_sparse = (a_ext[1], a_ext[0]) if transpose_A else a_ext
    k = k_sparse * group // kept
    quad = mdt.bits // 4  # 4-bit group codes per metadata word
    e_factor = quad * group
    em, ek = (e_ext[1], e_ext[0]) if transpose_E else e_ext
    if m != c_ext[0] or em != m or ek * e_factor != k:
        raise error(ValueError, f"T.gemm_sp: A_sparse {a_ext} (transpose_A={transpose_A}), E "
                                f"{e_ext} (transpose_E={transpose_E}) and C {c_ext} do not "
                                f"describe one M x K = {m} x {k} sparse A (E covers {e_factor} "
                                f"columns per {mdt} word)")
    a_sh = _in_shared(a, a_ext)
    e_sh = _in_shared(e, e_ext)
    dense = alloc_shared((m, k), dt)

    def at(buf, row, col, transposed):
        return buf[col, row] if transposed else buf[row, col]

    # each dense element decides alone whether a kept element lands on it (no other pass
    # writes the tile, so no ordering between threads is needed)
    for i, j in Parallel(m, k).trace(("i", "j")):
        g = j // group
        word = at(e_sh, i, g // quad, transpose_E)
        code = (ir.cast_to(word, "int32") >> ((g % quad) * 4)) & 15
        first = code & 3
        zero = ir.const(0, dt)
        if group == 2:  # float32: one kept element, its position in 16-bit halves
            dense[i, j] = if_then_else((first >> 1) == j % 2, at(a_sh, i, g, transpose_A),
                                       zero)
        else:
            second = (code >> 2) & 3
            pos = j % group
            dense[i, j] = if_then_else(
                first == pos, at(a_sh, i, g * 2, transpose_A),
                if_then_else(second == pos, at(a_sh, i, g * 2 + 1, transpose_A), zero))
    b_region, b_ext = _tile(B, "B")
    b_op = b_region if b_region.buffer.scope != "local.fragment" else _in_shared(b_region, b_ext)
    gemm(dense, b_op, C, False, transpose_B,
         GemmWarpPolicy.Square if policy is None else policy, clear_accum, k_pack, wg_wait)


def gemm_sp_v2(*args, **kwargs):
    """`T.gemm_sp` (the reference's second implementation; same results here)."""
    gemm_sp(*args, **kwargs)


def wgmma_gemm_sp(*args, **kwargs):
    """`T.gemm_sp`; the reference's explicit-wait Hopper form (the wait is implicit here)."""
    gemm_sp(*args, **kwargs)

