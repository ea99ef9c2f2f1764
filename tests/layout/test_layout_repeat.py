"""Layout.repeat: an atom tiled along one input dim, the copy index a new outer output dim."""

import numpy as np
import pytest

from tilelang.layout import Layout, layout_equal, swizzled


def test_repeat_tiles_the_atom_along_a_dim():
    atom = swizzled((8, 64), 16, 128)
    rep = atom.repeat(dim=-1, factor=3)
    assert rep.get_input_shape() == [8, 192]
    assert rep.get_output_shape() == [3, 512]
    off, base = rep.offsets(), atom.offsets()
    for j in range(192):
        assert np.array_equal(off[:, j], (j // 64) * 512 + base[:, j % 64])


def test_repeat_of_a_multi_output_layout_and_identity():
    atom = Layout([4, 6], lambda i, j: [j, i])
    rep = atom.repeat(dim=0, factor=2)
    assert rep.get_output_shape() == [2, 6, 4]
    assert layout_equal(rep, Layout([8, 6], lambda i, j: [i // 4, j, i % 4]))
    assert atom.repeat(0, 1) is atom


@pytest.mark.parametrize("dim,factor,exc", [(0, 0, ValueError), (2, 2, ValueError),
                                            (-3, 2, ValueError), (0.5, 2, TypeError)])
def test_repeat_rejects_bad_arguments(dim, factor, exc):
    with pytest.raises(exc):
        Layout([8, 64], lambda i, j: i * 64 + j).repeat(dim, factor)
