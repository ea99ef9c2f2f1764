"""tilelang.layout.cute: the CuTe layout algebra, checked against its defining properties
(brute force over the domain) and against hand-derived CuTe results."""

import itertools

import numpy as np
import pytest

import tilelang  # noqa: F401  (registers the tvm stand-in)
import tvm
from tilelang.arith import Analyzer
from tilelang.ir import nodes as ir
from tilelang.layout import Layout as TLLayout
from tilelang.layout import cute, swizzled
from tilelang.layout.cute.swizzle_mode import SwizzleMode


def _table(layout):
    return [layout(i) for i in range(cute.size(layout))]


# ---- IntTuple -------------------------------------------------------------------------------


def test_int_tuple_text_round_trip_and_nesting():
    for text in ("((3,5),(7,1)):((1,3),(15,0))", "(16,(2,4)):(1@1,(1@0,2@0))", "6:2",
                 "(2,3):(5@1@0,1@2)"):
        assert str(cute.Layout.parse(text)) == text
    assert str(cute.IntTuple.parse(" ( 4 , -2 ) ")) == "(4,-2)"
    with pytest.raises(ValueError, match="expected an integer"):
        cute.IntTuple.parse("(4,x)")
    with pytest.raises(ValueError, match="shape:stride"):
        cute.Layout.parse("(4,2)")


def test_int_tuple_arithmetic_pads_and_routes_bases():
    t = cute.from_python((1, (2, 3)))
    assert cute.to_python(t + cute.from_python((10,))) == (11, (2, 3))
    assert cute.to_python(t * cute.from_python((2, (3, 4)))) == (2, (6, 12))
    # bases on different axes add into one coordinate, on one axis they sum
    assert cute.to_python(cute.from_python(3 * cute.E(2)) + cute.from_python(cute.E(0))) == (1, 0, 3)
    assert cute.to_python(cute.from_python(cute.E((1, 0))) + cute.from_python(cute.E(0))) == (1, (1,))
    with pytest.raises(ValueError, match="non-zero leaf to a tuple"):
        cute.from_python(5) + cute.from_python((1, 2))


def test_dynamic_leaves_build_expressions():
    n = tvm.tirx.Var("n", "int32")
    L = cute.make_layout((n, 3), stride=(3, 1))
    assert tvm.ir.structural_equal(cute.size(L), n * 3)
    got = L((4, 2))
    assert int(Analyzer().simplify(got)) == 14
    assert cute.compatible((n * 2,), ((n, 2),)) and not cute.compatible((n,), ((n, 2),))


# ---- evaluation and coalesce -----------------------------------------------------------------


def test_eval_matches_column_major_idx2crd():
    L = cute.make_layout((3, (2, 5)), stride=(10, (1, 30)))
    for i in range(30):
        c0, c1, c2 = i % 3, i // 3 % 2, i // 6
        assert L(i) == 10 * c0 + c1 + 30 * c2 == L((c0, (c1, c2)))
    # past the domain the last mode extends linearly (CuTe crd2idx)
    assert L(30) == 150


@pytest.mark.parametrize("shape,stride", [
    ((3, 4, 5), (1, 3, 12)), ((2, 1, 4), (8, 99, 2)), ((4, (2, 3)), (6, (1, 24))),
    ((1, 1, 1), (3, 4, 5)), ((2, 2, 2), (4, 2, 1)), ((5, 2), (0, 5))])
def test_coalesce_keeps_the_function_and_fuses(shape, stride):
    L = cute.make_layout(shape, stride=stride)
    C = cute.coalesce(L)
    assert cute.size(C) == cute.size(L) and _table(C) == _table(L)
    assert cute.rank(C) <= len(cute.flatten_to_tuple(L.shape))


def test_coalesce_max_extent_caps_runs():
    L = cute.make_layout((16, 32), stride=(1, 16))
    assert str(cute.coalesce(L)) == "512:1"
    capped = cute.coalesce(L, 256)
    assert str(capped) == "(16,32):(1,16)" and _table(capped) == _table(L)


# ---- composition, inverses, complement -------------------------------------------------------


@pytest.mark.parametrize("a,b", [
    (((6, 4), (1, 6)), ((4, 6), (6, 1))),
    (((8, 8), (1, 8)), ((4, 4), (2, 16))),
    (((3, 8), (8, 1)), ((24,), (1,))),
    (((2, (4, 4)), (16, (1, 4))), ((8, 4), (4, 1))),
])
def test_composition_is_function_composition(a, b):
    A, B = cute.make_layout(*a), cute.make_layout(*b)
    R = cute.composition(A, B)
    assert cute.congruent(R.shape, B.shape) or cute.size(R) == cute.size(B)
    assert [R(i) for i in range(cute.size(B))] == [A(B(i)) for i in range(cute.size(B))]


def test_composition_routes_basis_strides_into_lhs_axes():
    A = cute.make_layout((6, 10), stride=(100, 1))
    B = cute.make_layout((5, 3), stride=(2 * cute.E(1), 2 * cute.E(0)))
    R = cute.composition(A, B)
    assert str(R) == "(5,3):(2,200)"
    for c0, c1 in itertools.product(range(5), range(3)):
        assert R((c0, c1)) == A((2 * c1, 2 * c0))


@pytest.mark.parametrize("shape,stride", [((4, 6), (6, 1)), ((2, 3, 4), (12, 4, 1)),
                                          ((8,), (3,)), ((4, 4), (1, 8))])
def test_inverses(shape, stride):
    L = cute.make_layout(shape, stride=stride)
    R = cute.right_inverse(L)
    assert all(L(R(i)) == i for i in range(cute.size(R)))
    try:
        Li = cute.left_inverse(L)
    except ValueError:
        return
    assert all(Li(L(i)) == i for i in range(cute.size(L)))


def test_left_inverse_rejects_irregular_gaps():
    with pytest.raises(ValueError, match="divisibility"):
        cute.left_inverse(cute.make_layout((2, 2), stride=(3, 2)))


@pytest.mark.parametrize("shape,stride,cotarget", [((4,), (2,), 16), ((2, 4), (1, 8), 64),
                                                   ((3,), (1,), 12), ((2, 2), (4, 1), 32)])
def test_complement_fills_the_codomain_disjointly(shape, stride, cotarget):
    L = cute.make_layout(shape, stride=stride)
    C = cute.complement(L, cotarget)
    image = {L(i) + C(j) for i in range(cute.size(L)) for j in range(cute.size(C))}
    assert len(image) == cute.size(L) * cute.size(C)
    assert set(range(cotarget)) <= image


def test_complement_errors_are_located_here():
    s = tvm.tirx.Var("s", "int32")
    with pytest.raises(tvm.error.InternalError) as info:
        cute.complement(cute.make_layout((2, 3), stride=(s, 4)), 64)
    assert "rank-1" in str(info.value) and "test_cute.py" in str(info.value)


def test_divide_and_products():
    D = cute.logical_divide(cute.make_layout(24, stride=2), cute.make_layout(4, stride=1))
    assert str(D) == "(4,6):(2,8)"
    P = cute.logical_product(cute.make_layout((2, 2), stride=(1, 2)), cute.make_layout(3, stride=1))
    assert str(P) == "((2,2),3):((1,2),4)"
    T = cute.tiled_product(cute.make_layout(2, stride=4), cute.make_layout(8))
    assert str(T) == "(2,4,2):(4,1,8)"
    B = cute.blocked_product(cute.make_layout((2, 2)), cute.make_layout((3, 2)))
    for i, j in itertools.product(range(6), range(4)):
        assert B((i, j)) == (i % 2) + 2 * (j % 2) + 4 * (i // 2) + 12 * (j // 2)


def test_coshape_cosize_filter():
    L = cute.make_layout((4, (2, 3)), stride=(cute.E(1), (cute.E(0), 4 * cute.E(1))))
    assert cute.coshape(L) == (2, 12) and cute.cosize(L) == 24
    assert str(cute.filter(cute.make_layout((3, 1, 4, 2), stride=(1, 7, 3, 0)))) == "12:1"


def test_restrict_is_an_affine_window():
    L = cute.make_layout((8, (4, 4)), stride=(16, (1, 128)))
    # the window starts on a boundary of the split (4, 4) mode, so it stays affine
    off, sub = cute.restrict(L, [tvm.ir.Range.from_min_extent(2, 4),
                                 tvm.ir.Range.from_min_extent(4, 8)])
    assert str(sub) == "(4,(4,2)):(16,(1,128))"
    for i, j in itertools.product(range(4), range(8)):
        assert L((2 + i, 4 + j)) == off + sub((i, j))
    with pytest.raises(ValueError, match="region rank"):
        cute.restrict(L, [tvm.ir.Range.from_min_extent(0, 8)])


# ---- swizzles and TileLang layouts -----------------------------------------------------------


def test_swizzle_apply_recast_and_mode():
    sw = cute.Swizzle.parse("Sw<2,4,3>")
    assert sw.apply(384) == 384 ^ 48 and sw.apply(15) == 15  # bits 7,8 flip bits 4,5
    x = np.arange(1024)
    y = sw.apply(x)
    assert sorted(y.tolist()) == x.tolist()  # a bijection
    assert (sw.apply(y) == x).all()  # an involution
    assert str(sw.recast(8, 32)) == "Sw<2,2,3>" and str(sw.recast(8, 256)) == "Sw<1,0,3>"
    assert sw.to_swizzle_mode() is SwizzleMode.SWIZZLE_64B
    with pytest.raises(ValueError, match="canonical"):
        cute.Swizzle(3, 3, 3).to_swizzle_mode()


@pytest.mark.parametrize("bits,mode,b", [(16, 128, 3), (16, 64, 2), (32, 32, 1), (8, 128, 3)])
def test_our_swizzled_layouts_decode_to_tma_swizzles(bits, mode, b):
    rows, cols = 16, 4 * mode * 8 // bits
    layout = swizzled((rows, cols), bits, mode)
    composed = cute.ComposedLayout.from_tilelang(layout)
    assert composed is not None
    sw = composed.swizzle
    assert (sw.b_bits, sw.m_base + (bits // 8).bit_length() - 1, sw.s_shift) == (b, 4, 3)
    off = layout.offsets()
    for i, j in itertools.product(range(rows), range(0, cols, 7)):
        assert composed((i, j)) == off[i, j]
    buf = tvm.tirx.decl_buffer((rows, cols), f"float{bits}" if bits > 8 else "int8",
                               scope="shared")
    in_bytes = cute.ComposedLayout.from_tilelang(layout, buf)
    assert (in_bytes.swizzle.b_bits, in_bytes.swizzle.m_base, in_bytes.swizzle.s_shift) == (b, 4, 3)


def test_recovery_rejects_what_is_not_affine():
    assert cute.Layout.from_tilelang(TLLayout((4, 4), lambda i, j: (i * j) % 16)) is None
    assert cute.ComposedLayout.from_tilelang(TLLayout((4, 4), lambda i, j: i * i + 4 * j)) is None
    n = tvm.tirx.Var("n", "int32")
    with pytest.raises(ValueError, match="must be constant"):
        cute.Layout.from_tilelang(TLLayout((n, 4), lambda i, j: i * 4 + j))


def test_offset_and_padding_are_recovered():
    padded = TLLayout((4, 6), lambda i, j: 100 + i * 8 + j)
    composed = cute.ComposedLayout.from_tilelang(padded)
    assert composed.offset == 100 and not composed.swizzle.is_swizzled
    assert str(composed.layout) == "(4,6):(8,1)"
    assert cute.Layout.from_tilelang(padded) is None  # an offset is not a plain layout


def test_hierarchical_round_trip_through_tilelang():
    L = cute.make_layout((4, (2, 3)), stride=(cute.E(1), (3 * cute.E(0), cute.E(0))))
    back = cute.Layout.from_tilelang_hierarchical(L.to_tilelang())
    assert back is not None
    for i, j in itertools.product(range(4), range(6)):
        assert back((i, j)) == L((i, j))
    assert cute.Layout.from_tilelang_hierarchical(TLLayout((4, 4), lambda i, j: [j, i + j])) is None


def test_const_expressions_act_as_python_values():
    # the folded answers of the analyzer (TVM's IntImm behaviour) and x == x
    v = tvm.tirx.Var("v", "int32")
    assert Analyzer().simplify(v * 2 - v - v) == 0
    assert int(Analyzer().simplify(ir.const(3) + 4)) == 7
    assert (v == v) and not isinstance(v == v + 1, bool)
