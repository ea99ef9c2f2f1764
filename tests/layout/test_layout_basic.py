"""Layout basics: row-major, padding, user functions (reference form), equality, inverse."""

import sys
import subprocess

import numpy as np
import pytest

import tilelang.layout as L
from tilelang.ir import nodes as ir

from layout_eval import evaluate


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), (1, 1, 9)])
def test_row_major(shape):
    lay = L.row_major(shape)
    assert lay.is_row_major()
    assert np.array_equal(lay.offsets().ravel(), np.arange(int(np.prod(shape))))
    assert lay.physical_size == int(np.prod(shape))
    assert np.array_equal(lay.inverse_table(), np.arange(int(np.prod(shape))))


def test_row_major_symbolic_shape():
    n = ir.Var("n")
    lay = L.row_major((n, 8))
    i, j = ir.Var("i"), ir.Var("j")
    e = lay.forward(i, j)
    assert evaluate(e, {"i": 3, "j": 5, "n": 10}) == 29
    assert evaluate(lay.physical_size, {"n": 10}) == 80
    assert lay.is_row_major()
    with pytest.raises(ValueError, match="static shape"):
        lay.offsets()


@pytest.mark.parametrize("shape,pad", [((8, 8), 1), ((2, 4, 6), 2), ((5, 16), 8), ((4, 4), 0)])
def test_padded(shape, pad):
    lay = L.make_padded_layout(shape, pad)
    idx = np.indices(shape)
    rows = np.ravel_multi_index(tuple(idx[:-1]), shape[:-1]) if len(shape) > 1 else 0
    want = rows * (shape[-1] + pad) + idx[-1]
    assert np.array_equal(lay.offsets(), want)
    assert lay.physical_size == int(np.prod(shape[:-1])) * (shape[-1] + pad)
    table = lay.inverse_table()
    assert (table >= 0).sum() == int(np.prod(shape))
    assert lay.is_row_major() == (pad == 0)
    # symbolic forward agrees
    vs = [ir.Var(f"i{k}") for k in range(len(shape))]
    got = evaluate(lay.forward(*vs), {f"i{k}": idx[k] for k in range(len(shape))})
    assert np.array_equal(np.broadcast_to(got, shape), lay.offsets())


def test_reference_style_function_returning_indices():
    # transposed storage, written like the reference: T.Layout(shape, lambda i, j: [j, i])
    lay = L.Layout((4, 6), lambda i, j: [j, i])
    assert lay.physical_shape == (6, 4)
    i, j = np.indices((4, 6))
    assert np.array_equal(lay.offsets(), j * 4 + i)
    assert not lay.is_row_major()
    inv = lay.inverse_table()
    assert np.array_equal(inv[lay.offsets().ravel()], np.arange(24))
    # identity as a list is row-major
    assert L.Layout((4, 6), lambda i, j: [i, j]).is_row_major()
    # from_function and a single offset
    f = L.Layout.from_function((4, 6), lambda i, j: i * 6 + j)
    assert L.layout_equal(f, L.row_major((4, 6)))
    assert f.forward_index(1, 2) == 8 and f(1, 2) == 8
    assert "i0 * 6 + i1" in repr(f)


def test_layout_with_xor_helper_on_all_value_kinds():
    fn = lambda i, j: i * 8 + L.xor(j, i % 8)  # noqa: E731
    lay = L.Layout((8, 8), fn)
    assert lay.forward(3, 5) == 3 * 8 + (5 ^ 3)
    i, j = ir.Var("i"), ir.Var("j")
    e = lay.forward(i, j)
    assert "^" in str(e) or "bitxor" in str(e)
    idx = np.indices((8, 8))
    assert np.array_equal(evaluate(e, {"i": idx[0], "j": idx[1]}), lay.offsets())


def test_equality_and_inverse_errors():
    a = L.row_major((4, 4))
    b = L.Layout((4, 4), lambda i, j: i * 4 + j)
    c = L.Layout((4, 4), lambda i, j: j * 4 + i)
    assert L.layout_equal(a, b) and a.is_equal(b)
    assert not L.layout_equal(a, c)
    assert not L.layout_equal(a, L.row_major((2, 8)))
    bad = L.Layout((4, 4), lambda i, j: i + j)
    with pytest.raises(ValueError, match="not invertible"):
        bad.inverse_table()


def test_T_namespace_and_annotate_compat():
    import tilelang.language as T

    assert T.Layout is L.Layout and T.Fragment is L.Fragment
    lay = T.Layout((8, 8), lambda i, j: [i, j])
    assert hasattr(lay, "forward_index")  # T.annotate_layout keeps it as is
    assert lay.get_input_shape() == [8, 8] and lay.get_output_shape() == [8, 8]


def test_import_does_not_load_matplotlib():
    code = "import sys, tilelang.layout, tilelang.tools, tilelang.intrinsics; " \
           "print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


def test_scalar_only_and_symbolic_only_functions():
    def scalar_only(i, j):
        if i % 2:  # Python branching: fails on arrays, works per element
            return i * 4 + (3 - j)
        return i * 4 + j

    lay = L.Layout((4, 4), scalar_only)
    assert lay.offsets()[1].tolist() == [7, 6, 5, 4]
    assert sorted(lay.inverse_table().tolist()) == list(range(16))


def test_layout_equal_symbolic_shapes():
    n, m = ir.Var("n"), ir.Var("m")
    assert L.layout_equal(L.row_major((n, 8)), L.row_major((n, 8)))
    assert not L.layout_equal(L.row_major((n, 8)), L.row_major((m, 8)))
    assert not L.layout_equal(L.row_major((n, 8)), L.row_major((n, 4)))
    assert L.layout_equal(L.make_padded_layout((n, 8), 2), L.make_padded_layout((n, 8), 2))
    assert not L.layout_equal(L.make_padded_layout((n, 8), 2), L.row_major((n, 8)))
