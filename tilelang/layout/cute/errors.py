"""The error of the CuTe layout algebra: a precondition that does not hold (ranks that differ,
a non-injective layout, a dynamic size where a static one is needed).

It is a `KernelError` (so `tvm.error.InternalError`, the class of the reference's failed
checks, catches it) and a `ValueError`, located at the first frame outside this package: the
user's call that handed the algebra its bad operands."""

from __future__ import annotations

import os
import sys

from ...errors import SourceLoc, located

__all__ = ["LayoutAlgebraError", "check"]

LayoutAlgebraError = located(ValueError)

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _caller_loc():
    frame = sys._getframe(2)
    while frame is not None:
        if not os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR + os.sep):
            return SourceLoc(frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None


def check(condition, message: str) -> None:
    """Raise a located LayoutAlgebraError with `message` unless `condition` holds."""
    if not condition:
        raise LayoutAlgebraError(message, _caller_loc())


def fail(message: str):
    """Raise a located LayoutAlgebraError with `message`."""
    raise LayoutAlgebraError(message, _caller_loc())
