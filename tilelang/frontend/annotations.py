"""Parameter annotations of kernel functions, also under `from __future__ import annotations`.

With postponed evaluation every annotation is a string such as "T.Tensor((M, K), dtype)".
`inspect.get_annotations(eval_str=True)` evaluates it in the function's module globals only,
but kernel factories name their shapes in enclosing scopes (`def matmul(M, N, K): ...
@T.prim_func def main(A: T.Tensor((M, K), ...))`), and a name used only in an annotation is not
even a closure cell of the kernel. So the strings are evaluated in the globals, then the closure
cells, then the locals of the frame that applied the decorator (a snapshot taken then).

`resolve_annotations(func, scope)` returns {name: value}; an annotation that still cannot be
evaluated stays a string, so callers report it with their own located error.
"""

from __future__ import annotations

import sys


def decorator_scope(depth: int = 1) -> dict:
    """A snapshot of the locals of the frame `depth` levels above the caller (the frame whose
    code applied the decorator)."""
    try:
        return dict(sys._getframe(depth + 1).f_locals)
    except ValueError:  # not that many frames
        return {}


def _closure_vars(func) -> dict:
    cells = getattr(func, "__closure__", None) or ()
    out = {}
    for name, cell in zip(func.__code__.co_freevars, cells):
        try:
            out[name] = cell.cell_contents
        except ValueError:  # an empty cell: the name is not bound yet
            pass
    return out


def _is_text(ann) -> bool:
    """An annotation still in source form; a dtype (`x: T.int32`) is a `str` too, but final."""
    from ..ir.dtype import DType

    return isinstance(ann, str) and not isinstance(ann, DType)


def resolve_annotations(func, scope: dict | None = None) -> dict:
    raw = dict(getattr(func, "__annotations__", None) or {})
    if not any(_is_text(a) for a in raw.values()):
        return raw
    env = dict(scope or {})
    env.update(_closure_vars(func))
    globals_ = getattr(func, "__globals__", {})
    out = {}
    for name, ann in raw.items():
        if _is_text(ann):
            try:
                ann = eval(ann, globals_, env)  # noqa: S307 - the user's own annotation text
            except Exception:  # noqa: BLE001 - left as text; the caller names the parameter
                pass
        out[name] = ann
    return out
