"""Reject programs the reference system rejects before lowering, with located errors.

Expects: a freshly traced PrimFunc. Guarantees (else raises a KernelError at the offending
statement):
  * every variable is used inside the scope that defines it (a let bound inside a loop or
    branch is not read after it);
  * inside one T.Parallel nest, all accesses to one fragment use the same indices, and a
    T.Parallel loop with a symbolic extent does not index a fragment;
  * a fragment T.gemm lays out (an operand or accumulator: the instruction spreads both dims
    over the threads) is not indexed inside T.Parallel by the variable of a loop nested in it
    (`for j in T.serial(N): s[i] += acc[i, j]`: "thread-distributed fragment", as the
    reference says; a serial loop around the nest is fine, see docs/layouts.md);
  * a thread-private `local` buffer is not indexed by a T.Parallel loop variable;
  * an access to a shared, fragment or local buffer of static shape stays inside it wherever
    that can be decided exactly: each index a constant plus constant multiples of variables of
    enclosing loops with constant bounds and no branch, break or select in their bodies (so
    every iteration runs). The interpreter would fail such a program when it runs and CUDA
    would read or write other memory: both reject it here (`S[i]` in `T.Parallel(64)` over a
    32-element shared tile).

These are the fragment rules of both targets: the interpreter runs what passes them, and the
CUDA path lowers all of it (layout inference replicates, keeps dims in registers or stages
through shared memory where a layout cannot serve an access; see docs/layouts.md). Like the
reference, a fragment may be indexed anywhere outside T.Parallel (every thread then holds it
whole), and inside T.Parallel by any index expression.

Before the bounds rule (the reference sizes a fragment by the layout of the loop that indexes
it): a fragment dim indexed directly by a T.Parallel variable whose loop is longer than the dim
grows to the loop's extent (`sinks = T.alloc_fragment([heads])` filled by `for i in
T.Parallel(block_M): sinks[i] = ...`), unless an instruction (gemm, reduction, scan) or
T.annotate_layout fixes the fragment's shape.
"""

from __future__ import annotations

from ..arith import Analyzer
from ..errors import located
from ..ir import nodes as ir
from ..ir.visitor import LocatedVisitor, collect, collect_stmts


def _err(loc, exc, msg):
    raise located(exc)(msg, loc)


class _Scopes(LocatedVisitor):
    def __init__(self, params):
        self.scope: list[set] = [set()]
        for p in params:
            if isinstance(p, ir.Var):
                self.scope[0].add(p)
            else:
                for s in list(p.shape) + list(p.strides or ()):
                    if isinstance(s, ir.Expr):
                        self.scope[0].update(collect(s, lambda n: isinstance(n, ir.Var)))
        self.defined_anywhere: dict = {}

    def defined(self, v):
        return any(v in s for s in self.scope)

    def push(self, vars_=()):
        self.scope.append(set(vars_))

    def pop(self):
        self.scope.pop()

    def visit_Var(self, v):
        if not self.defined(v):
            where = self.defined_anywhere.get(v)
            hint = f" (bound at line {where.lineno})" if where is not None else ""
            _err(self.loc, NameError,
                 f"Immutable variable `{v.name}` is used outside its defining region{hint}; "
                 "a value assigned inside a loop or branch and read after it needs "
                 "T.alloc_var")

    def visit_Buffer(self, b):
        for s in b.shape:
            if isinstance(s, ir.Expr):
                self.visit(s)

    def visit_LetStmt(self, s):
        self.visit(s.value)
        self.scope[-1].add(s.var)
        self.defined_anywhere[s.var] = s.loc
        self.visit(s.body)

    def visit_For(self, s):
        self.visit(s.start)
        self.visit(s.extent)
        self.push([s.var])
        self.visit(s.body)
        self.pop()

    def visit_If(self, s):
        self.visit(s.cond)
        self.push()
        self.visit(s.then_body)
        self.pop()
        if s.else_body is not None:
            self.push()
            self.visit(s.else_body)
            self.pop()

    def visit_While(self, s):
        self.visit(s.cond)
        self.push()
        self.visit(s.body)
        self.pop()

    def visit_Allocate(self, s):
        if s.init is not None:
            self.visit(s.init)
        self.visit(s.body)

    def visit_Kernel(self, s):
        for g in s.grid:
            self.visit(g)
        self.push(list(s.block_vars) + list(s.thread_vars))
        self.visit(s.body)
        self.pop()


class _FragmentRules(LocatedVisitor):
    def __init__(self, gemm_fragments=()):
        self.parallel_vars: list = []  # stack of (vars, symbolic_extent, accesses dict)
        # fragments T.gemm lays out: every instruction layout spreads both dims over threads
        self.gemm_fragments = set(gemm_fragments)
        self.grow: dict = {}  # fragment -> {dim: extent of the loop indexing it}
        self.grow_loc: dict = {}
        self.fixed_shape: set = set()  # fragments whose shape an instruction relies on

    def visit_Gemm(self, s):
        self.fixed_shape.update(r.buffer for r in (s.A, s.B, s.C))
        self.generic(s)

    def visit_Reduce(self, s):
        self.fixed_shape.update((s.src, s.dst))
        self.generic(s)

    def visit_CumSum(self, s):
        self.fixed_shape.update((s.src, s.dst))
        self.generic(s)

    def visit_For(self, s):
        if s.kind != "parallel" or (self.parallel_vars and self.parallel_vars[-1]["open"]):
            if s.kind == "parallel":
                ctx = self.parallel_vars[-1]
                ctx["vars"].append(s.var)
                ctx["symbolic"] |= not isinstance(s.extent, ir.Const)
                ctx["extents"][id(s.var)] = _static_extent(s)
                self.visit(s.body)
                return
            if self.parallel_vars:
                self.parallel_vars[-1]["open"] = False
                self.parallel_vars[-1]["inner"].add(id(s.var))
            self.generic(s)
            if self.parallel_vars:
                self.parallel_vars[-1]["open"] = True
                self.parallel_vars[-1]["inner"].discard(id(s.var))
            return
        ctx = {"vars": [s.var], "symbolic": not isinstance(s.extent, ir.Const), "access": {},
               "open": True, "extents": {id(s.var): _static_extent(s)}, "inner": set()}
        self.parallel_vars.append(ctx)
        self.visit(s.body)
        self.parallel_vars.pop()

    def _access(self, buf, indices):
        if buf.scope == "local.fragment":
            if not self.parallel_vars:
                return  # any index: such a fragment is held whole by every thread
            ctx = self.parallel_vars[-1]
            if ctx["symbolic"]:
                _err(self.loc, ValueError,
                     f"fragment {buf.name} is indexed in a T.Parallel loop with a symbolic "
                     "extent; fragment loops need static extents")
            if buf in self.gemm_fragments:
                self._thread_distributed(buf, indices, ctx)
            for d, idx in enumerate(indices):
                extent = ctx["extents"].get(id(idx))
                if isinstance(extent, int) and isinstance(buf.shape[d], int) and \
                        extent > buf.shape[d]:
                    self.grow.setdefault(buf, {})
                    self.grow[buf][d] = max(self.grow[buf].get(d, 0), extent)
                    self.grow_loc.setdefault(buf, self.loc)
            prev = ctx["access"].get(buf)
            if prev is None:
                ctx["access"][buf] = indices
            elif not ir.structural_equal(tuple(prev), tuple(indices)):
                a = ", ".join(str(i) for i in prev)
                b = ", ".join(str(i) for i in indices)
                _err(self.loc, ValueError,
                     f"layout inference conflict in one T.Parallel loop: fragment {buf.name} "
                     f"is accessed as {buf.name}[{b}] and {buf.name}[{a}]; all accesses to a "
                     "fragment in one parallel loop must use the same indices")
        elif buf.scope == "local" and self.parallel_vars:
            pvars = set()
            for ctx in self.parallel_vars:
                pvars.update(ctx["vars"])
            for idx in indices:
                used = collect(idx, lambda n: isinstance(n, ir.Var))
                bad = [v for v in used if v in pvars]
                if bad:
                    _err(self.loc, ValueError,
                         f"Local buffer `{buf.name}` is indexed by T.Parallel loop variable "
                         f"`{bad[0].name}`: local buffers are private to each thread; use "
                         "T.alloc_fragment for per-element tiles")

    def _thread_distributed(self, buf, indices, ctx):
        """As the reference: a fragment an instruction spreads over the threads cannot be
        addressed by the variable of a loop inside the T.Parallel nest (each iteration would
        need elements other threads hold, a different one every trip)."""
        for idx in indices:
            inner = [v for v in collect(idx, lambda n: isinstance(n, ir.Var))
                     if id(v) in ctx["inner"]]
            if inner:
                _err(self.loc, ValueError,
                     f"thread-distributed fragment {buf.name}: T.gemm spreads its elements "
                     f"over the block's threads, so `{inner[0].name}`, the variable of a loop "
                     "inside this T.Parallel, cannot address them from one thread; use "
                     "T.reduce_sum / T.reduce_max for a reduction, index the fragment by the "
                     "T.Parallel variables, or T.copy it to a shared buffer and index that")

    def visit_Load(self, e):
        self._access(e.buffer, e.indices)
        for i in e.indices:
            self.visit(i)

    def visit_Store(self, s):
        self._access(s.buffer, s.indices)
        for i in s.indices:
            self.visit(i)
        self.visit(s.value)


def _static_extent(loop: ir.For):
    """The loop's trip count when it starts at a constant 0 and has a constant extent."""
    if isinstance(loop.extent, ir.Const) and isinstance(loop.start, ir.Const) and \
            loop.start.value == 0:
        return int(loop.extent.value)
    return None


def _grow_fragments(rules: _FragmentRules, kernels):
    """Give each fragment the extents the loops indexing it need (see the module docstring).
    Buffers are shared by reference in the IR, so the new shape reaches every use; tile-op
    regions keep the extents they were written with."""
    annotated = set()
    for k in kernels:
        annotated.update(v[0] for key, v in k.attrs if key == "layout")
    for buf, dims in rules.grow.items():
        if buf in rules.fixed_shape or buf in annotated:
            continue
        shape = list(buf.shape)
        for d, extent in dims.items():
            shape[d] = extent
        buf.shape = tuple(shape)


_SCOPE_WORDS = {"local.fragment": "fragment", "shared.dyn": "shared buffer",
                "shared": "shared buffer", "local": "local buffer", "local.var": "variable"}


class _StaticBounds(LocatedVisitor):
    """One walk records every access to a buffer of static shape with the loops around it
    and marks the loops whose bodies branch (an If, While, Break, Continue, Select, logical
    operator or if_then_else anywhere inside: not every iteration runs all of the body);
    `check` then bounds each access over the loops that remain."""

    def __init__(self):
        self.loops: list = []  # the enclosing loops: (For, var, (first, last) or None)
        self.branching: set = set()  # ids of the loops whose bodies branch
        self.accesses: list = []  # (buffer, indices, loc, the loops around it)
        self.analyzer = Analyzer()

    def visit_For(self, s):
        self.visit(s.start)
        self.visit(s.extent)
        first, n = ir.int_value(s.start), ir.int_value(s.extent)
        span = (first, first + (n - 1) * s.step) if first is not None and n is not None and \
            n > 0 else None
        self.loops.append((s, s.var, span))
        self.visit(s.body)
        self.loops.pop()

    def _branch(self, node):
        self.branching.update(id(loop) for loop, _, _ in self.loops)
        self.generic(node)

    visit_If = visit_While = visit_Break = visit_Continue = _branch
    visit_Select = visit_Logical = _branch

    def visit_Call(self, e):
        if e.op == "if_then_else":
            self.branching.update(id(loop) for loop, _, _ in self.loops)
        self.generic(e)

    def visit_Load(self, e):
        self._record(e.buffer, e.indices)
        self.generic(e)

    def visit_Store(self, s):
        self._record(s.buffer, s.indices)
        self.generic(s)

    def _record(self, buf, indices):
        if buf.scope != "global" and all(isinstance(n, int) for n in buf.shape):
            self.accesses.append((buf, indices, self.loc, tuple(self.loops)))

    def check(self):
        """Raise at the first recorded access that leaves its buffer."""
        for buf, indices, loc, loops in self.accesses:
            ranges = {var: span for loop, var, span in loops
                      if span is not None and id(loop) not in self.branching}
            for d, (index, size) in enumerate(zip(indices, buf.shape)):
                span = self._span(index, ranges)
                if span is None or (span[0] >= 0 and span[1] < size):
                    continue
                bad = span[0] if span[0] < 0 else span[1]
                used = {id(v) for v in collect(index, lambda n: isinstance(n, ir.Var))}
                named = ", ".join(f"{v.name} in [{a}, {b}]" for v, (a, b) in ranges.items()
                                  if id(v) in used)
                shown = ", ".join(str(i) for i in indices)
                _err(loc, IndexError,
                     f"{buf.name}[{shown}] reaches index {bad} of dimension {d}, outside the "
                     f"{size} elements of {_SCOPE_WORDS.get(buf.scope, buf.scope)} {buf.name} "
                     f"{list(buf.shape)}"
                     + (f" (with {named})" if named else ""))

    def _span(self, index, ranges):
        """(lowest, highest) value of an affine index over the loops' ranges, else None."""
        used = collect(index, lambda n: isinstance(n, ir.Var))
        if any(v not in ranges for v in used):
            return None
        lo = hi = 0
        rest = index
        for v in used:
            linear = self.analyzer.detect_linear(rest, v)
            if linear is None or not isinstance(linear[0], int):
                return None
            coef, rest = linear
            a, b = (coef * x for x in ranges[v])
            lo, hi = lo + min(a, b), hi + max(a, b)
        const = ir.int_value(rest)
        return None if const is None else (lo + const, hi + const)


def check_semantics(func: ir.PrimFunc) -> ir.PrimFunc:
    _Scopes(func.params).visit(func.body)
    gemms_and_kernels = collect_stmts(func.body, lambda n: isinstance(n, (ir.Gemm, ir.Kernel)))
    rules = _FragmentRules(r.buffer for g in gemms_and_kernels if isinstance(g, ir.Gemm)
                           for r in (g.A, g.B, g.C) if r.buffer.scope == "local.fragment")
    rules.visit(func.body)
    if rules.grow:
        _grow_fragments(rules, [k for k in gemms_and_kernels if isinstance(k, ir.Kernel)])
    bounds = _StaticBounds()
    bounds.visit(func.body)
    bounds.check()
    return func
