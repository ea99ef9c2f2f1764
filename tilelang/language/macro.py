"""`@T.macro`: functions inlined into the kernel at every call (at trace time).

A macro body is rewritten like a kernel body. Parameters annotated `T.Ref` receive a
reference to the caller's variable or buffer element: assigning to the parameter stores
through it. A variable returned by a macro comes back as its value (a snapshot). Recursion, several return values and macros passed as arguments are plain Python.
"""

from __future__ import annotations

import functools
import inspect

from ..frontend.annotations import decorator_scope, resolve_annotations
from ..frontend.builder import current_builder
from ..frontend.rewrite import rewrite
from ..ir import nodes as ir
from .indexing import Ref

# `T.Var` is the class of scalar variables (`isinstance(T.dynamic("m"), T.Var)`, as the
# reference's TVM Var); as a macro parameter annotation it means `T.Ref` (the reference's
# deprecated spelling)
Var = ir.Var


def _is_var(x) -> bool:
    return isinstance(x, ir.Buffer) and x.scope == "local.var"


def _value_of(result):
    """A macro returns values, as the reference's does: a variable (`return T.alloc_var(...)`)
    comes back as its value at the return, not as the variable itself."""
    if not _is_var(result):
        return result
    return current_builder().let(result.name, ir.Load(result, (ir.const(0),), result.dtype))


class Macro:
    def __init__(self, func, scope=None):
        self.func = func
        self._scope = scope  # the decorating frame's locals, for string annotations
        self._rewritten = None
        self._ref_params = None
        functools.update_wrapper(self, func)

    def _prepare(self):
        if self._rewritten is None:
            self._rewritten = rewrite(self.func)
            sig = inspect.signature(self.func)
            hints = resolve_annotations(self.func, self._scope)
            self._signature = sig
            self._ref_params = {name for name, ann in hints.items() if ann is Ref or ann is Var}
        return self._rewritten

    def __call__(self, *args, **kwargs):
        fn = self._prepare()
        if self._ref_params or any(_is_var(a) for a in (*args, *kwargs.values())):
            bound = self._signature.bind(*args, **kwargs)
            for name, value in bound.arguments.items():
                if name in self._ref_params:
                    bound.arguments[name] = Ref.make(value, f"parameter {name!r}")
                elif _is_var(value):
                    # a plain parameter is a value (SEMANTICS §14): the macro gets the
                    # variable's current value, so rebinding it leaves the caller's alone
                    bound.arguments[name] = current_builder().let(
                        name, ir.Load(value, (ir.const(0),), value.dtype))
            args, kwargs = bound.args, bound.kwargs
        result = fn(*args, **kwargs)
        if isinstance(result, tuple):
            return tuple(_value_of(r) for r in result)
        return _value_of(result)

    def __repr__(self):
        return f"<T.macro {self.func.__qualname__}>"


def macro(func=None, *, hygienic=True):
    """Decorate a function whose body is inlined into kernels at each call."""
    scope = decorator_scope()
    if func is None:
        return lambda f: Macro(f, scope)
    return Macro(func, scope)
