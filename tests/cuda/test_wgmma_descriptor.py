"""SwizzleMode and compute_gmma_descriptor (tilelang.cuda.intrinsics.macro.wgmma_macro_generator):
the wgmma descriptor fields of swizzled shared tiles, checked against the byte arithmetic of
HARDWARE.md §6 (core matrices of 8 rows x 16 bytes; strides in 16-byte units)."""

import pytest

from tilelang.cuda.intrinsics.macro.wgmma_macro_generator import compute_gmma_descriptor
from tilelang.layout import (Layout, SwizzleMode, make_full_bank_swizzled_layout,
                             make_half_bank_swizzled_layout, make_quarter_bank_swizzled_layout,
                             row_major, swizzled)
from tilelang.tvm import tirx

MAKERS = {128: make_full_bank_swizzled_layout, 64: make_half_bank_swizzled_layout,
          32: make_quarter_bank_swizzled_layout}


def test_swizzle_mode_codes():
    m = SwizzleMode
    assert [x.wgmma_layout_type() for x in (m.NONE, m.SWIZZLE_128B, m.SWIZZLE_64B,
                                            m.SWIZZLE_32B)] == [0, 1, 2, 3]
    assert [x.tma_swizzle() for x in (m.NONE, m.SWIZZLE_32B, m.SWIZZLE_64B,
                                      m.SWIZZLE_128B)] == [0, 1, 2, 3]
    assert m.SWIZZLE_64B.tcgen05_layout_type() == 4
    assert m.SWIZZLE_128B.swizzle_atom_size() == 8 and m.NONE.swizzle_atom_size() == 1
    assert m.SWIZZLE_32B.smem_alignment() == 256
    assert m.from_ordinal(3) is m.SWIZZLE_128B and m.from_bytes(None) is m.NONE
    assert m.SWIZZLE_64B.is_swizzle_64b() and not m.SWIZZLE_64B.is_none()


@pytest.mark.parametrize("width", [128, 64, 32])
@pytest.mark.parametrize("dtype,rows,cols", [("float16", 64, 128), ("float16", 128, 64),
                                             ("float32", 64, 64), ("float8_e4m3", 64, 256)])
def test_k_major(width, dtype, rows, cols):
    buf = tirx.decl_buffer((rows, cols), dtype, scope="shared")
    p = compute_gmma_descriptor(MAKERS[width](buf), buf, transposed=False)
    nbytes = {"float16": 2, "float32": 4, "float8_e4m3": 1}[dtype]
    assert p.swizzle_mode is SwizzleMode.from_bytes(width)
    # 8 rows of one swizzle atom (width bytes each) between MN core-matrix groups
    assert (p.stride_byte_offset, p.leading_byte_offset) == (8 * width // 16, 1)
    assert p.is_k_major and p.elems_in_bytes == nbytes
    assert p.swizzle_atom_elems == width // nbytes and p.slice_byte_offset == 0


@pytest.mark.parametrize("width", [128, 64, 32])
@pytest.mark.parametrize("k,n", [(64, 64), (32, 256), (64, 128)])
def test_mn_major(width, k, n):
    buf = tirx.decl_buffer((k, n), "float16", scope="shared")
    p = compute_gmma_descriptor(MAKERS[width](buf), buf, transposed=True)
    atoms = n * 2 // width
    assert p.stride_byte_offset == 8 * width // 16            # next 8 K rows
    # next MN atom: a whole column block of k rows (none when one atom spans the tile)
    assert p.leading_byte_offset == (k * width // 16 if atoms > 1 else 0)
    assert not p.is_k_major


def test_a_layout_given_by_its_function_is_recognised():
    lay = swizzled((64, 128), 16, 128)
    plain = Layout((64, 128), lambda i, j: lay.forward(i, j))   # no swizzle record
    buf = tirx.decl_buffer((64, 128), "float16", scope="shared")
    assert compute_gmma_descriptor(plain, buf, False) == compute_gmma_descriptor(lay, buf, False)


def test_unswizzled_core_matrix_tile():
    buf = tirx.decl_buffer((64, 8), "float16", scope="shared")   # rows of 16 bytes
    p = compute_gmma_descriptor(row_major((64, 8)), buf, transposed=False)
    assert p.swizzle_mode is SwizzleMode.NONE
    # 8 rows of 16 bytes between core matrices along MN; one core matrix along K: no K step
    assert (p.stride_byte_offset, p.leading_byte_offset) == (8, 0)


def test_slice_of_a_stage_and_of_k():
    buf = tirx.decl_buffer((2, 64, 64), "float16", scope="shared")
    lay = swizzled((2, 64, 64), 16, 128)
    p = compute_gmma_descriptor(lay, buf, False, region=[(1, 1), (0, 64), (16, 32)])
    # stage 1 starts 64*64 halves in; K offset 16 halves = 32 bytes before the swizzle
    assert p.slice_byte_offset == 64 * 64 * 2 + 32
    assert (p.stride_byte_offset, p.leading_byte_offset) == (64, 1)


def test_non_canonical_layouts_are_rejected():
    buf = tirx.decl_buffer((64, 64), "float16", scope="shared")
    with pytest.raises(ValueError, match="rows are 8 chunks apart"):
        compute_gmma_descriptor(row_major((64, 64)), buf, transposed=False)
    col_major = Layout((64, 64), lambda i, j: j * 64 + i)
    with pytest.raises(ValueError, match="not a canonical GMMA layout|ascending"):
        compute_gmma_descriptor(col_major, buf, transposed=False)
    with pytest.raises(ValueError, match="does not match"):
        compute_gmma_descriptor(row_major((64, 32)), buf, transposed=False)
