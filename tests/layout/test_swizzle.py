"""Swizzled shared-memory layouts against HARDWARE.md §4, written independently here."""

import itertools

import numpy as np
import pytest

import tilelang.layout as L
from tilelang.ir import nodes as ir
from tilelang.ir.dtype import DType

from layout_eval import evaluate

ELEM_BITS = (8, 16, 32, 64)


def expected_mode(cols, bits):
    w = cols * bits // 8
    if (cols * bits) % 8:
        return None
    return next((p for p in (128, 64, 32) if w % p == 0), None)


def ptx_swizzle(a, mode):
    """PTX §5.5.7 on absolute byte addresses (HARDWARE.md §4 table)."""
    mask = {32: 1, 64: 3, 128: 7}[mode]
    return a ^ (((a >> 7) & mask) << 4)


def cases():
    rng = np.random.default_rng(0)
    out = []
    for bits in ELEM_BITS:
        for row_bytes in (16, 32, 48, 64, 96, 128, 192, 256, 512):
            cols = row_bytes * 8 // bits
            for rows in (8, 16, 64):
                out.append(((rows, cols), bits))
    # stacked tiles and ragged row counts
    for _ in range(20):
        bits = int(rng.choice(ELEM_BITS))
        cols = int(rng.choice([16, 32, 64, 128])) * 8 // bits
        rows = int(rng.integers(1, 40))
        lead = tuple(int(x) for x in rng.integers(1, 4, size=int(rng.integers(0, 3))))
        out.append((lead + (rows, cols), bits))
    return out


CASES = cases()


@pytest.mark.parametrize("shape,bits", CASES)
def test_mode_permutation_and_row_view(shape, bits):
    lay = L.swizzled(shape, bits)
    rows, cols = shape[-2:]
    mode = expected_mode(cols, bits)
    assert L.swizzle_mode(shape, bits) == mode
    assert lay.swizzle_bytes == mode
    off = lay.offsets()
    tile = rows * cols
    tiles = off.reshape(-1, tile)
    # each stacked tile is a permutation of its own range
    for t, o in enumerate(tiles):
        assert np.array_equal(np.sort(o), np.arange(t * tile, (t + 1) * tile))
    assert lay.physical_size == off.size
    if mode is None:
        assert lay.is_row_major()
        return
    assert not lay.is_row_major() or rows == 1
    # row view (HARDWARE.md §4): chunk c of row r moves to c ^ f(r) inside its P-byte block,
    # blocks stored [block][row][P bytes]
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    byte = c * bits // 8
    blk, within = byte // mode, byte % mode
    chunk = within // 16
    f = {128: r % 8, 64: (r >> 1) & 3, 32: (r >> 2) & 1}[mode]
    want = (blk * rows + r) * mode + (chunk ^ f) * 16 + byte % 16
    got = off.reshape(-1, rows, cols)[0] * bits // 8
    assert np.array_equal(got, want)


@pytest.mark.parametrize("shape,bits", [c for c in CASES if c[0][-2] % 8 == 0
                                        and expected_mode(c[0][-1], c[1]) is not None])
def test_matches_ptx_address_formula(shape, bits):
    """Tile at a 1024-byte-aligned base, R % 8 == 0: equal to TMA's dense box + XOR."""
    mode = expected_mode(shape[-1], bits)
    lay = L.swizzled(shape, bits)
    rows, cols = shape[-2:]
    lead = int(np.prod(shape[:-2]))
    idx = np.indices((lead, rows, cols)).reshape(3, -1)
    t, r, c = idx
    byte = c * bits // 8
    nblk = cols * bits // 8 // mode
    dense = ((t * nblk + byte // mode) * rows + r) * mode + byte % mode  # TMA box order
    base = 1024 * 7
    want = ptx_swizzle(base + dense, mode) - base
    got = lay.offsets().reshape(-1) * bits // 8
    assert np.array_equal(got, want)


@pytest.mark.parametrize("shape,bits", [c for c in CASES if c[0][-2] >= 8])
def test_bank_conflict_free_8_rows(shape, bits):
    """ldmatrix pattern: 8 consecutive rows' 16-byte chunks at one logical column hit 8
    distinct 16-byte bank groups (addresses mod 128 bytes)."""
    lay = L.swizzled(shape, bits)
    if lay.swizzle_bytes is None:
        return
    rows, cols = shape[-2:]
    epc = 128 // bits
    off = lay.offsets().reshape(-1, rows, cols)[0]
    for r0 in range(rows - 7):
        for c in range(0, cols, epc):
            groups = (off[r0:r0 + 8, c] * bits // 8 // 16) % 8
            assert len(set(groups.tolist())) == 8, (r0, c, groups)


def test_plain_row_major_is_conflicted_for_128B_rows():
    """The property above can fail: a row-major 128-byte-pitch tile puts all 8 rows in one
    bank group."""
    lay = L.swizzled((8, 64), 16, mode=0)
    groups = (lay.offsets()[:, 0] * 2 // 16) % 8
    assert len(set(groups.tolist())) == 1


@pytest.mark.parametrize("shape,bits,mode", [((2, 16, 64), 16, 128), ((32, 32), 16, 64),
                                             ((8, 16), 16, 32), ((64, 128), 8, 128),
                                             ((16, 64), 32, 128)])
def test_symbolic_forward_matches_integer(shape, bits, mode):
    lay = L.swizzled(shape, bits, mode=mode)
    vars_ = [ir.Var(f"i{k}") for k in range(len(shape))]
    expr = lay.forward(*vars_)
    assert isinstance(expr, ir.Expr)
    idx = np.indices(shape)
    got = evaluate(expr, {f"i{k}": idx[k] for k in range(len(shape))})
    assert np.array_equal(got, lay.offsets())
    assert lay.forward(*(s - 1 for s in shape)) == lay.offsets()[tuple(s - 1 for s in shape)]


def test_forced_modes_and_errors():
    assert L.swizzled((64, 64), 16, mode=64).swizzle_bytes == 64  # 128-byte rows, 64B blocks
    assert L.swizzled((64, 64), 16, mode="32B").swizzle_bytes == 32
    assert L.swizzled((64, 64), 16, mode="none").is_row_major()
    with pytest.raises(ValueError, match="multiple of 128 bytes"):
        L.swizzled((64, 32), 16, mode=128)
    with pytest.raises(ValueError, match="swizzle mode"):
        L.swizzled((64, 64), 16, mode=48)
    assert L.swizzled((64,), 16).is_row_major()


def test_reference_constructors():
    from tilelang import intrinsics

    buf = ir.Buffer("A_shared", (3, 64, 64), "float16", "shared.dyn")
    a = L.make_swizzled_layout(buf)
    b = intrinsics.make_mma_swizzle_layout(buf)
    assert L.layout_equal(a, L.swizzled((3, 64, 64), 16))
    assert L.layout_equal(a, b)
    assert intrinsics.make_mma_swizzle_layout(buf, is_smooth=True).is_row_major()
    assert L.layout_equal(L.make_swizzled_layout((64, 32), "float32"), L.swizzled((64, 32), 32))
    assert L.make_swizzled_layout((64, 32), DType("int8")).swizzle_bytes == 32
    assert L.make_full_bank_swizzled_layout(64, 64, 16).swizzle_bytes == 128
    assert L.make_half_bank_swizzled_layout(buf).swizzle_bytes == 64
    assert L.make_quarter_bank_swizzled_layout(64, 64, 16).swizzle_bytes == 32
    assert "swizzle128B" in repr(a)
    assert a.column_block == 64 and a.elem_bits == 16


def test_wide_rows_are_block_major():
    """A 64 x 128 bf16 tile (256-byte rows) = two [64 rows][128 B] blocks, as two TMA boxes of
    {64 elements, 64 rows} write it (HARDWARE.md §6 'Widening K with swizzle')."""
    lay = L.swizzled((64, 128), 16)
    off = lay.offsets()
    assert set(off[:, :64].ravel().tolist()) == set(range(4096))
    assert set(off[:, 64:].ravel().tolist()) == set(range(4096, 8192))
    left = L.swizzled((64, 64), 16).offsets()
    assert np.array_equal(off[:, 64:] - 4096, left)


def test_vector_width():
    assert L.swizzled((64, 64), 16).vector_width() == 8  # one 16-byte chunk
    assert L.swizzled((64, 64), 8).vector_width() == 16
    assert L.row_major((4, 12)).vector_width() == 4
    assert L.make_padded_layout((8, 8), 1).vector_width() == 1


@pytest.mark.parametrize("bits", ELEM_BITS)
def test_ldmatrix_x4_addresses_conflict_free(bits):
    """The A-operand ldmatrix.x4 pattern (lane l reads &A[l%16][8*(l/16)] for 16-bit, i.e. 16
    bytes at chunk l/16): each group of 8 lanes hits 8 distinct 16-byte bank groups."""
    cols = 1024 // bits  # 128-byte rows
    lay = L.swizzled((64, cols), bits)
    epc = 128 // bits
    for r0, c0 in itertools.product(range(0, 64, 16), range(0, cols, 2 * epc)):
        lanes = np.arange(32)
        addr = np.array([lay.forward(r0 + l % 16, c0 + epc * (l // 16)) for l in lanes])
        groups = (addr * bits // 8 // 16) % 8
        for k in range(4):
            assert len(set(groups[8 * k:8 * k + 8].tolist())) == 8


# ---- hand-written maps recognised as the swizzle they equal (recognised_swizzle) -----------


def ptx_map(shape, bits, mode, tamper=None):
    """A hand-written index map: the tile stored in TMA box order (P-byte column blocks,
    block-major) with PTX's XOR applied to the byte address (a 1024-byte aligned base), as a
    user would write it. `tamper(i, j, offset)` perturbs it."""
    rows, cols = shape[-2:]
    esize = bits // 8
    nblk = cols * esize // mode

    def fwd(*idx):
        lead = 0
        for i, e in zip(idx[:-2], shape[:-2]):
            lead = lead * e + i
        r, c = idx[-2], idx[-1]
        byte = c * esize
        dense = ((lead * nblk + byte // mode) * rows + r) * mode + byte % mode
        off = ptx_swizzle(dense, mode) // esize
        return off if tamper is None else tamper(r, c, off)
    return L.Layout(shape, fwd)


RECOGNISED = [((64, 512), 16, 128), ((16, 64), 16, 128), ((8, 32), 16, 64), ((8, 16), 16, 32),
              ((32, 96), 16, 64), ((32, 96), 16, 32), ((64, 128), 16, 32), ((3, 16, 64), 16, 128),
              ((2, 2, 24, 128), 8, 128), ((16, 256), 8, 64), ((8, 96), 32, 128),
              ((40, 48), 32, 64)]


@pytest.mark.parametrize("shape,bits,mode", RECOGNISED)
def test_hand_written_swizzle_is_recognised(shape, bits, mode):
    got = L.recognised_swizzle(ptx_map(shape, bits, mode), bits)
    assert got is not None and got.swizzle_bytes == mode
    assert got.column_block == mode * 8 // bits
    assert np.array_equal(got.offsets(), ptx_map(shape, bits, mode).offsets())


def test_multi_output_and_scalar_only_maps_are_recognised():
    def scalar_only(i, j):  # Python ints only: enumerated index by index
        return int((j % 8) + ((i % 8) ^ ((j // 8) % 8)) * 8 + i * 64 + (j // 64) * 1024)
    got = L.recognised_swizzle(L.Layout((16, 128), scalar_only), 16)
    assert got is not None and got.swizzle_bytes == 128
    # the reference's [row, column] form: block-major rows of 64 elements
    two = L.Layout((16, 128), lambda i, j: [(j // 64) * 16 + i,
                                            (j % 8) + ((i % 8) ^ ((j // 8) % 8)) * 8])
    got = L.recognised_swizzle(two, 16)
    assert got is not None and got.swizzle_bytes == 128


def _swap_first_two(r, c, off):  # elements (0, 0) and (0, 1) trade places
    return np.where((r == 0) & (c == 0), off + 1, np.where((r == 0) & (c == 1), off - 1, off))


@pytest.mark.parametrize("layout,bits", [
    (ptx_map((64, 512), 16, 128, _swap_first_two), 16),            # one pair of elements off
    (ptx_map((16, 64), 16, 128, lambda r, c, o: o ^ ((r >= 8) * 8)), 16),  # rows 8.. differ
    (L.Layout((64, 512), lambda i, j: (j % 8) + ((i % 8) ^ ((j // 8) % 8)) * 8 + i * 512
              + (j // 64) * 64), 16),                               # blocks not block-major
    (L.Layout((16, 64), lambda i, j: (j % 8) + (((i // 2) % 8) ^ ((j // 8) % 8)) * 8
              + i * 64), 16),                                       # XOR phase of i // 2
    (L.Layout((16, 64), lambda i, j: i * 64 + j), 16),              # row-major
    (L.Layout((16, 64), lambda i, j: j * 16 + i), 16),              # transposed
    (ptx_map((4, 64), 16, 128), 16),                                # 4 rows: not whole atoms
    (ptx_map((16, 64), 16, 128), 32),                               # another element size
])
def test_almost_swizzles_are_not_recognised(layout, bits):
    assert L.recognised_swizzle(layout, bits) is None


def test_recognition_keeps_swizzled_layouts_and_skips_symbolic_shapes():
    own = L.swizzled((16, 64), 16)
    assert L.recognised_swizzle(own, 16) is own
    n = ir.Var("n")
    assert L.recognised_swizzle(L.Layout((n, 64), lambda i, j: i * 64 + j), 16) is None
