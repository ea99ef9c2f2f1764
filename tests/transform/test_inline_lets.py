"""inline_pure_lets: lets of pure integer arithmetic disappear into the expressions that use
them (so later passes see whole index expressions); lets that read memory or call something
with side effects stay where they are, fixing the moment of the read."""

import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.transform.inline_lets import inline_pure_lets, is_pure

from transform_helpers import nodes, show


def _kernel():
    @T.prim_func
    def f(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32"),
          Idx: T.Tensor((4,), "int32")):
        with T.Kernel(8, threads=128) as bx:
            base = bx * 128
            off = base + 3          # a let of a let
            n = Idx[0]              # an integer let that reads memory
            v = A[0]                # a float let that reads memory
            A[0] = 5.0              # ... before this store
            for i in T.Parallel(128):
                B[off + i - 3] = A[base + i] + v + T.cast(n, "float32")
    return f


def _lets(stmt):
    return {s.var.name: s for s in nodes(stmt, ir.LetStmt)}


def test_pure_index_lets_are_substituted_everywhere():
    f = _kernel()
    assert {"base", "off"} <= set(_lets(f.body))  # the frontend made lets of them
    body = inline_pure_lets(f.body)
    lets = _lets(body)
    assert "base" not in lets and "off" not in lets
    names = {v.name for v in nodes(body, ir.Var)}
    assert "base" not in names and "off" not in names, show(body)
    (store,) = nodes(body, ir.Store, lambda s: s.buffer.name == "B")
    # the whole index expression, leaves included
    leaves = {v.name for v in nodes(store.indices, ir.Var)}
    assert leaves == {"bx", "i"}
    # the loads keep their place and see the same whole expression for A[base + i]
    (load,) = nodes(store.value, ir.Load, lambda e: e.buffer.name == "A")
    assert {v.name for v in nodes(load.indices, ir.Var)} == {"bx", "i"}


def test_inlined_indices_keep_their_values():
    """off + i - 3 with off = bx*128 + 3 is bx*128 + i: check by evaluation."""
    from tilelang.arith import Analyzer

    body = inline_pure_lets(_kernel().body)
    (store,) = nodes(body, ir.Store, lambda s: s.buffer.name == "B")
    bx = next(v for v in nodes(store.indices, ir.Var) if v.name == "bx")
    i = next(v for v in nodes(store.indices, ir.Var) if v.name == "i")
    a = Analyzer()
    diff = a.simplify(ir.binary("sub", store.indices[0], ir.binary("add", ir.binary(
        "mul", bx, 128), i)))
    assert isinstance(diff, ir.Const) and diff.value == 0


def test_lets_that_read_memory_stay_before_the_store():
    body = inline_pure_lets(_kernel().body)
    lets = _lets(body)
    assert "n" in lets and "v" in lets
    # `v = A[0]` still binds before `A[0] = 5.0`: the store is inside the let's body
    assert nodes(lets["v"].body, ir.Store, lambda s: s.buffer.name == "A")
    assert isinstance(lets["v"].value, ir.Load)


def test_side_effect_calls_are_not_pure():
    x = ir.Var("x")
    pure = ir.binary("add", ir.binary("mul", x, 4), 1)
    assert is_pure(pure)
    extern = ir.Call("call_extern", ("foo", x), ir.DType("int32"))
    atomic = ir.Call("atomic_add", (x, ir.const(1)), ir.DType("int32"))
    assert not is_pure(ir.binary("add", extern, 1))
    assert not is_pure(atomic)


def test_let_of_a_side_effect_call_stays():
    x, y = ir.Var("x"), ir.Var("y")
    call = ir.Call("call_extern", ("next_ticket",), ir.DType("int32"))
    buf = ir.Buffer("O", (4,), ir.DType("int32"), "global")
    inner = ir.Seq((ir.Store(buf, (ir.const(0),), y), ir.Store(buf, (ir.const(1),), y)))
    stmt = ir.LetStmt(x, ir.const(7), ir.LetStmt(y, call, inner))
    out = inline_pure_lets(stmt)
    # x (pure) is gone, y (a call with side effects, used twice) is kept: inlining it would
    # call it twice
    assert [s.var.name for s in nodes(out, ir.LetStmt)] == ["y"]
    assert len(nodes(out, ir.Call, lambda c: c.op == "call_extern")) == 1


def test_nothing_to_inline_returns_the_same_node():
    buf = ir.Buffer("O", (4,), ir.DType("float32"), "global")
    stmt = ir.Store(buf, (ir.const(0),), ir.const(1.0, "float32"))
    assert inline_pure_lets(stmt) is stmt
