"""`tvm.script.ir_builder.base.IRBuilderFrame`: what `isinstance(x, IRBuilderFrame)` tells a
reference program.

In the reference, the constructs that open a scope of the kernel being built (`T.Kernel(...)`,
`T.Parallel`, `T.Pipelined`, `T.serial` / `T.unroll` / `T.vectorized` / `T.grid` loops of
step 1) are IR-builder frames; a `T.serial` with another step (or a symbolic one) is a plain
Python iterator instead. The same objects here are instances of this class (registered by
tilelang/language/loops.py and kernel.py); nothing else is.
"""

from __future__ import annotations

import abc

__all__ = ["IRBuilderFrame"]


class IRBuilderFrame(abc.ABC):  # noqa: B024 - a marker: classes are registered, not derived
    """The class of scope-opening kernel constructs (see the module docstring)."""


def _register_frames():
    from ....language import kernel, loops

    for cls in (kernel.Kernel, loops._Serial, loops._Unroll, loops._Vectorized,
                loops._Parallel, loops._Pipelined, loops._ThreadBinding, loops._Persistent):
        IRBuilderFrame.register(cls)


_register_frames()
