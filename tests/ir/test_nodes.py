"""Expression helpers of `tilelang.ir.nodes`: constants, the literal typing and promotion rules
of SEMANTICS.md §10, constant folding and cheap identities, comparisons, logical operators,
casts, `as_expr`, `structural_equal`, and buffer/statement conveniences."""

import numpy as np
import pytest

from tilelang.ir import nodes as ir
from tilelang.ir.dtype import DType


def var(dt="int32", name=None):
    return ir.Var(name or f"v_{dt}", DType(dt))


F16, F32, BF16 = var("float16"), var("float32"), var("bfloat16")
I8, I32, I64, U8, U32, B = (var(d) for d in ("int8", "int32", "int64", "uint8", "uint32",
                                             "bool"))


# ---- const ------------------------------------------------------------------------------------


def test_const_literal_types():
    assert ir.const(True).dtype == "bool" and ir.const(True).value is True
    assert ir.const(7).dtype == "int32"
    assert ir.const(2**31 - 1).dtype == "int32" and ir.const(-2**31).dtype == "int32"
    assert ir.const(2**31).dtype == "int64" and ir.const(-2**31 - 1).dtype == "int64"
    assert ir.const(0.5).dtype == "float32"  # a Python float literal is float32
    assert ir.const(np.float16(1.5)).dtype == "float16"  # numpy scalars keep their type
    assert ir.const(np.int64(3)).dtype == "int32"
    with pytest.raises(TypeError, match="cannot make a kernel constant"):
        ir.const("3")


def test_const_with_dtype_converts_like_c():
    assert ir.const(3.7, "int32").value == 3 and ir.const(-3.7, "int32").value == -3
    assert ir.const(300, "int8").value == 44 and ir.const(255, "int8").value == -1
    assert ir.const(-1, "uint16").value == 65535
    assert ir.const(2, "bool").value is True
    assert ir.const(0.1, "float32").value == float(np.float32(0.1))
    assert ir.const(3, "float64").value == 3.0
    with pytest.raises(ValueError):
        ir.const(float("nan"), "int32")


# ---- typing of binary operators (SEMANTICS §10) -------------------------------------------------


@pytest.mark.parametrize("build,want", [
    # floats: the narrower widens; a float literal is float32; an int literal adapts
    (lambda: F16 * 0.5, "float32"),
    (lambda: F16 * 3, "float16"),
    (lambda: 1 / F16, "float16"),
    (lambda: F16 * ir.const(0.5, "float16"), "float16"),
    (lambda: F16 + F32, "float32"),
    (lambda: BF16 * F16, "float16"),
    (lambda: F16 * BF16, "float16"),
    (lambda: BF16 + F32, "float32"),
    # int and float: the int is cast to the float type (a float literal is float32)
    (lambda: I32 * 2.5, "float32"),
    (lambda: 2.5 + I8, "float32"),
    (lambda: I64 + 1.5, "float32"),
    (lambda: I32 + F16, "float16"),
    # integers: the narrower widens, so an int literal makes int8 arithmetic int32
    (lambda: I8 + 1, "int32"),
    (lambda: I32 + I64, "int64"),
    (lambda: I8 + I8, "int8"),
    # same width signed/unsigned -> unsigned
    (lambda: U8 + I8, "uint8"),
    (lambda: I8 + U8, "uint8"),
    (lambda: U32 - 1, "uint32"),
    # bool arithmetic is int32; bool with a float is the float; bitwise bool stays bool
    (lambda: B + 1, "int32"),
    (lambda: B + F16, "float16"),
    (lambda: B & B, "bool"),
    # comparisons are bool
    (lambda: I32 < F16, "bool"),
    # T.max/T.min: a literal takes the other operand's type unless a float meets an int
    (lambda: ir.binary("max", F32, 0), "float32"),
    (lambda: ir.binary("max", 0, F16), "float16"),
    (lambda: ir.binary("min", I32, 2.5), "float32"),
    (lambda: ir.binary("max", I8, 1), "int8"),
    # if_then_else promotes both branches
    (lambda: ir.select(B, F16, F32), "float32"),
    (lambda: ir.select(B, F32, 0), "float32"),
])
def test_promotion_rules(build, want):
    assert build().dtype == want


def test_operands_are_cast_to_the_common_type():
    e = F16 * 0.5
    assert isinstance(e, ir.Binary) and isinstance(e.a, ir.Cast) and e.a.value is F16
    assert isinstance(e.b, ir.Const) and e.b.dtype == "float32"
    e = F16 * 3  # the int literal becomes a float16 constant, no cast of F16
    assert e.a is F16 and e.b.dtype == "float16" and e.b.value == 3.0
    e = ir.binary("max", F32, 0)
    assert e.b.dtype == "float32" and e.b.value == 0.0
    assert str(e) == "T.max(v_float32, 0.0)"


@pytest.mark.parametrize("build,message", [
    (lambda: I32 / I32, "ambiguous"),
    (lambda: I32 / 2, "ambiguous"),
    (lambda: F32 // 2, "needs integer operands"),
    (lambda: F32 % 2.0, "needs integer operands"),
    (lambda: F32 & 1, "bitwise operators need integer"),
    (lambda: F32 ** 2, "T.pow"),
    (lambda: ~F32, "needs an integer operand"),
])
def test_invalid_operators_raise_type_errors(build, message):
    with pytest.raises(TypeError, match=message):
        build()


# ---- constant folding and identities -----------------------------------------------------------


@pytest.mark.parametrize("op,a,b,want", [
    ("add", 2, 3, 5), ("sub", 2, 5, -3), ("mul", 4, -3, -12),
    ("floordiv", -7, 2, -4), ("floormod", -7, 2, 1),  # floor semantics (SEMANTICS §10)
    ("floordiv", 7, -2, -4), ("floormod", 7, -2, -1),
    ("truncdiv", -7, 2, -3), ("truncmod", -7, 2, -1),
    ("min", 3, -1, -1), ("max", 3, -1, 3),
    ("bitand", 12, 10, 8), ("bitor", 12, 10, 14), ("bitxor", 12, 10, 6),
    ("shl", 1, 4, 16), ("shr", -16, 2, -4),
    ("div", 7.0, 2, 3.5),
])
def test_constant_folding(op, a, b, want):
    e = ir.binary(op, a, b)
    assert isinstance(e, ir.Const) and e.value == want


def test_folding_wraps_in_the_result_type():
    e = ir.binary("add", ir.const(2**31 - 1), ir.const(1))
    assert e.dtype == "int32" and e.value == -2**31
    e = ir.binary("sub", ir.const(0, "uint8"), ir.const(1, "uint8"))
    assert e.dtype == "uint8" and e.value == 255
    e = ir.binary("mul", ir.const(0.1, "float16"), 3)
    assert e.dtype == "float16" and e.value == float(np.float16(float(np.float16(0.1)) * 3))


def test_division_by_zero_is_not_folded():
    for op, a, b in (("div", 1.0, 0.0), ("floordiv", 1, 0), ("floormod", 1, 0),
                     ("truncdiv", 1, 0)):
        e = ir.binary(op, a, b)
        assert isinstance(e, ir.Binary) and e.op == op


def test_negative_shift_counts_are_not_folded():
    # Regression: folding `13 << -4` raised Python's "negative shift count" ValueError
    for op in ("shl", "shr"):
        e = ir.binary(op, 13, ir.const(-4))
        assert isinstance(e, ir.Binary) and e.op == op and e.b.value == -4


def test_cheap_identities():
    x = var("int32", "x")
    assert ir.binary("add", x, 0) is x and ir.binary("add", 0, x) is x
    assert ir.binary("sub", x, 0) is x
    assert isinstance(ir.binary("sub", 0, x), ir.Binary)
    assert ir.binary("mul", x, 1) is x and ir.binary("mul", 1, x) is x
    z = ir.binary("mul", x, 0)
    assert isinstance(z, ir.Const) and z.value == 0
    assert ir.binary("floordiv", x, 1) is x
    m = ir.binary("floormod", x, 1)
    assert isinstance(m, ir.Const) and m.value == 0
    # float x * 0.0 is not 0 (NaN, inf, -0.0): kept
    assert isinstance(ir.binary("mul", F32, 0.0), ir.Binary)
    # a float16 value plus an int 0 is the value itself (no cast needed)
    assert ir.binary("add", F16, 0) is F16


def test_unary_folding_and_typing():
    assert ir.unary("neg", ir.const(1, "uint32")).value == 2**32 - 1
    assert ir.unary("bitnot", ir.const(0)).value == -1
    n = -F16
    assert isinstance(n, ir.Unary) and n.op == "neg" and n.dtype == "float16"
    bn = ~(I32 > 0)  # bitnot of a bool is a logical not
    assert isinstance(bn, ir.Unary) and bn.op == "not" and bn.dtype == "bool"
    nb = -B  # arithmetic on bool is int32
    assert nb.dtype == "int32" and isinstance(nb.a, ir.Cast)


# ---- comparisons and logical operators ---------------------------------------------------------


def test_compare_folds_constants_after_promotion():
    c = ir.compare("lt", 1, 2.5)
    assert isinstance(c, ir.Const) and c.value is True and c.dtype == "bool"
    # 0.1 in float16 differs from 0.1 in float32: compared in float32
    assert ir.compare("eq", 0.1, ir.const(0.1, "float16")).value is False
    assert ir.compare("eq", 0.5, ir.const(0.5, "float16")).value is True
    c = ir.compare("ge", I8, 1.5)
    assert isinstance(c, ir.Compare) and c.a.dtype == "float32" and c.dtype == "bool"


def test_operator_overloads_build_comparisons():
    x = var("int32", "x")
    for expr, op in ((x < 1, "lt"), (x <= 1, "le"), (x > 1, "gt"), (x >= 1, "ge"),
                     (x == 1, "eq"), (x != 1, "ne")):
        assert isinstance(expr, ir.Compare) and expr.op == op and expr.a is x
    with pytest.raises(TypeError, match="concrete bool"):
        bool(x < 1)
    with pytest.raises(TypeError, match="Python integer"):
        range(x)


def test_logical_and_or_not_fold_constant_sides():
    x = var("int32", "x")
    c = x > 0
    t, f = ir.const(True), ir.const(False)
    assert ir.logical_and(c, True) is c and ir.logical_and(True, c) is c
    assert ir.logical_and(c, False).value is False and ir.logical_and(f, c) is f
    assert ir.logical_or(c, False) is c and ir.logical_or(False, c) is c
    assert ir.logical_or(c, True).value is True and ir.logical_or(t, c) is t
    assert ir.logical_not(ir.const(0)).value is True
    both = ir.logical_or(c, x < -5)
    assert isinstance(both, ir.Logical) and both.op == "or" and both.dtype == "bool"


def test_logical_ops_on_non_bool_compare_with_zero():
    x = var("int32", "x")
    n = ir.logical_not(x)
    assert isinstance(n, ir.Unary) and n.op == "not"
    assert isinstance(n.a, ir.Compare) and n.a.op == "ne" and n.a.b.value == 0
    a = ir.logical_and(F32, x)
    assert isinstance(a.a, ir.Compare) and a.a.b.dtype == "float32"


def test_select_with_constant_condition_picks_a_branch():
    x = var("int32", "x")
    assert ir.select(True, x, 5) is x
    assert ir.select(0, x, 5).value == 5
    s = ir.select(x > 0, 1, 2.0)
    assert isinstance(s, ir.Select) and s.dtype == "float32"
    assert s.true_value.value == 1.0 and s.true_value.dtype == "float32"


# ---- casts and conversions ---------------------------------------------------------------------


def test_cast_to():
    assert ir.cast_to(F16, "float16") is F16
    c = ir.cast_to(F16, "float32")
    assert isinstance(c, ir.Cast) and c.value is F16
    k = ir.cast_to(ir.const(2.9), "int32")  # constants fold
    assert isinstance(k, ir.Const) and k.value == 2 and k.dtype == "int32"
    assert ir.cast_to(3, "float16").value == 3.0
    assert F16.astype("float32").dtype == "float32"


def test_as_expr():
    x = var()
    assert ir.as_expr(x) is x
    assert ir.as_expr(3).dtype == "int32" and ir.as_expr(True).dtype == "bool"
    assert ir.as_expr(np.float32(1.5)).dtype == "float32"
    v = ir.Buffer("acc", (1,), "float32", scope="local.var")
    load = ir.as_expr(v)
    assert isinstance(load, ir.Load) and load.buffer is v and load.indices[0].value == 0
    with pytest.raises(TypeError, match="index it"):
        ir.as_expr(ir.Buffer("A", (4,), "float32"))
    with pytest.raises(TypeError, match="cannot use str"):
        ir.as_expr("x")

    class Wrapper:
        def __tl_expr__(self):
            return x

    assert ir.as_expr(Wrapper()) is x


def test_call_typing():
    assert ir.call("exp", [F16]).dtype == "float16"
    c = ir.call("exp", [1.0])
    assert c.dtype == "float32" and isinstance(c.args[0], ir.Const)
    c = ir.call("call_extern", ["foo", I32], dtype="int32")
    assert c.args[0] == "foo" and c.dtype == "int32"


# ---- structural equality -----------------------------------------------------------------------


def test_structural_equal():
    x, y = var("int32", "x"), var("int32", "x")
    assert ir.structural_equal(x + 1, x + 1)
    assert not ir.structural_equal(x + 1, y + 1)  # vars by identity
    assert ir.structural_equal(x + 1, y + 1, {id(x): y})
    assert not ir.structural_equal(x + 1, x + 2)
    assert not ir.structural_equal(ir.const(1), ir.const(1.0))  # dtype matters
    assert ir.structural_equal(ir.const(4), 4) and ir.structural_equal(4, ir.const(4))
    assert not ir.structural_equal(x + 1, x - 1)
    a = ir.Store(ir.Buffer("A", (4,), "float32"), (x,), ir.const(1.0), loc="here")
    b = ir.Store(a.buffer, (x,), ir.const(1.0), loc="elsewhere")
    assert ir.structural_equal(a, b)  # locations are ignored


# ---- buffers and statement helpers -------------------------------------------------------------


def test_buffer_equality_is_identity_except_scalar_vars():
    a, b = ir.Buffer("A", (4, 8), "float16"), ir.Buffer("A", (4, 8), "float16")
    assert a == a and a != b and (a in [b]) is False and {a: 1}.get(b) is None
    assert a.ndim == 2 and a.numel() == 32 and a.row_major_strides() == (8, 1)
    assert a.effective_strides() == (8, 1) and a.is_static() and len(a) == 4
    n = var("int32", "n")
    d = ir.Buffer("D", (n, 8), "float32")
    assert not d.is_static() and d.row_major_strides()[0] == 8
    with pytest.raises(TypeError, match="symbolic first dimension"):
        len(d)
    with pytest.raises(TypeError, match="not iterable"):
        iter(a)
    v = ir.Buffer("v", (1,), "int32", scope="local.var")
    eq = v == 3
    assert isinstance(eq, ir.Compare) and isinstance(eq.a, ir.Load)
    assert isinstance(v + 1, ir.Binary)
    with pytest.raises(TypeError, match="concrete bool"):
        bool(v)


def test_region_and_node_accessors():
    buf = ir.Buffer("A", (4, 8), "float32")
    r = ir.BufferRegion.full(buf)
    assert r.starts == (0, 0) and r.extents == (4, 8)
    x = var("int32", "i")
    loop = ir.For(x, ir.const(0), ir.const(4), "pipelined", ir.Seq(()),
                  annotations=(("num_stages", 3),))
    assert loop.annotation("num_stages") == 3 and loop.annotation("order", "none") == "none"
    k = ir.Kernel((ir.const(2),), (32, 4), (x,), (), ir.Seq(()), attrs=(("use_swizzle", (8,
                                                                                      "row")),))
    assert k.num_threads == 128 and k.attr("use_swizzle") == (8, "row") and k.attr("x") is None
    moved = ir.with_fields(loop, kind="serial")
    assert moved.kind == "serial" and moved.var is x and loop.kind == "pipelined"
    with pytest.raises(Exception):
        loop.kind = "serial"  # frozen


def test_nodes_hash_by_identity():
    x = var("int32", "x")
    e1, e2 = x + 1, x + 1
    d = {e1: "a"}
    assert e2 not in d and d[e1] == "a"
    # `==` builds IR instead of comparing, so equality-based containers cannot be used
    assert isinstance(e1 == e2, ir.Compare)
