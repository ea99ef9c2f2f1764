"""Buffer scopes as the passes ask about them (ir.SCOPES lists them all)."""

from __future__ import annotations

from ...ir import nodes as ir

SHARED = ("shared", "shared.dyn")  # the block's shared memory (plan_shared: one arena)
THREAD_PRIVATE = ("local", "local.var")  # a thread's own registers, not a fragment
MEMORY = ("global",) + SHARED  # addressable memory (vector loads and stores)


def is_global_to_shared(s: ir.Copy) -> bool:
    """A `T.copy` from global memory into a shared tile (cp.async, TMA, a pipeline stage)."""
    return s.src.buffer.scope == "global" and s.dst.buffer.scope in SHARED
