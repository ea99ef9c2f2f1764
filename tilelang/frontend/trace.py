"""Trace a kernel function into a `PrimFunc`.

`trace(func, args, kwargs, name, setup)` runs the rewritten `func` once under a fresh
`Builder` and returns it with the function's return value; `prim_func` is the `@T.prim_func`
decorator, which builds parameters from the signature's annotations. Exceptions escaping the
user's code are re-raised as located errors of the same builtin type.
"""

from __future__ import annotations

import inspect
from typing import Callable, Optional

from .annotations import decorator_scope, resolve_annotations
from ..errors import KernelError, located, user_facing
from ..ir import nodes as ir
from ..ir.dtype import DType
from .builder import Builder, loc_from_traceback, user_frames
from .rewrite import rewrite


def trace(func: Callable, args=(), kwargs=None, name: Optional[str] = None,
          setup: Optional[Callable] = None):
    """Run `func` under a builder; returns (builder, return value)."""
    rewritten = rewrite(func)
    b = Builder(name or func.__name__)
    with b:
        if setup is not None:
            setup(b)
        try:
            ret = rewritten(*args, **(kwargs or {}))
        except KernelError as err:
            # the message already points at the user's line; compiler frames are noise
            raise err.with_traceback(None) from None
        except RecursionError as exc:
            raise _recursion_error(exc).with_traceback(None) from None
        except Exception as exc:  # re-raise at the user's line, keeping the builtin type
            loc = loc_from_traceback(exc.__traceback__)
            if loc is None:
                raise
            msg = str(exc) or type(exc).__name__
            err = located(type(exc))(msg, loc)
            raise err.with_traceback(None) from None
    if len(b.frames) != 1:
        raise KernelError(f"internal: {len(b.frames) - 1} frame(s) left open after tracing "
                          f"{b.name}")
    return b, ret


def _recursion_error(exc: RecursionError):
    """Python's recursion limit reached while tracing: at the user's innermost line, naming
    the function that calls itself when the traceback shows one (a macro without a base case
    decided at trace time recurses until the limit)."""
    codes = user_frames(exc.__traceback__)
    loc = loc_from_traceback(exc.__traceback__)
    if not codes:
        return exc
    repeated = [c for c in dict.fromkeys(reversed(codes)) if codes.count(c) > 1]
    if repeated:
        msg = (f"`{repeated[0].co_name}` calls itself without end while the kernel is traced "
               f"(Python's recursion limit was reached after {len(codes)} nested calls): a "
               "recursive @T.macro needs a base case decided by a Python value, since kernel "
               "values are only known when the kernel runs")
    else:
        msg = ("Python's recursion limit was reached while tracing this line: the program "
               "nests calls too deeply")
    return located(RecursionError)(msg, loc)


@user_facing
def finish(b: Builder, func: Callable, name: Optional[str] = None) -> ir.PrimFunc:
    """Build and check the PrimFunc of a finished trace."""
    from ..transform.semantic_check import check_semantics

    body = b.frames[0].build()
    attrs = {k: v for k, v in b.attrs.items() if not k.endswith("_hook")}
    code = getattr(func, "__code__", None)
    source = (code.co_filename, code.co_firstlineno) if code is not None else None
    host = host_assumptions(b.params, body)
    if host:
        attrs["host_assumptions"] = host
    if b.outputs:  # the reference's record of the T.empty outputs, counted from the end
        position = {id(p): i for i, p in enumerate(b.params)}
        attrs["tilelang_out_idx"] = [position[id(o)] - len(b.params) for o in b.outputs]
    pf = ir.PrimFunc(name or func.__name__, b.params, body, attrs, b.outputs, b.workspaces,
                     source)
    check_semantics(pf)
    return pf


def host_assumptions(params, body) -> tuple:
    """The T.assume conditions the host checks at every call: those over the function's sizes
    and scalar arguments alone that every launch reaches (at function level, or at a kernel's
    top level, outside loops and branches). Each is kept once, in program order."""
    from ..ir.visitor import any_node, collect

    symbols = {p for p in params if isinstance(p, ir.Var)}
    for p in params:
        if isinstance(p, ir.Buffer):
            for d in tuple(p.shape) + tuple(p.strides or ()):
                if isinstance(d, ir.Expr):
                    symbols.update(collect(d, lambda n: isinstance(n, ir.Var)))
    found, seen = [], set()

    def host_evaluable(cond):
        return not any_node(cond, lambda n: isinstance(n, (ir.Load, ir.Call, ir.Buffer))) and \
            all(v in symbols for v in collect(cond, lambda n: isinstance(n, ir.Var)))

    def walk(s):
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                walk(x)
        elif isinstance(s, ir.Attr) and s.key == "assume":
            for cond in conjuncts(s.value):  # checked one by one: the message names the part
                if host_evaluable(cond) and str(cond) not in seen:
                    seen.add(str(cond))
                    found.append(cond)
            walk(s.body)
        elif isinstance(s, (ir.Kernel, ir.LetStmt, ir.Allocate, ir.Attr)):
            walk(s.body)

    walk(body)
    return tuple(found)


def conjuncts(cond) -> list:
    if isinstance(cond, ir.Logical) and cond.op == "and":
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def param_from_annotation(name: str, annotation):
    from ..language.types import HandleType, TensorSpec

    if isinstance(annotation, TensorSpec):
        return annotation.to_buffer(name)
    if isinstance(annotation, DType):
        return ir.Var(name, annotation)
    if isinstance(annotation, ir.Var):  # `n: T.int32()`
        return ir.Var(name, annotation.dtype)
    if isinstance(annotation, HandleType):
        return ir.Var(name, DType("handle"))
    if isinstance(annotation, str):
        try:
            return ir.Var(name, DType(annotation))
        except ValueError:
            pass
    if annotation in (int, float, bool):
        return ir.Var(name, DType(annotation))
    return None


def prim_func(func=None, *, private=False, check_well_formed=True, **_ignored):
    """Trace a kernel whose parameters are all annotated (T.Tensor, T.float32, T.handle, ...)."""
    scope = decorator_scope()
    if func is None:
        return lambda f: _trace_prim_func(f, scope)
    return _trace_prim_func(func, scope)


def _names_used(code) -> set:
    """The global and attribute names `code` and the functions nested in it use."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, type(code)):
            names |= _names_used(c)
    return names


def _lazy_style(func, hints) -> bool:
    """Whether `func` is written in the reference's lazy style: a parameter annotated by a
    statement in the body (`A: T.Tensor[...]`), or T.empty outputs returned."""
    import ast
    import textwrap

    code = getattr(func, "__code__", None)
    if code is not None and set(hints) >= set(inspect.signature(func).parameters) \
            and "empty" not in _names_used(code):
        return False  # every parameter annotated, no `.empty`: no need to parse the source
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):  # no source to read
        return False
    params = set(inspect.signature(func).parameters)
    unannotated = params - set(hints)
    body_annotated = returns = empty = False
    for node in ast.walk(tree.body[0]):
        if isinstance(node, ast.AnnAssign) and node.value is None and \
                isinstance(node.target, ast.Name) and node.target.id in unannotated:
            body_annotated = True
        elif isinstance(node, ast.Return) and node.value is not None:
            returns = True
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "empty":
            empty = True
    return body_annotated or (returns and empty)


def _trace_prim_func(func, scope: dict):
    if isinstance(func, ir.PrimFunc):
        return func
    hints = resolve_annotations(func, scope)
    sig = inspect.signature(func)
    if _lazy_style(func, hints):
        # the reference's lazy style in a prim_func: `A: T.Tensor[...]` statements in the
        # body, T.empty outputs returned; traced as the lazy JIT traces it, without arguments
        from ..jit.lazy import LazyJIT

        return LazyJIT(func, {}).get_tir()
    params = []
    for pname, p in sig.parameters.items():
        ann = hints.get(pname, inspect.Parameter.empty)
        code = func.__code__
        from ..errors import KernelError, SourceLoc
        try:
            value = param_from_annotation(pname, ann)
        except KernelError as err:
            if err.loc is None:  # e.g. an element type without storage: point at the def
                err.loc = SourceLoc(code.co_filename, code.co_firstlineno)
            raise err.with_traceback(None) from None
        if value is None:

            raise located(TypeError)(
                f"parameter {pname!r} of @T.prim_func {func.__name__} needs an annotation such "
                f"as T.Tensor((M, N), 'float16'), T.float32 or T.handle (got "
                f"{ann if ann is not inspect.Parameter.empty else 'none'})",
                SourceLoc(code.co_filename, code.co_firstlineno))
        params.append(value)

    def setup(b):
        b.params = list(params)

    b, _ = trace(func, params, name=func.__name__, setup=setup)
    return finish(b, func)
