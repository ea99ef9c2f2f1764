"""`tilelang.utils.language`: tests of a buffer's memory scope (the reference's helpers)."""

from __future__ import annotations


def _scope(buffer) -> str:
    scope = getattr(buffer, "scope", None)
    if callable(scope):
        scope = scope()
    if not isinstance(scope, str):
        raise TypeError(f"expected a buffer, got {buffer!r}")
    return scope


def is_global(buffer) -> bool:
    """Whether `buffer` lives in global memory (a kernel parameter or `T.alloc_global`)."""
    return _scope(buffer) == "global"


def is_shared(buffer, allow_dynamic: bool = True) -> bool:
    """Whether `buffer` is in shared memory (`T.alloc_shared`); with `allow_dynamic=False`,
    only static shared memory counts."""
    scope = _scope(buffer)
    return scope == "shared" or (allow_dynamic and scope == "shared.dyn")


def is_shared_dynamic(buffer) -> bool:
    """Whether `buffer` is in dynamic shared memory."""
    return _scope(buffer) == "shared.dyn"


def is_local(buffer) -> bool:
    """Whether `buffer` is a per-thread local array (`T.alloc_local`)."""
    return _scope(buffer) == "local"


def is_local_var(buffer) -> bool:
    """Whether `buffer` is a per-thread scalar (`T.alloc_var`)."""
    return _scope(buffer) == "local.var"


def is_fragment(buffer) -> bool:
    """Whether `buffer` is a register fragment (`T.alloc_fragment`)."""
    return _scope(buffer) == "local.fragment"
