"""simplify_kernel: integer expressions simplified with the ranges in scope (values and dtypes
preserved), no If with a constant condition, no nested or empty Seq, one-trip loops
substituted away, zero-trip loops dropped."""

import numpy as np

import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.transform.analysis.numeric import eval_index
from tilelang.transform.simplify_stmt import simplify_kernel

from transform_helpers import SM80, SM90, gemm_with_epilogue, nodes, run_passes, show

I32 = ir.DType("int32")
F32 = ir.DType("float32")


def _make(build, threads=128, grid=4):
    """Simplify a hand-built thread-level kernel whose body is `build(bx, tx, A)`."""
    bx, tx = ir.Var("bx"), ir.Var("tx")
    A = ir.Buffer("A", (4096,), F32, "global")
    kernel = ir.Kernel((grid,), (threads,), (bx,), (tx,), build(bx, tx, A))
    return simplify_kernel(kernel, None), bx, tx


def test_index_arithmetic_is_simplified_and_keeps_its_values():
    vo = ir.Var("vo")

    def build(bx, tx, A):
        idx = ir.binary("add", ir.binary("mul", bx, 1024), ir.binary(
            "floordiv", ir.binary("add", ir.binary("mul", tx, 8), ir.binary("mul", vo, 8)), 8))
        store = ir.Store(A, (idx,), ir.const(1.0, F32))
        build.original = idx
        return ir.For(vo, ir.const(0), ir.const(1), "unroll", store)

    k, bx, tx = _make(build)
    (store,) = nodes(k, ir.Store)
    assert not nodes(k, ir.For)  # the one-trip loop is gone
    simplified = store.indices[0]
    assert len(show(simplified)) < len(show(build.original))
    assert not nodes(simplified, ir.Binary, lambda e: e.op == "floordiv")  # (8tx)//8 = tx
    env = {bx: np.arange(4)[:, None], tx: np.arange(128)[None, :]}
    vo = next(v for v in nodes(build.original, ir.Var) if v.name == "vo")
    np.testing.assert_array_equal(eval_index(simplified, env),
                                  eval_index(build.original, {**env, vo: 0}))
    assert simplified.dtype == I32


def test_int64_expressions_stay_int64():
    def build(bx, tx, A):
        idx = ir.binary("add", ir.binary("mul", ir.Cast(bx, ir.DType("int64")),
                                         ir.const(2**31, ir.DType("int64"))),
                        ir.Cast(tx, ir.DType("int64")))
        big = ir.Buffer("G", (2**33,), F32, "global")
        return ir.Store(big, (idx,), ir.const(0.0, F32))

    k, _, _ = _make(build)
    (store,) = nodes(k, ir.Store)
    assert store.indices[0].dtype == ir.DType("int64")


def test_constant_branches_and_empty_statements_go():
    def build(bx, tx, A):
        s = lambda i: ir.Store(A, (ir.const(i),), ir.const(float(i), F32))
        return ir.Seq((
            ir.If(ir.compare("lt", tx, 128), s(1), s(2)),      # true by the range of tx
            ir.If(ir.compare("ge", tx, 128), s(3)),            # false, no else
            ir.If(ir.compare("lt", bx, 0), s(4), s(5)),        # false: the else branch
            ir.Seq((ir.Seq((s(6),)), ir.Seq(()))),             # nested and empty sequences
            ir.For(ir.Var("z"), ir.const(0), ir.const(0), "serial", s(7)),  # zero trips
        ))

    k, _, _ = _make(build)
    assert not nodes(k, ir.If)
    assert [int(st.indices[0].value) for st in nodes(k, ir.Store)] == [1, 5, 6]
    assert isinstance(k.body, ir.Seq) and all(not isinstance(x, ir.Seq) for x in k.body.stmts)
    assert not nodes(k, ir.For)


def test_selects_decided_by_the_ranges_in_scope():
    def build(bx, tx, A):
        v = ir.Var("v")
        sel = ir.Select(ir.compare("lt", ir.binary("add", tx, v), 132),
                        ir.Load(A, (tx,), F32), ir.const(0.0, F32), F32)
        undecided = ir.Select(ir.compare("lt", ir.binary("add", tx, v), 100),
                              ir.Load(A, (tx,), F32), ir.const(0.0, F32), F32)
        return ir.For(v, ir.const(0), ir.const(4), "unroll", ir.Seq((
            ir.Store(A, (tx,), sel), ir.Store(A, (ir.binary("add", tx, 128),), undecided))))

    k, _, _ = _make(build)
    s1, s2 = nodes(k, ir.Store)
    assert isinstance(s1.value, ir.Load)          # tx + v < 132 always holds
    assert isinstance(s2.value, ir.Select)        # tx + v < 100 does not


def test_lowered_kernels_are_clean():
    for f, target in ((gemm_with_epilogue(), SM80), (gemm_with_epilogue(), SM90)):
        k, _ = run_passes(f, "simplify", target)
        assert not nodes(k, ir.If, lambda s: isinstance(s.cond, ir.Const))
        assert not nodes(k, ir.Select, lambda e: isinstance(e.cond, ir.Const))
        for seq in nodes(k, ir.Seq):
            assert seq.stmts and not any(isinstance(x, ir.Seq) for x in seq.stmts)
        assert not nodes(k, ir.For, lambda s: isinstance(s.extent, ir.Const)
                         and s.extent.value <= 1 and s.step == 1)


def test_simplified_indices_match_the_unsimplified_ones():
    """The guarded vector copy of a ragged 1-D tensor: every global index of the final kernel
    equals the corresponding one before simplification, for every block and thread."""

    @T.prim_func
    def f(A: T.Tensor((1000,), "float16"), B: T.Tensor((1000,), "float16")):
        with T.Kernel(T.ceildiv(1000, 256), threads=128) as bx:
            for i in T.Parallel(256):
                B[bx * 256 + i] = A[bx * 256 + i] * 2.0

    before, cb = run_passes(f, "insert_sync", SM80)
    after, ca = run_passes(f, "simplify", SM80)

    def values(k, ctx):
        env = {ctx.kernel.block_vars[0]: np.arange(4)[:, None, None],
               ctx.kernel.thread_vars[0]: np.arange(128)[None, :, None]}
        for loop in nodes(k, ir.For):
            if loop.var.name == "vi":
                env[loop.var] = np.arange(loop.extent.value)[None, None, :]
            else:
                env.setdefault(loop.var, 0)  # the one-trip `vo` loop
        out = []
        for n in nodes(k, (ir.Load, ir.Store), lambda n: n.buffer.scope == "global"):
            out.append((n.buffer.name, np.broadcast_to(eval_index(n.indices[0], env),
                                                       (4, 128, 2))))
        conds = [np.broadcast_to(eval_index(s.cond, env), (4, 128, 2))
                 for s in nodes(k, ir.If)]
        return out, conds

    (vb, cb_), (va, ca_) = values(before, cb), values(after, ca)
    assert [n for n, _ in vb] == [n for n, _ in va]
    for (_, x), (_, y) in zip(vb, va):
        np.testing.assert_array_equal(x, y)
    assert len(cb_) == len(ca_)
    for x, y in zip(cb_, ca_):
        np.testing.assert_array_equal(x, y)
