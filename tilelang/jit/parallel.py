"""Parallel compilation of many configurations: `.par_compile(configs)` of lazy-JIT functions and
of `@tilelang.jit` factories.

Tracing ("elaborating") runs in the calling thread, one config after another, because the
frontend's builder state is per thread and traces are cheap; compiling (CUDA code generation
and nvcc/NVRTC, or interpreter preparation) runs in a thread pool. Both phases show a tqdm
progress bar. Results come back in config order; with `ignore_error=True` a failing config
gives None (and a warning) instead of raising.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from concurrent.futures import ThreadPoolExecutor, as_completed


def split_config(cfg):
    """A config is a dict of keyword arguments or a tuple/list of positional arguments."""
    if isinstance(cfg, dict):
        return (), dict(cfg)
    if isinstance(cfg, (tuple, list)):
        return tuple(cfg), {}
    raise TypeError(f"a par_compile config must be a dict of arguments (or a tuple of "
                    f"positional arguments), got {type(cfg).__name__}")


def progress_bar_class():
    """The tqdm class for progress bars, or None without tqdm (a dependency, but a missing bar
    must not break compiling). The notebook bar only where it can draw: `tqdm.auto` picks it in
    any Jupyter kernel and, without ipywidgets, warns "IProgress not found" on every import
    before falling back to the text bar, which is what is used here in that case."""
    try:
        if importlib.util.find_spec("ipywidgets") is not None:
            from tqdm.auto import tqdm
        else:
            from tqdm.std import tqdm
    except ImportError:
        return None
    return tqdm


def _progress(iterable, desc, total):
    bar = progress_bar_class()
    return iterable if bar is None else bar(iterable, desc=desc, total=total)


def default_workers() -> int:
    return max(1, min(32, (os.cpu_count() or 1)))


def run_parallel(configs, elaborate, build, num_workers=None, ignore_error=False):
    """`elaborate(cfg)` each config in order, then `build(item)` all items in a pool."""
    configs = list(configs)
    items = []
    for cfg in _progress(configs, "Elaborating", len(configs)):
        try:
            items.append(elaborate(cfg))
        except Exception as exc:
            if not ignore_error:
                raise
            warnings.warn(f"par_compile: config {cfg!r} failed to elaborate: {exc}",
                          stacklevel=3)
            items.append(None)
    results = [None] * len(items)
    todo = [i for i, it in enumerate(items) if it is not None]
    if not todo:
        return results
    workers = num_workers if num_workers else min(default_workers(), len(todo))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(build, items[i]): i for i in todo}
        for fut in _progress(as_completed(futures), "Parallel Compiling", len(futures)):
            i = futures[fut]
            try:
                results[i] = fut.result()
            except Exception as exc:
                if not ignore_error:
                    for f in futures:
                        f.cancel()
                    raise
                warnings.warn(f"par_compile: config {configs[i]!r} failed to compile: {exc}",
                              stacklevel=3)
    return results


def par_compile_factory(factory, configs, num_workers=None, ignore_error=False):
    """`JITFactory.par_compile`: configs are dicts of the factory's keyword arguments (or
    tuples of positional ones); kernels land in the factory's cache like `factory(**cfg)`."""
    from .api import _freeze
    from .kernel import JITKernel

    def elaborate(cfg):
        args, kwargs = split_config(cfg)
        key = (_freeze(args), _freeze(kwargs))
        with factory._lock:
            kernel = factory._cache.get(key)
        if kernel is not None:
            return key, None, kernel
        return key, factory.get_tir(*args, **kwargs), None

    def build(item):
        key, prim, kernel = item
        if kernel is not None:
            return kernel
        kernel = JITKernel(prim, **factory.options)
        with factory._lock:
            return factory._cache.setdefault(key, kernel)

    return run_parallel(configs, elaborate, build, num_workers, ignore_error)


def par_compile(funcs, out_idx=None, execution_backend=None, target=None, target_host=None,
                verbose=None, pass_configs=None, compile_flags=None, num_workers=None,
                ignore_error=False) -> list:
    """`tilelang.par_compile(funcs, ...)`: compile PrimFuncs (e.g. from `fn.get_tir(...)`) in a
    thread pool with the options of `tilelang.compile`; the kernels in the order given (None
    for a failure when `ignore_error`)."""
    from .api import compile as compile_one

    options = dict(out_idx=out_idx, target=target or "auto", target_host=target_host,
                   execution_backend=execution_backend or "auto", verbose=bool(verbose),
                   pass_configs=pass_configs, compile_flags=compile_flags)
    return run_parallel(funcs, lambda func: func, lambda func: compile_one(func, **options),
                        num_workers, ignore_error)
