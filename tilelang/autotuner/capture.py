"""`set_autotune_inputs(...)`: tune on the caller's tensors instead of generated ones.

    with tilelang.autotuner.set_autotune_inputs([a, b]):
        kernel = matmul(M, N, K)        # an @autotune factory

Inside the block the autotuner feeds these tensors (in parameter order, outputs excluded) to
every configuration (scalars too, for kernels with scalar parameters). As in the reference, a
tuning on given inputs is not cached on disk (the inputs' values are not part of any key).
Thread-local.
"""

from __future__ import annotations

import threading
from typing import Optional

_state = threading.local()


class AutotuneInputsCapture:
    """Context manager installing the inputs; nests (the innermost wins)."""

    def __init__(self, tensors):
        self.tensors = list(tensors)
        self._previous = None

    def __enter__(self):
        self._previous = getattr(_state, "inputs", None)
        _state.inputs = self.tensors
        return self

    def __exit__(self, *exc):
        _state.inputs = self._previous
        return False


def set_autotune_inputs(*args) -> AutotuneInputsCapture:
    """`set_autotune_inputs(a, b)` or `set_autotune_inputs([a, b])`."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return AutotuneInputsCapture(args[0])
    return AutotuneInputsCapture(args)


def get_autotune_inputs() -> Optional[list]:
    return getattr(_state, "inputs", None)
