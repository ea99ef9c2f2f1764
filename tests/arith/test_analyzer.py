"""The Analyzer API that lowering relies on: ranges, proofs, bounds, linear forms."""

from __future__ import annotations

import pytest

from tilelang.arith import Analyzer, const_int_bound, prove, simplify
from tilelang.arith.int_eval import evaluate
from tilelang.ir import nodes as ir

I64 = ir.DType("int64")


def vars_(*names):
    return [ir.Var(n) for n in names]


def test_bind_and_bounds():
    tx, i, n = vars_("tx", "i", "n")
    a = Analyzer()
    a.bind(tx, 0, 128)
    a.bind_range(i, 2, 5)
    assert a.const_int_bound(tx) == (0, 127)
    assert a.const_int_bound(tx * 4 + 3) == (3, 511)
    assert a.const_int_bound(tx // 32) == (0, 3)
    assert a.const_int_bound(tx % 32 - i) == (-5, 29)
    assert a.const_int_bound(n) == (None, None)
    assert a.const_int_bound(tx + n) == (None, None)
    assert a.const_int_bound(ir.binary("max", n, 4)) == (4, None)
    assert a.const_int_bound(ir.binary("min", tx, n)) == (None, 127)
    assert a.const_int_bound(tx * tx) == (0, 127 * 127)
    k = ir.Var("k")
    a.bind(k, -8, 16)
    assert a.const_int_bound(k * tx) == (-8 * 127, 7 * 127)
    assert a.const_int_bound(k * k) == (0, 64)
    assert a.const_int_bound(ir.cast_to(ir.cast_to(tx * 2**24, "int8"), "int32")) == (-128, 127)
    big = ir.Var("big", I64)
    a.bind(big, 0, 2**40)
    assert a.const_int_bound(ir.cast_to(big, "int32")) == (None, None)  # may wrap
    assert a.const_int_bound(ir.cast_to(big // 2**20, "int32")) == (0, 2**20 - 1)
    assert a.const_int_bound(ir.select(n < 3, tx, i)) == (0, 127)
    u8 = ir.Buffer("B", (16,), "uint8")
    assert a.const_int_bound(ir.cast_to(ir.Load(u8, (i,), u8.dtype), "int32")) == (0, 255)
    assert a.const_int_bound(tx < 200) == (1, 1)
    assert a.const_int_bound(ir.const(7)) == (7, 7)
    # module level: no ranges
    assert const_int_bound(tx % 8) == (0, 7)
    assert const_int_bound(tx) == (None, None)


def test_bind_accepts_const_exprs_and_rebinding():
    i = ir.Var("i")
    a = Analyzer()
    a.bind(i, ir.const(0), ir.const(16))
    assert a.prove(i < 16) and not a.prove(i < 15)
    assert str(a.simplify(i // 16)) == "0"
    a.bind(i, 0, 64)  # a new range replaces the old one, and cached results with it
    assert not a.prove(i < 16)
    assert str(a.simplify(i // 16)) == "i // 16"
    a.unbind(i)
    assert a.const_int_bound(i) == (None, None)


def test_binding_after_use_refreshes_results():
    i, j = vars_("i", "j")
    a = Analyzer()
    assert str(a.simplify(i // 16 + j // 4)) == "i // 16 + j // 4"
    a.bind(i, 0, 16)
    assert str(a.simplify(i // 16 + j // 4)) == "j // 4"
    a.bind(j, 0, 4)   # j was looked at while unbound: its cached answers are dropped
    assert str(a.simplify(i // 16 + j // 4)) == "0"
    k = ir.Var("k")
    a.bind(k, 0, 2)   # fresh var: the cache is kept, answers stay right
    assert str(a.simplify(i // 16 + k // 2 + j)) == "j"


def test_scope_restores_ranges():
    i, j = vars_("i", "j")
    a = Analyzer()
    a.bind(i, 0, 8)
    with a.scope():
        a.bind(j, 0, 4)
        a.bind(i, 0, 2)
        assert a.prove(i * 4 + j < 8)
    assert a.const_int_bound(i) == (0, 7)
    assert a.const_int_bound(j) == (None, None)


def test_a_scope_that_only_adds_variables_drops_them_and_what_was_learnt_about_them():
    i, j, k = vars_("i", "j", "k")
    a = Analyzer()
    a.bind(i, 0, 8)
    assert str(a.simplify(i // 8)) == "0"
    with a.scope():
        a.bind(j, 0, 4)
        a.bind(k, 0, 2)
        assert a.prove(i * 4 + j < 32)
        assert str(a.simplify(j // 4 + k // 2)) == "0"
    assert a.const_int_bound(j) == (None, None) and a.const_int_bound(k) == (None, None)
    assert not a.prove(i * 4 + j < 32)
    assert str(a.simplify(j // 4)) != "0"
    assert str(a.simplify(i // 8)) == "0"  # the outer range still holds
    with a.scope():
        a.bind(j, 0, 2)  # never looked at inside: what was cached outside is kept
        assert str(a.simplify(i // 8)) == "0"
    assert a.const_int_bound(j) == (None, None)
    assert not a.prove(j < 2)
    assert a.const_int_bound(i) == (0, 7)


def test_prove():
    i, j, n = vars_("i", "j", "n")
    a = Analyzer()
    a.bind(i, 0, 32)
    a.bind(j, 0, 4)
    assert a.prove(i < 64)
    assert a.prove(i * 4 + j < 128)
    assert not a.prove(i * 4 + j < 127)
    assert a.prove(ir.logical_and(i >= 0, j <= 3))
    assert not a.prove(i < n)
    assert a.prove(i + n - n < 32)
    assert a.prove(ir.logical_or(n < 5, n >= 5))
    assert a.prove(True) and not a.prove(False)
    assert a.prove(i + 1)  # non-zero integer
    assert not a.prove(i)
    assert prove((n * 2) % 2 == 0)
    assert not prove(n % 2 == 0)
    # the code generator's question: can floordiv be emitted as C division?
    assert a.prove(ir.logical_and(ir.compare("ge", i * 4 + j, 0), ir.compare("gt", 8, 0)))


def test_symbolic_ranges():
    i, n, k, base = vars_("i", "n", "k", "base")
    a = Analyzer()
    a.bind(i, 0, n)             # i in [0, n)
    a.bind(k, base, 8)          # k in [base, base + 8)
    assert a.prove(i < n)
    assert a.prove(i - n < 0)
    assert not a.prove(i < n - 1)
    assert a.prove(i >= 0)
    assert str(a.simplify(ir.binary("min", i, n))) == "i"
    assert str(a.simplify(ir.binary("max", i, n - 1))) == "n - 1"
    assert str(a.simplify((k - base) // 8)) == "0"
    assert str(a.simplify((k - base) % 8)) == "k - base"
    assert a.const_int_bound(k - base) == (0, 7)
    assert str(a.simplify((i * n + i) // n)) == "i"  # i // n == 0 since 0 <= i < n
    assert str(a.simplify((k * n + i) % n)) == "i"


def test_symbolic_size_expressions():
    n = ir.Var("n")
    # a padded size minus the size is in [0, 31]
    pad = (n + 31) // 32 * 32 - n
    assert const_int_bound(pad) == (0, 31)
    a = Analyzer()
    for v in (0, 1, 31, 32, 33, 1000, -5):
        assert evaluate(a.simplify(pad), {n: v}) == (v + 31) // 32 * 32 - v
    assert str(simplify(ir.binary("floordiv", n + 127, 128) * 128 // 128)) == "(n + 127) // 128"


def test_can_prove_equal():
    x, y = vars_("x", "y")
    a = Analyzer()
    a.bind(y, 0, 8)
    assert a.can_prove_equal(x % 8 + (x // 8) * 8, x)
    assert a.can_prove_equal(y % 8, y)
    assert not a.can_prove_equal(x % 8, x)
    f = ir.Var("f", ir.FLOAT32)
    assert a.can_prove_equal(f * 1.0, f)
    assert not a.can_prove_equal(f + 1.0, f)


def test_is_divisible():
    x, y = vars_("x", "y")
    a = Analyzer()
    a.bind(y, 0, 4)
    assert a.is_divisible(x * 8 + 16, 8)
    assert a.is_divisible(x * 8 + 16, 4)
    assert not a.is_divisible(x * 8 + 4, 8)
    assert a.is_divisible((x % 4) * 16, 16)
    assert not a.is_divisible(x * 8 + y, 8)
    assert a.is_divisible(x * 8 + y * 0, 8)
    assert a.is_divisible((y // 4) * 3, 5)  # y // 4 == 0
    with pytest.raises(ValueError):
        a.is_divisible(x, 0)


def test_detect_linear():
    bx, tx, i, v, n = vars_("bx", "tx", "i", "v", "n")
    a = Analyzer()
    a.bind(v, 0, 8)
    a.bind(tx, 0, 128)
    coef, rest = a.detect_linear(bx * 128 + tx * 4 + v, v)
    assert coef == 1 and str(rest) == "bx * 128 + tx * 4"
    coef, rest = a.detect_linear((bx * 128 + tx) * n + v * 2, tx)
    assert str(coef) == "n" and str(rest) == "bx * n * 128 + v * 2"
    coef, rest = a.detect_linear(bx * 4, v)
    assert coef == 0 and str(rest) == "bx * 4"
    # through a division the var is not linear ...
    assert a.detect_linear((tx * 8 + v) // 3, v) is None
    # ... unless the division disappears: (tx * 8 + v) // 8 == tx
    coef, rest = a.detect_linear((tx * 8 + v) // 8 * 64 + v, v)
    assert coef == 1 and str(rest) == "tx * 64"
    assert a.detect_linear(v * v, v) is None
    coef, rest = a.detect_linear(i * 2 + 1, i)
    assert isinstance(coef, int) and coef == 2 and rest.value == 1


def test_substitute():
    i, j = vars_("i", "j")
    a = Analyzer()
    res = a.substitute(i * 4 + j, {i: j * 2, j: 3})
    assert str(res) == "j * 8 + 3"


def test_simplify_accepts_python_values_and_rejects_statements():
    assert simplify(5).value == 5
    with pytest.raises(TypeError):
        simplify(ir.Evaluate(ir.const(1)))


def test_analyzers_are_independent():
    i = ir.Var("i")
    a, b = Analyzer(), Analyzer()
    a.bind(i, 0, 8)
    b.bind(i, 0, 100)
    assert str(a.simplify(i // 8)) == "0"
    assert str(b.simplify(i // 8)) == "i // 8"
    assert str(simplify(i // 8)) == "i // 8"


def test_cache_survives_table_reset(monkeypatch):
    from tilelang.arith import atoms

    i = ir.Var("i")
    a = Analyzer()
    a.bind(i, 0, 8)
    assert str(a.simplify(i // 8 + i)) == "i"
    monkeypatch.setattr(atoms, "_LIMIT", 0)
    assert str(a.simplify(i % 8 + 1)) == "i + 1"   # tables were dropped, ranges rebuilt
    monkeypatch.setattr(atoms, "_LIMIT", 200_000)
    assert str(a.simplify((i + 8) // 8)) == "1"


def test_int_eval_semantics():
    x = ir.Var("x")
    assert evaluate(ir.binary("floordiv", x, 4), {x: -7}) == -2
    assert evaluate(ir.binary("floormod", x, 4), {x: -7}) == 1
    assert evaluate(ir.binary("truncdiv", x, 4), {x: -7}) == -1
    assert evaluate(ir.binary("truncmod", x, 4), {x: -7}) == -3
    assert evaluate(ir.binary("shr", x, 1), {x: -7}) == -4
    assert evaluate(ir.select(x < 0, -x, x), {x: -3}) == 3
    assert evaluate(x * 2**20 * 2**20, {x: 1}) == 2**40
    assert evaluate(x * 2**20 * 2**20, {x: 1}, wrap=True) == 0
    assert evaluate(ir.cast_to(x, "int8"), {x: 200}) == -56


def test_rebinding_updates_dependent_ranges():
    n, p = vars_("n", "p")
    a = Analyzer()
    a.bind(n, 1, 100)          # n in [1, 100]
    a.bind(p, 0, n)            # p in [0, n)
    assert a.const_int_bound(p) == (0, 99)
    assert a.prove(p < 100)
    a.bind(n, 1, 1000)         # widening n must widen p's constant bound too
    assert a.const_int_bound(p) == (0, 999)
    assert not a.prove(p < 100)
    assert a.prove(p < n)
    a.bind(n, 1, 1000)         # same range again: nothing changes
    assert a.const_int_bound(p) == (0, 999)
