"""Work measured in function calls instead of seconds, for tests that guard speed.

A wall-clock bound in a test fails on a loaded machine and passes on a fast one whatever the
code does. The number of Python function calls a piece of work makes is the same on every
machine and at every load (for the same code, Python and library versions), and the usual
speed regressions (a lost cache, a loop over threads that used to be vectorised, a quadratic
rewrite) multiply it. Tests bound that number; benchmarks measure the time.

`count_calls(fn, *args, **kwargs)` runs `fn` once under `sys.setprofile` and returns
`(result, Calls)`: `python` counts Python-level function calls (frames), `builtin` calls of
C functions. Only the calling thread is counted. Run the work once before counting it, so
that one-time initialisation (imports, caches filled on first use) is not counted.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

__all__ = ["Calls", "count_calls"]


@dataclass
class Calls:
    python: int = 0
    builtin: int = 0

    def __str__(self):
        return f"{self.python} Python calls, {self.builtin} builtin calls"


def count_calls(fn, *args, **kwargs):
    counts = Calls()

    def profile(frame, event, arg):
        if event == "call":
            counts.python += 1
        elif event == "c_call":
            counts.builtin += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        result = fn(*args, **kwargs)
    finally:
        sys.setprofile(previous)
    # the profiler sees its own sys.setprofile call on the way out
    counts.builtin = max(0, counts.builtin - 1)
    return result, counts
