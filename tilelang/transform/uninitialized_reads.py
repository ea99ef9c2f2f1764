"""Warn about register memory that is read before anything writes it.

Fresh fragments (`T.alloc_fragment`) and per-thread arrays (`T.alloc_local`) hold garbage on
the GPU (the interpreter fills them with NaN), so reading one before writing it is a bug that
a GPU run hides: the classic case is a GEMM accumulator that is never cleared, which `T.gemm`
reads to add to it. This analysis finds such reads at compile time, for both backends.

Expects: a traced PrimFunc (tile level: tile operators and T.Parallel loops not lowered yet).
Guarantees: the function is not changed and nothing is raised. For each fragment or `local`
buffer, the first read in program order that no earlier statement (in program order, in any
branch) writes gives one `UninitializedReadWarning` at the user's file and line. Reads are
element loads and the operands tile operators read: `T.gemm`'s C unless `clear_accum` is
anything but a constant False, a reduction's output with `clear=False`, a tile atomic's
destination. To raise no false alarm it misses some reads:
  * a write anywhere earlier counts, even one in a branch or of part of the buffer;
  * a read under an `if` is not reported (the condition may skip the first iteration);
  * a buffer handed to anything opaque (its address, `T.address_of(L[0])`, for an extern
    call) counts as written.
"""

from __future__ import annotations

import warnings

from ..ir import nodes as ir
from ..ir.visitor import LocatedVisitor

__all__ = ["UninitializedReadWarning", "warn_uninitialized_reads"]

_CHECKED_SCOPES = ("local.fragment", "local")
# one warning per place and message in a process, also when a factory compiles the same kernel
# for other arguments (the `default` warnings action consults this registry)
_REGISTRY: dict = {}


class UninitializedReadWarning(UserWarning):
    """A fragment or local buffer is read before anything writes it."""


def _root(buffer: ir.Buffer) -> ir.Buffer:
    return buffer.view_of or buffer


def _is_false(value) -> bool:
    if isinstance(value, ir.Const):
        value = value.value
    return value is False or (isinstance(value, (int, float)) and not value)


class _FirstReads(LocatedVisitor):
    def __init__(self):
        self.written: set = set()
        self.reported: set = set()
        self.findings: list = []  # (buffer, what, loc)
        self.conditional = 0

    # ---- the two events ----------------------------------------------------------------------
    def read(self, buffer: ir.Buffer, what: str):
        b = _root(buffer)
        if (b.scope in _CHECKED_SCOPES and b not in self.written and b not in self.reported
                and not self.conditional):
            self.reported.add(b)
            self.findings.append((b, what, self.loc))

    def write(self, buffer: ir.Buffer):
        self.written.add(_root(buffer))

    def region(self, r: ir.BufferRegion):
        for start, extent in r.region:
            self.visit(start)
            self.visit(extent)

    # ---- expressions -------------------------------------------------------------------------
    def visit_Load(self, e: ir.Load):
        self.visit(e.indices)
        self.read(e.buffer, f"`{e.buffer.name}[...]` is read")

    def visit_Call(self, c: ir.Call):
        if c.op == "ptx_ldmatrix":  # (trans, num, source element, destination element)
            self.visit(c.args[2])
            self.visit(c.args[3].indices)
            self.write(c.args[3].buffer)
            return
        if c.op not in ("address_of", "access_ptr"):
            self.generic(c)
            return
        for a in c.args:  # an address handed on (to an extern call): opaque, as below
            if isinstance(a, ir.Load):
                self.visit(a.indices)
                self.write(a.buffer)
            else:
                self.visit(a)

    def visit_Buffer(self, b: ir.Buffer):
        # a buffer outside a load (an address for an extern call, T.access_ptr): its use is
        # opaque, so assume it is written there
        self.write(b)

    def visit_BufferRegion(self, r: ir.BufferRegion):
        self.region(r)
        self.write(r.buffer)

    # ---- statements --------------------------------------------------------------------------
    def visit_Store(self, s: ir.Store):
        self.visit(s.indices)
        self.visit(s.value)
        self.write(s.buffer)

    def visit_Allocate(self, s: ir.Allocate):
        if s.init is not None:
            self.visit(s.init)
            self.write(s.buffer)
        self.visit(s.body)

    def visit_If(self, s: ir.If):
        self.visit(s.cond)
        self.conditional += 1
        self.visit(s.then_body)
        self.visit(s.else_body)
        self.conditional -= 1

    def visit_Attr(self, s: ir.Attr):
        self.visit(s.body)

    def visit_Kernel(self, s: ir.Kernel):
        self.visit(s.grid)
        self.visit(s.body)

    def visit_Copy(self, s: ir.Copy):
        self.region(s.src)
        self.region(s.dst)
        self.read(s.src.buffer, f"T.copy reads `{s.src.buffer.name}`")
        self.write(s.dst.buffer)

    def visit_Fill(self, s: ir.Fill):
        self.region(s.dst)
        self.visit(s.value)
        self.write(s.dst.buffer)

    def visit_Gemm(self, s: ir.Gemm):
        operands = s.operands()
        for r in operands + (s.C,):
            self.region(r)
        op = "T.gemm_sp" if isinstance(s, ir.GemmSp) else "T.gemm"
        for r, name in zip(operands, ("A", "E", "B") if len(operands) == 3 else ("A", "B")):
            self.read(r.buffer, f"{op} reads its {name} operand `{r.buffer.name}`")
        if isinstance(s.clear_accum, ir.Expr):
            self.visit(s.clear_accum)
        if _is_false(s.clear_accum):
            self.read(s.C.buffer, f"T.gemm adds to `{s.C.buffer.name}` (C += A @ B)")
        self.write(s.C.buffer)

    def visit_Reduce(self, s: ir.Reduce):
        self.read(s.src, f"T.reduce_{s.kind} reads `{s.src.name}`")
        if not s.clear:
            self.read(s.dst, f"T.reduce_{s.kind}(clear=False) combines with `{s.dst.name}`")
        self.write(s.dst)

    def visit_CumSum(self, s: ir.CumSum):
        self.read(s.src, f"T.cum{s.kind} reads `{s.src.name}`")
        self.write(s.dst)

    def visit_AtomicTile(self, s: ir.AtomicTile):
        if isinstance(s.src, ir.BufferRegion):
            self.region(s.src)
            self.read(s.src.buffer, f"T.atomic_{s.op} reads `{s.src.buffer.name}`")
        else:
            self.visit(s.src)
        self.region(s.dst)
        if not s.cluster_sum:
            self.read(s.dst.buffer, f"T.atomic_{s.op} updates `{s.dst.buffer.name}`")
        self.write(s.dst.buffer)

    def visit_Print(self, s: ir.Print):
        if isinstance(s.value, ir.BufferRegion):
            self.region(s.value)
            self.read(s.value.buffer, f"T.print reads `{s.value.buffer.name}`")
        else:
            self.visit(s.value)


def _message(buffer: ir.Buffer, what: str) -> str:
    kind = "fragment" if buffer.scope == "local.fragment" else "local buffer"
    fix = (f"T.clear({buffer.name}) before the loop, or T.gemm(..., clear_accum=True)"
           if what.startswith("T.gemm adds") else
           f"write it first (T.clear / T.fill({buffer.name}, value) or a T.copy into it)")
    # the file and line are the warning's own (Python prints the source line under it)
    return (f"{what}, but nothing has written the {kind} `{buffer.name}` yet: it holds garbage "
            f"on the GPU (NaN on the CPU interpreter); {fix}")


def warn_uninitialized_reads(func: ir.PrimFunc) -> list:
    """Warn (UninitializedReadWarning) at each first read of an unwritten fragment or local
    buffer of `func`; returns the findings as (buffer, description, SourceLoc or None)."""
    finder = _FirstReads()
    finder.visit(func.body)
    for buffer, what, loc in finder.findings:
        filename, lineno = (loc.filename, loc.lineno) if loc is not None else (
            func.source or ("<kernel>", 0))
        warnings.warn_explicit(_message(buffer, what), UninitializedReadWarning,
                               filename, lineno, registry=_REGISTRY)
    return finder.findings
