"""The reference's public simplify helpers (`tilelang.transform.simplify`), for programs that
wrap their PrimFuncs in them. Not a pass: every index is simplified while lowering anyway (the
`simplify` step of engine/pipeline.py). What a caller can observe is the signature: like the
reference's Simplify(simplify_arguments=True), the helpers drop the buffer parameters the body
never uses (a `with_bias=False` variant's Bias), so the kernel takes only the others; scalar
parameters and `T.empty` outputs stay."""

from __future__ import annotations

import functools

from ..ir.nodes import Buffer, PrimFunc
from ..ir.visitor import collect

__all__ = ["apply_simplify", "simplify_prim_func"]


def _without_unused_buffers(func: PrimFunc) -> PrimFunc:
    # by identity: `==` on buffers builds a kernel expression
    named = collect(func.body, lambda n: isinstance(n, Buffer))
    kept = {id(b) for b in named} | {id(b.view_of) for b in named if b.view_of is not None} \
        | {id(b) for b in func.outputs}
    params = tuple(p for p in func.params if not isinstance(p, Buffer) or id(p) in kept)
    return func if len(params) == len(func.params) else func.with_body(func.body, params=params)


def apply_simplify(stmt, inline_let: bool = False):
    """`stmt` (a PrimFunc, `@T.prim_func`) without the buffer parameters its body never uses
    (lowering simplifies the rest, inlining lets included, whatever `inline_let` says)."""
    if not isinstance(stmt, PrimFunc):
        raise TypeError(f"apply_simplify takes a PrimFunc (@T.prim_func), got "
                        f"{type(stmt).__name__}")
    return _without_unused_buffers(stmt)


def simplify_prim_func(func):
    """Decorate a function that returns a PrimFunc: `apply_simplify` of its result."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        out = func(*args, **kwargs)
        if not isinstance(out, PrimFunc):
            raise TypeError(f"@simplify_prim_func: {func.__qualname__} returned "
                            f"{type(out).__name__}, not a PrimFunc (@T.prim_func)")
        return _without_unused_buffers(out)
    return wrapper
