"""Tensor-core register layouts, element by element against HARDWARE.md §1 and §5.

The formulas are written out again here, per thread and register, independently of the mode
description in tilelang/layout/mma.py.
"""

import numpy as np
import pytest

import tilelang.layout as L


def table_of(frag):
    return frag.coord_table()  # (threads, values, 2)


# ---- mma.sync accumulator ----------------------------------------------------------------------

def acc_formula(M, N, warp_m, warp_n, t, r):
    lane, w = t % 32, t // 32
    g, q = lane >> 2, lane & 3
    wm, wn = w % warp_m, w // warp_m
    MT, NT = (M // warp_m) // 16, (N // warp_n) // 8
    c, nt, mt = r % 4, (r // 4) % NT, r // (4 * NT)
    row = wm * (M // warp_m) + mt * 16 + g + 8 * (c >> 1)
    col = wn * (N // warp_n) + nt * 8 + 2 * q + (c & 1)
    return row, col


@pytest.mark.parametrize("M,N,warp_m,warp_n", [(16, 8, 1, 1), (16, 16, 1, 1), (64, 64, 2, 2),
                                               (128, 128, 2, 2), (128, 256, 4, 2),
                                               (32, 64, 1, 4), (64, 32, 4, 1)])
def test_mma_accumulator_formula(M, N, warp_m, warp_n):
    f = L.mma_accumulator(M, N, warp_m, warp_n).check()
    assert f.num_threads == 32 * warp_m * warp_n
    assert f.num_values == M * N // f.num_threads
    tab = table_of(f)
    for t in range(f.num_threads):
        for r in range(f.num_values):
            assert tuple(tab[t, r]) == acc_formula(M, N, warp_m, warp_n, t, r), (t, r)


# ---- mma.sync A / B operands ---------------------------------------------------------------------

def a_elem(bits, lane, i):
    g, q = lane >> 2, lane & 3
    if bits == 16:
        return g + 8 * ((i >> 1) & 1), 2 * q + (i & 1) + 8 * (i >> 2)
    if bits == 32:
        return g + 8 * (i & 1), q + 4 * (i >> 1)
    return g + 8 * ((i >> 2) & 1), 4 * q + (i & 3) + 16 * (i >> 3)


def b_elem(bits, lane, i):
    g, q = lane >> 2, lane & 3
    if bits == 16:
        return 2 * q + (i & 1) + 8 * (i >> 1), g
    if bits == 32:
        return q + 4 * i, g
    return 4 * q + (i & 3) + 16 * (i >> 2), g


KMMA = {16: (16, 8, 4), 32: (8, 4, 2), 8: (32, 16, 8)}  # k, A elems, B elems per thread


@pytest.mark.parametrize("bits", [8, 16, 32])
@pytest.mark.parametrize("M,K,warp_m,warp_n", [(16, 64, 1, 1), (64, 64, 2, 2), (128, 32, 4, 2)])
def test_mma_a_fragment_formula(bits, M, K, warp_m, warp_n):
    k, E, _ = KMMA[bits]
    f = L.mma_a_fragment(M, K, warp_m, warp_n, bits).check()
    assert f.replication == warp_n
    KT = K // k
    tab = table_of(f)
    for t in range(f.num_threads):
        lane, w = t % 32, t // 32
        wm = w % warp_m
        for v in range(f.num_values):
            i, kt, mt = v % E, (v // E) % KT, v // (E * KT)
            r, c = a_elem(bits, lane, i)
            assert tuple(tab[t, v]) == (wm * (M // warp_m) + 16 * mt + r, kt * k + c), (t, v)


@pytest.mark.parametrize("bits", [8, 16, 32])
@pytest.mark.parametrize("K,N,warp_m,warp_n", [(32, 8, 1, 1), (64, 64, 2, 2), (32, 128, 1, 4)])
def test_mma_b_fragment_formula(bits, K, N, warp_m, warp_n):
    k, _, E = KMMA[bits]
    f = L.mma_b_fragment(K, N, warp_m, warp_n, bits).check()
    assert f.replication == warp_m
    KT = K // k
    tab = table_of(f)
    for t in range(f.num_threads):
        lane, w = t % 32, t // 32
        wn = w // warp_m
        for v in range(f.num_values):
            i, kt, nt = v % E, (v // E) % KT, v // (E * KT)
            kk, n = b_elem(bits, lane, i)
            assert tuple(tab[t, v]) == (kt * k + kk, wn * (N // warp_n) + 8 * nt + n), (t, v)


@pytest.mark.parametrize("M,warps", [(16, 1), (64, 4), (128, 2)])
@pytest.mark.parametrize("K", [16, 32, 64])
def test_accumulator_feeds_a_operand_16bit(M, warps, K):
    """Attention's P = softmax(S) stays in registers: the 16-bit A layout is the accumulator
    layout (same threads, same register order)."""
    acc = L.mma_accumulator(M, K, warps, 1)
    a = L.mma_a_fragment(M, K, warps, 1, 16)
    assert L.fragment_equal(a, acc)
    assert np.array_equal(table_of(a), table_of(acc))
    # but not for other widths or with the wrong warp arrangement
    assert not L.fragment_equal(L.mma_a_fragment(M, K, warps, 1, 32), acc)
    if warps > 1 and K % (8 * warps) == 0 and M % 16 == 0:
        assert not L.fragment_equal(L.mma_accumulator(M, K, 1, warps),
                                    L.mma_a_fragment(M, K, 1, warps, 16))


# ---- wgmma --------------------------------------------------------------------------------------

@pytest.mark.parametrize("M,N,nwg", [(64, 8, 1), (64, 128, 1), (128, 64, 1), (128, 256, 2),
                                     (256, 64, 2)])
def test_wgmma_accumulator_formula(M, N, nwg):
    f = L.wgmma_accumulator(M, N, nwg).check()
    assert f.num_threads == 128 * nwg
    assert f.num_values == (N // 2) * (M // (64 * nwg))
    tab = table_of(f)
    for t in range(f.num_threads):
        wg, tid = t // 128, t % 128
        w, lane = tid >> 5, tid & 31
        g, q = lane >> 2, lane & 3
        for v in range(f.num_values):
            r, mr = v % (N // 2), v // (N // 2)
            row = 64 * nwg * mr + 64 * wg + 16 * w + g + 8 * ((r >> 1) & 1)
            col = 8 * (r >> 2) + 2 * q + (r & 1)
            assert tuple(tab[t, v]) == (row, col), (t, v)


@pytest.mark.parametrize("bits", [8, 16, 32])
@pytest.mark.parametrize("M,K,nwg", [(64, 32, 1), (128, 64, 2), (128, 64, 1)])
def test_wgmma_a_fragment_formula(bits, M, K, nwg):
    k, E, _ = KMMA[bits]
    f = L.wgmma_a_fragment(M, K, nwg, bits).check()
    KT = K // k
    tab = table_of(f)
    for t in range(f.num_threads):
        wg, tid = t // 128, t % 128
        w, lane = tid >> 5, tid & 31
        for v in range(f.num_values):
            i, kt, mr = v % E, (v // E) % KT, v // (E * KT)
            r, c = a_elem(bits, lane, i)
            assert tuple(tab[t, v]) == (64 * nwg * mr + 64 * wg + 16 * w + r, kt * k + c)


def test_wgmma_accumulator_feeds_a_operand_16bit():
    for M, K, nwg in [(64, 64, 1), (128, 128, 2), (256, 64, 2)]:
        assert L.fragment_equal(L.wgmma_a_fragment(M, K, nwg, 16), L.wgmma_accumulator(M, K, nwg))


def test_wgmma_groups_of_four_are_mma_c_fragments():
    """HARDWARE.md §5: d[4j..4j+3] of each warp is an m16n8 C fragment of columns 8j..8j+7."""
    wg = table_of(L.wgmma_accumulator(64, 64, 1))
    mma = table_of(L.mma_accumulator(16, 8, 1, 1))
    for w in range(4):
        for j in range(8):
            block = wg[32 * w:32 * w + 32, 4 * j:4 * j + 4]
            assert np.array_equal(block - np.array([16 * w, 8 * j]), mma)


def test_size_errors_name_the_problem():
    with pytest.raises(ValueError, match="M=48 is not a multiple of 16\\*warp_m=32"):
        L.mma_accumulator(48, 64, 2, 1)
    with pytest.raises(ValueError, match="K=24"):
        L.mma_a_fragment(64, 24, 1, 1, 16)
    with pytest.raises(ValueError, match="64-bit"):
        L.mma_a_fragment(64, 64, 1, 1, 64)
    with pytest.raises(ValueError, match="64\\*num_warpgroups=128"):
        L.wgmma_accumulator(64, 64, 2)
    assert L.mma_k_tile(16) == 16 and L.mma_k_tile(32) == 8 and L.mma_k_tile(8) == 32
