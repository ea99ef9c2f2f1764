"""Register layouts of tensor-core instructions (HARDWARE.md §1 mma.sync, §5 wgmma).

These fragments are the binding convention between layout inference, the gemm lowering and
the CUDA templates: a template that keeps an accumulator in `float acc[num_values]` must put
value `r` of thread `t` at the logical coordinates `frag.coords(t, r)` given here.

Notation (HARDWARE.md): lane = t % 32, g = lane >> 2 (groupID), q = lane & 3
(threadID_in_group); within a warpgroup w = (t >> 5) & 3. Value indices count *elements* (an
f16x2 register holds two consecutive values).

mma.sync block tiles: warp `w` of a block of warp_m × warp_n warps works on warp tile
(wm, wn) = (w % warp_m, w // warp_m), of (M / warp_m) × (N / warp_n) elements.
"""

from __future__ import annotations

from .fragment import Fragment

__all__ = ["mma_accumulator", "mma_a_fragment", "mma_b_fragment", "wgmma_accumulator",
           "make_gemm_fragment_8x8", "make_gemm_fragment_8x8_transposed",
           "wgmma_a_fragment", "mma_k_tile"]

# per element width: (k per mma, A elements per thread per k tile, A value modes within one
# m16 x k tile as (extent, (row, col)) fastest first, A lane modes q and g)
_A_ATOMS = {
    # m16n8k16 f16/bf16: a_i at row g + 8*((i>>1)&1), col 2q + (i&1) + 8*(i>>2)
    16: (16, 8, [(2, (0, 1)), (2, (8, 0)), (2, (0, 8))], (4, (0, 2)), (8, (1, 0))),
    # m16n8k8 tf32: a_i at row g + 8*(i&1), col q + 4*(i>>1)
    32: (8, 4, [(2, (8, 0)), (2, (0, 4))], (4, (0, 1)), (8, (1, 0))),
    # m16n8k32 8-bit: a_i at row g + 8*((i>>2)&1), col 4q + (i&3) + 16*(i>>3)
    8: (32, 16, [(4, (0, 1)), (2, (8, 0)), (2, (0, 16))], (4, (0, 4)), (8, (1, 0))),
}

# B (K x N) per element width: value modes as (extent, (k, n)), lane modes q and g.
_B_ATOMS = {
    # m16n8k16: b_i at k = 2q + (i&1) + 8*(i>>1), n = g
    16: (16, 4, [(2, (1, 0)), (2, (8, 0))], (4, (2, 0)), (8, (0, 1))),
    # m16n8k8 tf32: b_i at k = q + 4*i, n = g
    32: (8, 2, [(2, (4, 0))], (4, (1, 0)), (8, (0, 1))),
    # m16n8k32 8-bit: b_i at k = 4q + (i&3) + 16*(i>>2), n = g
    8: (32, 8, [(4, (1, 0)), (2, (16, 0))], (4, (4, 0)), (8, (0, 1))),
}


def mma_k_tile(elem_bits: int) -> int:
    """K of one mma.sync for operands of `elem_bits` bits (16 -> 16, 32 (tf32) -> 8, 8 -> 32)."""
    return _atom(_A_ATOMS, elem_bits)[0]


def _atom(table, elem_bits):
    try:
        return table[int(elem_bits)]
    except KeyError:
        raise ValueError(f"no mma.sync operand layout for {elem_bits}-bit elements "
                         "(supported: 8, 16, 32 (tf32))") from None


def _need(cond, msg):
    if not cond:
        raise ValueError(msg)


def make_gemm_fragment_8x8() -> Fragment:
    """One 8 × 8 matrix of 16-bit elements over a warp, as ldmatrix/stmatrix (non-transposed)
    hold it: thread 4*row + col // 2 holds the pair (row, col), (row, col + 1) in values 0, 1
    (HARDWARE.md §1: g = row, q = col // 2)."""
    return Fragment((8, 8), [(4, (0, 2)), (8, (1, 0))], [(2, (0, 1))], name="gemm8x8")


def make_gemm_fragment_8x8_transposed() -> Fragment:
    """The transpose of `make_gemm_fragment_8x8` (the .trans ldmatrix/stmatrix form): thread
    4*col + row // 2 holds (row, col), (row + 1, col) in values 0, 1."""
    return Fragment((8, 8), [(4, (2, 0)), (8, (0, 1))], [(2, (1, 0))], name="gemm8x8_trans")


def mma_accumulator(M: int, N: int, warp_m: int, warp_n: int) -> Fragment:
    """C/D of mma.sync m16n8kX over an M × N block tile (HARDWARE.md §1, C/D rows).

    lane = q + 4*g, warp w = wm + warp_m*wn; thread = lane + 32*w. Value
    r = c + 4*(nt + NT*mt), c in 0..3, with MT = (M/warp_m)/16, NT = (N/warp_n)/8, holds
        row = wm*(M/warp_m) + 16*mt + g + 8*(c >> 1)
        col = wn*(N/warp_n) + 8*nt + 2q + (c & 1).
    Modes: threads q(4, col 2), g(8, row 1), wm(warp_m, row M/warp_m), wn(warp_n, col N/warp_n);
    values c0(2, col 1), c1(2, row 8), nt(NT, col 8), mt(MT, row 16).
    Values (2j, 2j+1) are one f16x2 / bf16x2 pair after conversion."""
    _need(M % (16 * warp_m) == 0, f"mma accumulator: M={M} is not a multiple of 16*warp_m="
          f"{16 * warp_m}")
    _need(N % (8 * warp_n) == 0, f"mma accumulator: N={N} is not a multiple of 8*warp_n="
          f"{8 * warp_n}")
    wtm, wtn = M // warp_m, N // warp_n
    return Fragment(
        (M, N),
        [(4, (0, 2)), (8, (1, 0)), (warp_m, (wtm, 0)), (warp_n, (0, wtn))],
        [(2, (0, 1)), (2, (8, 0)), (wtn // 8, (0, 8)), (wtm // 16, (16, 0))],
        name=f"mma_acc{M}x{N}")


def mma_a_fragment(M: int, K: int, warp_m: int, warp_n: int, elem_bits: int) -> Fragment:
    """A (M × K, row-major "row" operand) of mma.sync held in registers (HARDWARE.md §1).

    Per m16 × k tile (k = 16 / 8 / 32 for 16 / 32 (tf32) / 8-bit elements) element i is at
        16-bit: row g + 8*((i>>1)&1), col 2q + (i&1) + 8*(i>>2)     (i < 8)
        tf32:   row g + 8*(i&1),      col q + 4*(i>>1)               (i < 4)
        8-bit:  row g + 8*((i>>2)&1), col 4q + (i&3) + 16*(i>>3)     (i < 16)
    Value index = i + E*(kt + KT*mt) with E elements per k tile, KT = K/k, MT = (M/warp_m)/16;
    row += wm*(M/warp_m) + 16*mt, col += k*kt. Warps along N (wn) hold replicas.
    For 16-bit elements this equals mma_accumulator(M, K, warp_m, 1) as a function (plus the
    wn replication), so an accumulator converted to f16/bf16 is directly the next A operand."""
    k, _e, vmodes, qm, gm = _atom(_A_ATOMS, elem_bits)
    _need(M % (16 * warp_m) == 0, f"mma A fragment: M={M} is not a multiple of 16*warp_m="
          f"{16 * warp_m}")
    _need(K % k == 0, f"mma A fragment: K={K} is not a multiple of the mma K={k} for "
          f"{elem_bits}-bit elements")
    wtm = M // warp_m
    return Fragment(
        (M, K),
        [qm, gm, (warp_m, (wtm, 0)), (warp_n, (0, 0))],
        vmodes + [(K // k, (0, k)), (wtm // 16, (16, 0))],
        name=f"mma_A{M}x{K}")


def mma_b_fragment(K: int, N: int, warp_m: int, warp_n: int, elem_bits: int) -> Fragment:
    """B (K × N, "col" operand) of mma.sync in registers (HARDWARE.md §1, B rows).

    Per k × n8 tile element i is at
        16-bit: k = 2q + (i&1) + 8*(i>>1), n = g     (i < 4)
        tf32:   k = q + 4*i,               n = g     (i < 2)
        8-bit:  k = 4q + (i&3) + 16*(i>>2), n = g    (i < 8)
    Value index = i + E*(kt + KT*nt), n += wn*(N/warp_n) + 8*nt, k += kmma*kt. Warps along M
    hold replicas."""
    k, _e, vmodes, qm, gm = _atom(_B_ATOMS, elem_bits)
    _need(N % (8 * warp_n) == 0, f"mma B fragment: N={N} is not a multiple of 8*warp_n="
          f"{8 * warp_n}")
    _need(K % k == 0, f"mma B fragment: K={K} is not a multiple of the mma K={k}")
    wtn = N // warp_n
    return Fragment(
        (K, N),
        [qm, gm, (warp_m, (0, 0)), (warp_n, (0, wtn))],
        vmodes + [(K // k, (k, 0)), (wtn // 8, (0, 8))],
        name=f"mma_B{K}x{N}")


def wgmma_accumulator(M: int, N: int, num_warpgroups: int = 1) -> Fragment:
    """D of wgmma.mma_async m64nNk* over an M × N tile (HARDWARE.md §5).

    Warpgroups are stacked along M, 64 rows each: warpgroup wg (thread t, wg = t >> 7) covers
    rows 64*wg .. 64*wg+63 of every block of 64*num_warpgroups rows; the block repeats MR =
    M / (64*num_warpgroups) times. Value d[r + (N/2)*mr], r < N/2, holds
        row = 64*num_warpgroups*mr + 64*wg + 16*w + g + 8*((r >> 1) & 1)
        col = 8*(r >> 2) + 2q + (r & 1).
    Every 4 values d[4j..4j+3] are an mma.m16n8 C fragment of columns 8j..8j+7. An N wider than
    one instruction (N > 256) is several wgmmas whose registers follow each other in N order."""
    _need(M % (64 * num_warpgroups) == 0, f"wgmma accumulator: M={M} is not a multiple of "
          f"64*num_warpgroups={64 * num_warpgroups}")
    _need(N % 8 == 0, f"wgmma accumulator: N={N} is not a multiple of 8")
    rows = 64 * num_warpgroups
    return Fragment(
        (M, N),
        [(4, (0, 2)), (8, (1, 0)), (4, (16, 0)), (num_warpgroups, (64, 0))],
        [(2, (0, 1)), (2, (8, 0)), (N // 8, (0, 8)), (M // rows, (rows, 0))],
        name=f"wgmma_acc{M}x{N}")


def wgmma_a_fragment(M: int, K: int, num_warpgroups: int = 1, elem_bits: int = 16) -> Fragment:
    """A of wgmma (RS form: A from registers, always K-major) over M × K (HARDWARE.md §5).

    Each warp's 16 rows use the mma.sync A layout: per k tile (16 / 8 / 32 for 16 / 32 (tf32) /
    8-bit) element i is at row 16*w + (mma A row of i), col (mma A col of i); value index
    i + E*(kt + KT*mr) with the warpgroup / M-repeat placement of `wgmma_accumulator`.
    For 16-bit elements this equals wgmma_accumulator(M, K, num_warpgroups) as a function."""
    k, _e, vmodes, qm, gm = _atom(_A_ATOMS, elem_bits)
    _need(M % (64 * num_warpgroups) == 0, f"wgmma A fragment: M={M} is not a multiple of "
          f"64*num_warpgroups={64 * num_warpgroups}")
    _need(K % k == 0, f"wgmma A fragment: K={K} is not a multiple of the K={k} of one wgmma "
          f"for {elem_bits}-bit elements")
    rows = 64 * num_warpgroups
    return Fragment(
        (M, K),
        [qm, gm, (4, (16, 0)), (num_warpgroups, (64, 0))],
        vmodes + [(K // k, (0, k)), (M // rows, (rows, 0))],
        name=f"wgmma_A{M}x{K}")
