"""`Layout.expand(leading)` (the layout repeated over leading dimensions),
`get_linearized_forward_index()` (the offset over canonical index variables, comparable
between layouts) and `get_output_shape()` of multi-output layouts, as in the reference."""

import pytest

from tilelang.arith import Analyzer
from tilelang.ir import nodes as ir
from tilelang.layout import Layout, make_full_bank_swizzled_layout


def test_expand_adds_leading_dimensions():
    base = Layout([16, 128], lambda j, k: j * 128 + k)
    expanded = base.expand([4])
    assert expanded.is_equal(Layout([4, 16, 128], lambda i, j, k: [i, j * 128 + k]))
    assert expanded.get_input_shape() == [4, 16, 128]
    assert expanded.get_output_shape() == [4, 2048]
    assert expanded.forward(3, 2, 5) == 3 * 2048 + 2 * 128 + 5
    multi = Layout([16, 128], lambda j, k: [j, k]).expand(4)
    assert multi.get_output_shape() == [4, 16, 128]
    assert base.expand([]) is base and base.expand(()) is base


@pytest.mark.parametrize("bad,exc", [(0, ValueError), ([-1], ValueError), ("4", TypeError),
                                     ([2.5], ValueError)])
def test_expand_rejects_bad_extents(bad, exc):
    with pytest.raises(exc):
        Layout([16, 128], lambda j, k: j * 128 + k).expand(bad)


def test_expanded_swizzle_is_the_swizzle_of_the_stacked_tile():
    tile = ir.Buffer("A2", (8, 64), "float16", "shared")
    stacked = ir.Buffer("A4", (3, 2, 8, 64), "float16", "shared")
    assert make_full_bank_swizzled_layout(stacked).is_equal(
        make_full_bank_swizzled_layout(tile).expand([3, 2]))


def test_linearized_forward_indices_compare_between_layouts():
    ana = Analyzer()
    a = Layout([2, 3, 4], lambda i, j, k: [i, j, k]).get_linearized_forward_index()
    b = Layout([2, 3, 4], lambda i, j, k: i * 12 + j * 4 + k).get_linearized_forward_index()
    assert ana.can_prove_equal(a, b)
    t = Layout([2, 32], lambda i, j: [j, i]).get_linearized_forward_index()
    assert ana.can_prove_equal(t, Layout([2, 32], lambda i, j: j * 2 + i)
                               .get_linearized_forward_index())
    assert not ana.can_prove_equal(t, Layout([2, 32], lambda i, j: i * 32 + j)
                                   .get_linearized_forward_index())
