"""Speed guard: typical GEMM/attention index expressions (10-40 nodes) must simplify in tens of
microseconds (about 50 us each on the 2-core development machine). The guard counts the Python
calls a simplification makes instead of timing it: about 100 per expression today; the limit,
2.5x that, catches a quadratic blow-up or a lost cache on any machine at any load."""

from __future__ import annotations

from tilelang.arith import Analyzer
from tilelang.ir import nodes as ir
from tilelang.testing.calls import count_calls

LIMIT_CALLS = 250


def _index_exprs(bx, by, tx, k, i, j, v, K):
    """Freshly built expressions, as a lowering pass would build them."""
    return [
        (by * 128 + (tx // 32) * 16 + (i // 2) % 8) * 1024 + k * 32 + ((tx % 32) * 8) // 4 + v,
        ((tx % 32) // 4 + (i // 2) * 8 + (tx // 32) * 16) * 64 + ((tx % 4) * 2 + i % 2 + j * 8),
        ((tx * 8 + v) // 64) * 64 + ((((tx * 8 + v) % 64) // 8) ^ (tx % 8)) * 8 + (tx * 8 + v) % 8,
        ir.binary("min", bx * 64 + i + 64, K) - bx * 64,
        bx * 64 + tx // 2 < K,
        (k * 32 + tx % 32) // 32 * 32 + (k * 32 + tx % 32) % 32,
        ((tx // 8) * 8 + tx % 8) * 2 + (i * 4 + j) // 4 - i,
    ]


def test_index_expressions_take_tens_of_microseconds():
    names = ("bx", "by", "tx", "k", "i", "j", "v")
    bx, by, tx, k, i, j, v = (ir.Var(n) for n in names)
    K = ir.Var("K")
    ana = Analyzer()
    for var, ext in zip((bx, by, tx, k, i, j, v), (64, 64, 128, 32, 16, 4, 8)):
        ana.bind(var, 0, ext)
    want = ["by * 131072 + tx // 32 * 16384 + i // 2 * 1024 + k * 32 + tx % 32 * 2 + v",
            None, None, None, None, "k * 32 + tx % 32", "tx * 2"]
    for e, w in zip(_index_exprs(bx, by, tx, k, i, j, v, K), want):
        simplified = str(ana.simplify(e))
        assert w is None or simplified == w
    fresh = _index_exprs(bx, by, tx, k, i, j, v, K)  # no node of these was simplified yet
    _, calls = count_calls(lambda: [ana.simplify(e) for e in fresh])
    per_expr = calls.python / len(want)
    assert per_expr < LIMIT_CALLS, f"{per_expr:.0f} Python calls per simplify ({calls})"
