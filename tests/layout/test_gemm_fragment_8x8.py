"""make_gemm_fragment_8x8 / _transposed (the ldmatrix/stmatrix 8x8 register layouts) and
Fragment.repeat (tiling a fragment over new registers or new threads)."""

import pytest

from tilelang.layout import (Fragment, fragment_equal, make_gemm_fragment_8x8,
                             make_gemm_fragment_8x8_transposed)


def _holders(frag):
    """{coords: [(thread, value), ...]} by enumeration."""
    out = {}
    for t in range(frag.num_threads):
        for v in range(frag.num_values):
            out.setdefault(tuple(int(c) for c in frag.coords(t, v)), []).append((t, v))
    return out


def test_8x8_is_the_ldmatrix_layout():
    frag = make_gemm_fragment_8x8().check()
    assert (frag.num_threads, frag.num_values) == (32, 2)
    for (row, col), holders in _holders(frag).items():
        assert holders == [(4 * row + col // 2, col % 2)]


def test_8x8_transposed_is_the_transpose():
    frag = make_gemm_fragment_8x8_transposed().check()
    for (row, col), holders in _holders(frag).items():
        assert holders == [(4 * col + row // 2, row % 2)]
    assert not fragment_equal(frag, make_gemm_fragment_8x8())


@pytest.mark.parametrize("lower_dim_first", [True, False])
def test_repeat_on_values(lower_dim_first):
    base = make_gemm_fragment_8x8()
    frag = base.repeat([2, 3], repeat_on_thread=False, lower_dim_first=lower_dim_first).check()
    assert frag.shape == (16, 24) and frag.num_threads == 32 and frag.num_values == 12
    for (row, col), [(t, v)] in _holders(frag).items():
        r0, r1 = row // 8, col // 8
        copy = r0 * 3 + r1 if lower_dim_first else r0 + 2 * r1
        assert (t, v) == (4 * (row % 8) + (col % 8) // 2, (col % 2) + 2 * copy)


@pytest.mark.parametrize("lower_dim_first", [True, False])
def test_repeat_on_threads(lower_dim_first):
    base = make_gemm_fragment_8x8_transposed()
    frag = base.repeat([2, 2], repeat_on_thread=True, lower_dim_first=lower_dim_first).check()
    assert frag.num_threads == 128 and frag.num_values == 2
    for (row, col), [(t, v)] in _holders(frag).items():
        r0, r1 = row // 8, col // 8
        copy = r0 * 2 + r1 if lower_dim_first else r0 + 2 * r1
        assert (t, v) == (4 * (col % 8) + (row % 8) // 2 + 32 * copy, row % 2)


def test_repeat_keeps_replication_and_rejects_bad_counts():
    frag = Fragment((4,), [(4, (1,)), (2, (0,))], [])  # 4 threads, each element twice
    rep = frag.repeat([3]).check()
    assert rep.shape == (12,) and rep.replication == 2 and rep.num_values == 3
    with pytest.raises(ValueError, match="one positive count per dim"):
        frag.repeat([2, 2])
    with pytest.raises(ValueError, match="one positive count per dim"):
        frag.repeat([0])
