"""Bounds guards on global memory (SEMANTICS §2): loads that may leave the tensor read 0 (or
the `T.annotate_safe_value` value), stores and atomics that may leave it are skipped.

Expects: thread IR (element accesses with per-dimension indices on global buffers).
Guarantees: every global Load/Store/atomic whose indices the analyzer cannot prove inside
`[0, shape[d])` in every dimension is guarded per element; addresses taken for cp.async /
`T.call_extern` are left alone (their producers keep them in bounds).
"""

from __future__ import annotations

from ..ir import nodes as ir
from .analysis.scoped import ScopedMutator


class _Guard(ScopedMutator):
    def __init__(self, safe_values):
        super().__init__()
        self.safe = safe_values

    def condition(self, buf, indices):
        cond = None
        for i, n in zip(indices, buf.shape):
            for c in (ir.compare("ge", i, 0), ir.compare("lt", i, n)):
                if self.analyzer.prove(c):
                    continue
                c = self.analyzer.simplify(c)
                cond = c if cond is None else ir.logical_and(cond, c)
        return cond

    def visit_Load(self, e):
        e = self.generic(e)
        if e.buffer.scope != "global":
            return e
        cond = self.condition(e.buffer, e.indices)
        if cond is None:
            return e
        safe = self.safe.get(e.buffer, ir.const(0, e.dtype))
        return ir.Select(cond, e, ir.cast_to(safe, e.dtype), e.dtype)

    def visit_Store(self, s):
        value = self.visit(s.value)
        idx = tuple(self.visit(i) for i in s.indices)
        s2 = s if value is s.value and all(a is b for a, b in zip(idx, s.indices)) else \
            ir.Store(s.buffer, idx, value, loc=s.loc)
        if s.buffer.scope != "global":
            return s2
        cond = self.condition(s.buffer, idx)
        return s2 if cond is None else ir.If(cond, s2, None, loc=s.loc)

    def _atomic(self, c):
        rest = tuple(self.visit(a) for a in c.args[1:])
        if all(a is b for a, b in zip(rest, c.args[1:])):
            return c
        return ir.Call(c.op, (c.args[0],) + rest, c.dtype, c.attrs)

    def _atomic_condition(self, c):
        target = c.args[0]
        if target.buffer.scope != "global":
            return None
        return self.condition(target.buffer, target.indices)

    def visit_Call(self, c):
        if c.op in ("address_of", "access_ptr"):
            return c  # a pointer, not an access
        if _is_atomic(c):
            # an atomic whose result is used (return_prev, atomic_load): skipped out of
            # bounds, reading 0 like a load (a statement atomic is guarded by visit_Evaluate)
            out = self._atomic(c)
            cond = self._atomic_condition(c)
            if cond is None or c.dtype.name == "void":
                return out
            return ir.Select(cond, out, ir.const(0, c.dtype), c.dtype)
        return self.generic(c)

    def visit_Evaluate(self, s):
        c = s.value
        if not _is_atomic(c):
            value = self.visit(c)
            return s if value is c else ir.Evaluate(value, loc=s.loc)
        value = self._atomic(c)
        out = s if value is c else ir.Evaluate(value, loc=s.loc)
        cond = self._atomic_condition(c)
        return out if cond is None else ir.If(cond, out, None, loc=s.loc)


def _is_atomic(c) -> bool:
    return (isinstance(c, ir.Call) and c.op.startswith("atomic_") and bool(c.args)
            and isinstance(c.args[0], ir.Load))


def guard_global_accesses(kernel: ir.Kernel, ctx) -> ir.Kernel:
    from .pass_config import PassConfigKey

    if ctx.flag(PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS):
        return kernel  # the user promises every access is in bounds
    safe = {}
    for key, value in kernel.attrs:
        if key == "safe_value":
            safe[value[0]] = value[1]
    return _Guard(safe).visit(kernel)
