"""JIT phase diagnostics: with `TILELANG_JIT_DIAGNOSTICS=1` (or `verbose=True`) each phase of
building a kernel logs its start, its end with the time it took, or its failure, with context
(kernel name, target, ...), on the logger "tilelang.jit.diagnostics":

    TileLang JIT phase start: lower kernel='main', target='cuda -arch=sm_90a'
    TileLang JIT phase done: lower elapsed=0.041s kernel='main', target='cuda -arch=sm_90a'

Phases here: "lower" (the passes and code generation), "compile" (NVRTC/nvcc) and "adapter"
(the CPU interpreter's program). `jit_phase` is the reference's context manager; a failure is
logged with its traceback and re-raised unchanged.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from typing import Iterator, Optional

logger = logging.getLogger("tilelang.jit.diagnostics")


def diagnostics_enabled(*, verbose: bool = False) -> bool:
    from ..env import env

    return bool(verbose) or env.is_jit_diagnostics_enabled()


def _format_context(context: dict) -> str:
    if not context:
        return ""
    return " " + ", ".join(f"{key}={value!r}" for key, value in sorted(context.items()))


@contextmanager
def jit_phase(name: str, *, enabled: Optional[bool] = None, verbose: bool = False,
              **context) -> Iterator[None]:
    """Log the start, the end (with the elapsed time) or the failure of one JIT phase."""
    if enabled is None:
        enabled = diagnostics_enabled(verbose=verbose)
    if not enabled:
        yield
        return
    text = _format_context(context)
    start = time.monotonic()
    logger.info("TileLang JIT phase start: %s%s", name, text)
    try:
        yield
    except Exception:
        logger.exception("TileLang JIT phase failed: %s elapsed=%.3fs%s", name,
                         time.monotonic() - start, text)
        raise
    logger.info("TileLang JIT phase done: %s elapsed=%.3fs%s", name, time.monotonic() - start,
                text)
