"""`tilelang.cache`: the reference's cache entry points, delegating to the real caches.

`clear_cache()` empties the compiled-kernel cache (`tilelang.runtime.cache`, when the CUDA
runtime is installed) and the autotuner's stored results, on disk and in this process.
`cached(func, out_idx, ...)` compiles through the caches (same as `tilelang.compile`).
"""

from __future__ import annotations

import importlib

__all__ = ["cached", "clear_cache"]


def _runtime_cache():
    try:
        return importlib.import_module("tilelang.runtime.cache")
    except ImportError:
        return None


def clear_cache() -> None:
    """Delete compiled kernels and autotuning results (disk and memory)."""
    runtime = _runtime_cache()
    if runtime is not None:
        for name in ("clear_cache", "clear"):
            fn = getattr(runtime, name, None)
            if callable(fn):
                fn()
                break
    from ..autotuner import clear_autotune_cache

    clear_autotune_cache()


def cached(func, out_idx=None, *args, target="auto", target_host=None,
           execution_backend="auto", verbose=False, pass_configs=None, **kwargs):
    """Compile `func` (a prim_func), reusing cached builds: `tilelang.compile` with these
    options (extra positional arguments of the reference's signature are ignored)."""
    from ..jit.api import compile as tl_compile

    return tl_compile(func, out_idx=out_idx, target=target, target_host=target_host,
                      execution_backend=execution_backend, verbose=verbose,
                      pass_configs=pass_configs, **kwargs)
