"""analysis/shared_access.py: the shared memory a statement reads and writes, remembered per
statement and composed from the statements nested in it."""

from types import SimpleNamespace

from tilelang.ir import nodes as ir
from tilelang.transform.analysis.shared_access import SharedAccesses


def _sample():
    A = ir.Buffer("A", (64,), "float32", "shared.dyn")
    B = ir.Buffer("B", (64,), "float32", "shared.dyn")
    C = ir.Buffer("C", (64,), "float32", "shared.dyn")
    G = ir.Buffer("G", (64,), "float32", "global")
    i = ir.Var("i")
    copy_in = ir.Store(A, (i,), ir.Load(G, (i,), G.dtype))
    move = ir.Store(B, (i,), ir.Load(A, (i,), A.dtype) + ir.Load(C, (i,), C.dtype))
    loop = ir.For(i, ir.const(0), ir.const(64), "serial", ir.Seq((copy_in, move)))
    out = ir.Store(G, (ir.const(0),), ir.Load(B, (ir.const(0),), B.dtype))
    return (A, B, C), copy_in, move, loop, ir.Seq((loop, out))


def test_effects_of_nested_statements():
    (A, B, C), copy_in, move, loop, body = _sample()
    acc = SharedAccesses(SimpleNamespace(shared_plan={}))
    assert acc.effects(copy_in) == (set(), {A})
    assert acc.effects(move) == ({A, C}, {B})
    assert acc.effects(loop) == ({A, C}, {A, B})
    assert acc.effects(body) == ({A, B, C}, {A, B})


def test_remembered_effects_match_a_fresh_walk():
    _, copy_in, move, loop, body = _sample()
    warm = SharedAccesses(SimpleNamespace(shared_plan={}))
    for s in (copy_in, move, loop):  # inner statements first: the outer ones compose them
        warm.all_effects(s)
    fresh = SharedAccesses(SimpleNamespace(shared_plan={}))
    assert warm.all_effects(body) == fresh.all_effects(body)
    assert warm.all_effects(body) is warm.all_effects(body)  # asked again: remembered
    r, w, a = warm.all_effects(loop)
    assert all(isinstance(x, frozenset) for x in (r, w, a))  # shared: never mutated
