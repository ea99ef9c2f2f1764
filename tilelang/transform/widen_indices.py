"""64-bit index arithmetic for tensors whose element offsets do not fit in int32.

Expects: thread IR (after partitioning, before bounds guards). Guarantees: every access to a
global buffer of 2^31 or more elements (static shape), or whose shape uses 64-bit sizes, has
indices computed in int64 from their leaves up (variables and constants are widened before
any multiplication), so neither the address nor the bounds guard derived from it overflows
(SEMANTICS §10: index dtype follows the extents).
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import Mutator
from .analysis.indices import Widen, needs_int64


class _Indices(Mutator):
    def __init__(self, all_global=False):
        self.all_global = all_global

    def _wide(self, b):
        return needs_int64(b) or (self.all_global and b.scope == "global")

    def visit_Load(self, e):
        e = self.generic(e)
        if self._wide(e.buffer):
            return ir.Load(e.buffer, tuple(Widen().visit(i) for i in e.indices), e.dtype)
        return e

    def visit_Store(self, s):
        s = self.generic(s)
        if self._wide(s.buffer):
            return ir.Store(s.buffer, tuple(Widen().visit(i) for i in s.indices), s.value,
                            loc=s.loc)
        return s


def widen_indices(kernel: ir.Kernel, ctx) -> ir.Kernel:
    from .pass_config import PassConfigKey

    bits = ctx.configs.get(PassConfigKey.TL_CONFIG_INDEX_BITWIDTH.value)
    return _Indices(all_global=bits is not None and int(bits) == 64).visit(kernel)
