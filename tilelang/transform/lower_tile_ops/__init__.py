"""Lower the remaining tile operators: gemm (instruction backend), reductions and scans
(`lower_reduce`), and `T.print`.

Expects: layouts inferred, pipelining done, global→shared copies lowered. Guarantees: no
Gemm, Reduce, CumSum or Print node and no reducer finalize marker remains (the copies of a
register reducer are combined there: `ReduceLowering.combine_replicas`); a float32 register
operand holding TF32 numbers only (`analysis.exact_values`) reaches the mma unrounded; new
parallel loops carry a loop layout when they touch a fragment; a kernel with wgmma gemms
binds their warpgroup index once, at its top.
"""

from __future__ import annotations

import json

from ...ir import nodes as ir
from ...ir.thread_range import InRoleGroups
from ...ir.visitor import Mutator
from ...language.reducer import FINALIZE
from .lower_reduce import ReduceLowering, copy_loop
from ..analysis.scopes import SHARED
from ..analysis.exact_values import tf32_exact_fragments
from ..analysis.reductions import KIND

VOID = ir.DType("void")


def c_string(text: str) -> str:
    return json.dumps(text)


_extern = ir.extern_stmt


class _Lower(InRoleGroups, Mutator):
    def __init__(self, ctx, body):
        self.ctx = ctx
        self.reduce = ReduceLowering(ctx)
        self.body = body
        self._tf32_exact = None

    def tf32_exact(self, g):
        """The float32 fragments holding TF32 numbers only, where `g` reads one (computed
        once per kernel, and only then)."""
        if not any(r.buffer.scope == "local.fragment" and r.buffer.dtype.name == "float32"
                   for r in (g.A, g.B)):
            return frozenset()
        if self._tf32_exact is None:
            self._tf32_exact = tf32_exact_fragments(self.body)
        return self._tf32_exact

    def visit_Gemm(self, g):
        backend = self.ctx.gemm_info[g.C.buffer][0]
        return backend.lower_gemm(g, self.ctx, self.tf32_exact(g))

    def visit_Reduce(self, r):
        return self.reduce.lower(r)

    def visit_CumSum(self, c):
        return self.reduce.lower_scan(c)

    def visit_Attr(self, s):
        if s.key == FINALIZE:  # a reducer kept as register partials: combine its copies
            op = self.ctx.reducer_partials[s.value]
            return self.reduce.combine_replicas(s.value, KIND[op], s.loc)
        return super().visit_Attr(s)

    def visit_Print(self, p):
        ctx = self.ctx
        if p.value is None:
            return ir.Seq((_extern("tl::print_msg", c_string(p.msg)),))
        if isinstance(p.value, ir.Expr):
            msg = p.msg or f"expr<{p.value}>"
            return _extern("tl::print_var", c_string(msg), p.value)
        buf = p.value.buffer
        msg = p.msg or ("" if buf.scope == "global" else f"buffer<{buf.name}, {buf.dtype}>")
        stmts = []
        src = buf
        if buf.scope == "local.fragment":
            src = ctx.add_scratch_shared(f"{buf.name}_print", buf.shape, buf.dtype)
            stmts.append(copy_loop(buf, src, ctx))
        numel = 1
        for s in buf.shape:
            numel *= s
        i = ir.Var("i")
        idx, rest = [], i
        for n in reversed(buf.shape):
            idx.append(ir.binary("floormod", rest, n))
            rest = ir.binary("floordiv", rest, n)
        idx = tuple(reversed(idx))
        line = _extern("tl::print_buffer_value", c_string(msg), c_string(buf.name), i,
                       ir.Load(src, idx, src.dtype))
        loop = ir.For(i, ir.const(0), ir.as_expr(numel), "serial", line)
        if src.scope in SHARED:
            stmts.append(_extern("__syncthreads"))
            loop = ir.If(ir.compare("eq", ctx.tid, 0), loop, None)
        stmts.append(loop)
        return ir.Seq(tuple(stmts))


def _barrier_init(kernel: ir.Kernel, ctx):
    """Thread 0 initialises the T.alloc_barrier mbarriers; everyone waits for it."""
    inits = []
    for key, (buf, counts) in [(k, v) for k, v in kernel.attrs if k == "barrier_init"]:
        for i, c in enumerate(counts):
            ptr = ir.Call("address_of", (ir.Load(buf, (ir.const(i),), buf.dtype),),
                          ir.DType("handle"))
            inits.append(_extern("tl::mbarrier_init", ptr, ir.const(c)))
    if not inits:
        return None
    inits.append(_extern("tl::fence_mbarrier_init"))
    return ir.Seq((ir.If(ir.compare("eq", ctx.tid, 0), ir.Seq(tuple(inits)), None),
                   _extern("__syncthreads")))


def lower_tile_ops(kernel: ir.Kernel, ctx) -> ir.Kernel:
    body = _Lower(ctx, kernel.body).visit(kernel.body)
    init = _barrier_init(kernel, ctx)
    if init is not None:
        body = ir.Seq((init, body))
    if ctx.warpgroup_var is not None:  # wgmma gemms: their warpgroup, computed once
        index = ir.Call("call_extern", ("tl::warpgroup_index", ctx.tid), ir.DType("int32"))
        body = ir.LetStmt(ctx.warpgroup_var, index, body)
    return kernel if body is kernel.body else ir.with_fields(kernel, body=body)
