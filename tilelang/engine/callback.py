"""Post-processing hooks on generated code: `register_cuda_postproc_callback`.

A registered CUDA callback receives the complete generated source (`str`) and the compilation
target, and returns the source to compile instead; it runs on every CUDA build, after code
generation and before NVRTC/nvcc. The compiled-kernel cache is keyed by the source it compiles,
so a callback that changes the code never reuses a kernel built without it (and removing the
callback never reuses one built with it).

    @register_cuda_postproc_callback
    def patch(code, target):
        return code.replace("...", "...")

The HIP, C-host and Metal variants of the reference exist for programs that register them;
their callbacks are stored but never called (this compiler has no such backends).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["register_cuda_postproc", "register_hip_postproc", "register_c_postproc",
           "register_metal_postproc", "register_cuda_postproc_callback",
           "register_hip_postproc_callback", "register_c_postproc_callback",
           "register_metal_postproc_callback", "unregister_postproc", "get_postproc",
           "apply_postproc"]

_REGISTRY: dict[str, Callable] = {}


def _register(kind: str, func: Callable, override: bool) -> None:
    if not callable(func):
        raise TypeError(f"a {kind} post-processing callback must be callable, got {func!r}")
    if not override and kind in _REGISTRY:
        raise ValueError(f"a {kind} post-processing callback is already registered "
                         f"({_REGISTRY[kind]!r}); pass override=True to replace it")
    _REGISTRY[kind] = func


def register_cuda_postproc(func: Callable, override: bool = True) -> None:
    """Register `func(code, target) -> code`, applied to all generated CUDA source."""
    _register("cuda", func, override)


def register_hip_postproc(func: Callable, override: bool = True) -> None:
    _register("hip", func, override)


def register_c_postproc(func: Callable, override: bool = True) -> None:
    _register("c", func, override)


def register_metal_postproc(func: Callable, override: bool = True) -> None:
    _register("metal", func, override)


def unregister_postproc(kind: str = "cuda") -> None:
    """Remove the callback of `kind` ("cuda", "hip", "c", "metal"), if any."""
    _REGISTRY.pop(kind, None)


def get_postproc(kind: str = "cuda"):
    """The registered callback of `kind`, or None."""
    return _REGISTRY.get(kind)


def apply_postproc(kind: str, code: str, target) -> str:
    """`code` after the registered callback of `kind` (unchanged without one)."""
    func = _REGISTRY.get(kind)
    if func is None:
        return code
    out = func(code, target)
    if not isinstance(out, str):
        raise TypeError(f"the {kind} post-processing callback {func!r} returned "
                        f"{type(out).__name__}, not the source text (str)")
    return out


def _decorator(register):
    def decorator(func=None, override: bool = True):
        if callable(func):
            register(func, override)
            return func
        if func is None or isinstance(func, bool):
            flag = func if isinstance(func, bool) else override

            def wrap(fn):
                register(fn, flag)
                return fn
            return wrap
        raise TypeError("use @register_..._postproc_callback, @register_..._postproc_callback()"
                        " or @register_..._postproc_callback(override=False)")
    decorator.__doc__ = (f"Decorator form of `{register.__name__}`: with or without "
                         "parentheses, optionally `(override=False)`.")
    return decorator


register_cuda_postproc_callback = _decorator(register_cuda_postproc)
register_hip_postproc_callback = _decorator(register_hip_postproc)
register_c_postproc_callback = _decorator(register_c_postproc)
register_metal_postproc_callback = _decorator(register_metal_postproc)
