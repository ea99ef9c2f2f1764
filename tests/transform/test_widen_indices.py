"""widen_indices: accesses to a global tensor of 2^31 or more elements (or with 64-bit symbolic
sizes, or with tl.config_index_bitwidth = 64) compute their indices in int64 from the leaves
up, so neither the address nor the bounds guard derived from it overflows; smaller tensors
keep int32 arithmetic."""

import numpy as np

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.runtime import compile_cuda
from tilelang.transform.analysis.numeric import eval_index
from tilelang.transform.pass_config import PassConfigKey
from tilelang.transform.analysis.indices import needs_int64

from transform_helpers import SM80, SM90, nodes, requires_compiler, run_passes, show

INT64 = ir.DType("int64")


def _copy2d(M, N, dtype="float16"):
    @T.prim_func
    def f(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 4), threads=128) as (bx, by):
            for i, j in T.Parallel(4, 128):
                B[by * 4 + i, bx * 128 + j] = A[by * 4 + i, bx * 128 + j] * 2.0
    return f


def _copy1d(N):
    @T.prim_func
    def f(A: T.Tensor((N,), "float16"), B: T.Tensor((N,), "float16")):
        with T.Kernel(T.ceildiv(N, 256), threads=128) as bx:
            for i in T.Parallel(256):
                B[bx * 256 + i] = A[bx * 256 + i] + 1.0
    return f


def _global_accesses(k):
    return nodes(k, (ir.Load, ir.Store), lambda n: n.buffer.scope == "global")


def _all_int64(expr):
    """Every integer operation is int64 and every narrower variable is cast to int64 where it
    is used (no int32 arithmetic anywhere below the index)."""
    casts = nodes(expr, ir.Cast, lambda c: c.dtype == INT64)
    under_cast = lambda n: any(c.value is n for c in casts)
    for e in nodes(expr, (ir.Binary, ir.Const), lambda e: e.dtype.is_int):
        if e.dtype != INT64 and not under_cast(e):
            return False
    for v in {id(v): v for v in nodes(expr, ir.Var, lambda v: v.dtype.bits < 64)}.values():
        uses = len(nodes(expr, ir.Var, lambda x: x is v))
        if uses != len([c for c in casts if c.value is v]):
            return False
    return True


def test_needs_int64_threshold():
    big = ir.Buffer("A", (65536, 32768), ir.DType("float16"), "global")
    small = ir.Buffer("A", (65536, 32767), ir.DType("float16"), "global")
    shared = ir.Buffer("S", (65536, 32768), ir.DType("float16"), "shared.dyn")
    assert needs_int64(big) and not needs_int64(small) and not needs_int64(shared)


def test_huge_tensor_indices_are_int64_from_the_leaves():
    k, ctx = run_passes(_copy2d(65536, 65536), "widen_indices", SM90)
    accesses = _global_accesses(k)
    assert {a.buffer.name for a in accesses} == {"A", "B"}
    for a in accesses:
        for idx in a.indices:
            assert idx.dtype == INT64, show(idx)
            assert _all_int64(idx), show(idx)


def test_small_tensor_keeps_int32():
    k, _ = run_passes(_copy2d(1024, 1024), "widen_indices", SM90)
    for a in _global_accesses(k):
        assert all(idx.dtype == ir.DType("int32") for idx in a.indices)
        assert not nodes(a.indices, ir.Cast, lambda c: c.dtype == INT64)


def test_widened_indices_keep_their_values():
    """At the last block the flat offset is past 2^31: the widened expression has the exact
    (unbounded) value of the original."""
    N = 65536
    k32, c32 = run_passes(_copy2d(N, N), "partition_parallel", SM90)
    k64, c64 = run_passes(_copy2d(N, N), "widen_indices", SM90)
    a32 = next(a for a in _global_accesses(k32) if a.buffer.name == "B")
    a64 = next(a for a in _global_accesses(k64) if a.buffer.name == "B")

    def env(k, ctx):
        e = {v: int(g) - 1 for v, g in zip(ctx.kernel.block_vars, ctx.kernel.grid)}
        e[ctx.kernel.thread_vars[0]] = np.arange(128)
        for loop in nodes(k, ir.For):
            e.setdefault(loop.var, 0)
        return e

    flat32 = eval_index(a32.indices[0], env(k32, c32)) * N + eval_index(a32.indices[1],
                                                                        env(k32, c32))
    flat64 = eval_index(a64.indices[0], env(k64, c64)) * N + eval_index(a64.indices[1],
                                                                        env(k64, c64))
    np.testing.assert_array_equal(flat32, flat64)
    assert flat64.max() >= 2**31


def test_guards_of_a_huge_1d_tensor_are_int64():
    k, _ = run_passes(_copy1d(2**31 + 1000), "guard_global", SM90)
    conds = [s.cond for s in nodes(k, ir.If)] + [e.cond for e in nodes(k, ir.Select)]
    assert conds
    for c in conds:
        for cmp in nodes(c, ir.Compare):
            assert cmp.a.dtype == INT64 and cmp.b.dtype == INT64, show(c)
    src = tilelang.lower(_copy1d(2**31 + 1000), target=SM90)
    assert "2147484648LL" in src and "((int64_t)bx) * 256LL" in src
    assert "bx * 256 +" not in src  # no int32 product of the block index anywhere


def test_int64_symbolic_sizes_widen():
    n = T.dynamic("n", "int64")

    @T.prim_func
    def f(A: T.Tensor((n, 1024), "float16"), B: T.Tensor((n, 1024), "float16")):
        with T.Kernel(T.ceildiv(n, 4), threads=128) as bx:
            for i, j in T.Parallel(4, 1024):
                B[bx * 4 + i, j] = A[bx * 4 + i, j]

    k, _ = run_passes(f, "widen_indices", SM80)
    for a in _global_accesses(k):
        assert all(idx.dtype == INT64 for idx in a.indices)


def test_index_bitwidth_config_widens_every_global_access():
    k, _ = run_passes(_copy2d(1024, 1024), "widen_indices", SM80,
                      {PassConfigKey.TL_CONFIG_INDEX_BITWIDTH: 64})
    accesses = _global_accesses(k)
    assert accesses and all(idx.dtype == INT64 for a in accesses for idx in a.indices)


@requires_compiler
def test_widened_kernels_compile():
    compile_cuda(tilelang.lower(_copy2d(65536, 65536), target=SM90), "sm_90a", name="wide2d")
    compile_cuda(tilelang.lower(_copy1d(2**31 + 1000), target=SM90), "sm_90a", name="wide1d")
