"""`ScopedMutator`: inside an `if`, the analyzer knows the bounds the condition puts on loop
and block variables, so copies a pipeline prefetches under `if k + 1 < n` are proven in
bounds and lose their predicates; ragged ones keep them."""

import sys
from pathlib import Path

import tilelang
from tilelang.ir import nodes as ir
from tilelang.transform.analysis.scoped import var_bounds

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.gpu import kernels as K  # noqa: E402


def _bounds(cond):
    return [(v.name, None if lo is None else str(lo), None if hi is None else str(hi))
            for v, lo, hi in var_bounds(cond)]


def test_bounds_from_comparisons():
    k, n = ir.Var("k"), ir.Var("n")
    assert _bounds(ir.compare("lt", ir.binary("add", k, 1), n)) == [("k", None, "n - 1 - 1")]
    assert _bounds(ir.compare("gt", 5, k)) == [("k", None, "4")]
    assert _bounds(ir.compare("ge", ir.binary("sub", k, 2), 0)) == [("k", "2", None)]
    both = ir.logical_and(ir.compare("ge", k, 3), ir.compare("le", k, n))
    assert _bounds(both) == [("k", "3", None), ("k", None, "n")]
    assert _bounds(ir.logical_not(ir.compare("lt", k, 3))) == [("k", "3", None)]
    # nothing is learned through `or` or from non-variable sides
    assert _bounds(ir.logical_or(ir.compare("lt", k, 3), ir.compare("lt", n, 3))) == []
    assert _bounds(ir.compare("lt", ir.binary("mul", k, 2), 7)) == []
    assert _bounds(ir.compare("lt", ir.binary("mul", k, 2), n)) == [("n", "k * 2 + 1", None)]


def _copies(M, N, Kd):
    src = tilelang.lower(K.gemm(M, N, Kd, 64, 64, 32, out_dtype="float16", num_stages=3),
                         target="cuda -arch=sm_80")
    loop = src[src.index("for (int k"):]
    return loop[:loop.index("tl::gemm_ss")]


def test_prefetched_copies_of_whole_tiles_have_no_predicates():
    body = _copies(256, 256, 256)
    assert "tl::cp_async<16>" in body and "cp_async_zfill" not in body and "nbytes" not in body


def test_ragged_copies_keep_their_predicates():
    assert "cp_async_zfill" in _copies(256, 256, 200)  # K = 200: the last tile is partial
    assert "cp_async_zfill" in _copies(250, 256, 256)  # M = 250: the last row block
