"""Rewrite a kernel function's AST so that its control flow and assignments call the builder.

The rewritten function is ordinary Python that runs once per trace. Constructs whose meaning
depends on whether a value is symbolic are routed through the helpers in `frontend.hooks`
(bound to the name `__tl__` inside the rewritten code):

    if c: A else: B           with __tl__.If(c, True) as br:  if br.then(): A; br.end()
                                                              if br.otherwise(): B; br.end()
    for i, j in it: ...       for i, j in __tl__.loop(it, ('i', 'j')): ...   (range -> serial)
    while c: ...              for _ in __tl__.while_(lambda: c): ...
    break / continue          if __tl__.brk(): break / if __tl__.cont(): continue
    x = v                     x = __tl__.bind('x', v, <previous x>)
    a, b = v                  a, b = __tl__.unpack(v, ('a', 'b')); a = __tl__.bind(...) ...
    x += v                    x = __tl__.aug('x', <previous x>, '+', v)
    x: ann = v / x: ann       x = __tl__.bind_annotated(...) / x = __tl__.annotate(...)
    a and b, a or b, not a    __tl__.and_(a, lambda: b), __tl__.or_(...), __tl__.not_(a)
    a < b < c                 __tl__.and_(a < b, lambda: b < c)
    x if c else y             __tl__.ifexp(c, lambda: x, lambda: y)
    f(...)  (a statement)     __tl__.discard(f(...))   (side-effecting calls are kept)
    assert c, m               __tl__.assert_(c, m)
    with K as (bx, by)        with __tl__.named(K, ('bx', 'by')) as (bx, by)
    return v                  return __tl__.return_(<frame depth on entry>, v)

Line numbers and the file name are the user's, so tracebacks and IR locations point at the
kernel source. Closure variables are passed to a maker function that re-creates the closure.

The compiled maker is kept per process and, like Python's own bytecode cache, on disk (the
kernel cache directory, `<key>.code`): a new process skips reading, parsing and rewriting the
source. The disk key is the function's code object (bytecode, constants, names, positions),
its file's size and modification time, the Python version and tilelang's own files.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import marshal
import os
import sys
import textwrap
import warnings
from typing import Callable

from .builder import USER_CODES

HOOKS = "__tl__"
DEPTH = "__tl_depth"  # the builder's frame depth when the (rewritten) function was entered

_AUG_OPS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<",
    ast.RShift: ">>", ast.MatMult: "@",
}
_SCALAR_CMP = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)


def _hook(attr: str) -> ast.expr:
    return ast.Attribute(value=ast.Name(id=HOOKS, ctx=ast.Load()), attr=attr, ctx=ast.Load())


def _call(attr: str, *args) -> ast.Call:
    return ast.Call(func=_hook(attr), args=list(args), keywords=[])


def _const(v) -> ast.Constant:
    return ast.Constant(value=v)


def _names_of(target) -> ast.expr:
    if isinstance(target, ast.Name):
        return _const(target.id)
    if isinstance(target, (ast.Tuple, ast.List)):
        return ast.Tuple(elts=[_names_of(e) for e in target.elts], ctx=ast.Load())
    return _const(None)


def _previous(name: str) -> ast.expr:
    # locals().get(name, __tl__.UNSET)
    return ast.Call(
        func=ast.Attribute(value=ast.Call(func=ast.Name(id="locals", ctx=ast.Load()), args=[],
                                          keywords=[]), attr="get", ctx=ast.Load()),
        args=[_const(name), _hook("UNSET")], keywords=[])


def _lambda(body: ast.expr) -> ast.Lambda:
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                         kw_defaults=[], kwarg=None, defaults=[]), body=body)


class _Rewriter(ast.NodeTransformer):
    def __init__(self):
        self.counter = 0

    def _tmp(self, base: str) -> str:
        self.counter += 1
        return f"__tl_{base}{self.counter}"

    # ---- functions --------------------------------------------------------------------------
    def visit_FunctionDef(self, node):
        # `return` may not leave a kernel frame, loop or branch this function opened: the depth
        # of the builder's frame stack on entry is what a `return` is checked against
        self.generic_visit(node)
        entry = ast.Assign(targets=[ast.Name(id=DEPTH, ctx=ast.Store())],
                           value=_call("frame_depth"))
        ast.copy_location(entry, node.body[0])
        first = node.body[0]
        is_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
        node.body.insert(1 if is_doc else 0, entry)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Return(self, node: ast.Return):
        self.generic_visit(node)
        node.value = ast.copy_location(
            _call("return_", ast.Name(id=DEPTH, ctx=ast.Load()),
                  node.value if node.value is not None else _const(None)), node)
        return node

    # ---- statements -------------------------------------------------------------------------
    def visit_If(self, node: ast.If):
        self.generic_visit(node)
        br = self._tmp("if")

        def method(attr):
            return ast.Call(func=ast.Attribute(value=ast.Name(id=br, ctx=ast.Load()),
                                               attr=attr, ctx=ast.Load()), args=[], keywords=[])

        # `br.end()` closes each branch: a branch left by a Python-level break/continue/return
        # never reaches it, which `If.__exit__` reports for kernel conditions
        then = ast.If(test=method("then"), body=node.body + [ast.Expr(value=method("end"))],
                      orelse=[])
        body = [then]
        if node.orelse:
            body.append(ast.If(test=method("otherwise"),
                               body=node.orelse + [ast.Expr(value=method("end"))], orelse=[]))
        new = ast.With(items=[ast.withitem(context_expr=_call("If", node.test, _const(True)),
                                           optional_vars=ast.Name(id=br, ctx=ast.Store()))],
                       body=body)
        return ast.copy_location(new, node)

    def visit_For(self, node: ast.For):
        self.generic_visit(node)
        it = node.iter
        if (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and it.func.id == "range"):
            it = ast.copy_location(ast.Call(func=_hook("range_"), args=it.args,
                                            keywords=it.keywords), it)
        node.iter = ast.copy_location(_call("loop", it, _names_of(node.target)), node.iter)
        return node

    def visit_While(self, node: ast.While):
        self.generic_visit(node)
        new = ast.For(target=ast.Name(id=self._tmp("w"), ctx=ast.Store()),
                      iter=_call("while_", _lambda(node.test)), body=node.body,
                      orelse=node.orelse)
        return ast.copy_location(new, node)

    def visit_Break(self, node):
        return ast.copy_location(ast.If(test=_call("brk"), body=[node], orelse=[]), node)

    def visit_Continue(self, node):
        return ast.copy_location(ast.If(test=_call("cont"), body=[node], orelse=[]), node)

    def visit_Assign(self, node: ast.Assign):
        self.generic_visit(node)
        if len(node.targets) != 1:
            return node
        target = node.targets[0]
        if isinstance(target, ast.Name):
            node.value = ast.copy_location(
                _call("bind", _const(target.id), node.value, _previous(target.id)), node.value)
            return node
        if isinstance(target, (ast.Tuple, ast.List)) and all(
                isinstance(e, (ast.Name, ast.Subscript, ast.Attribute)) for e in target.elts):
            names = [e.id for e in target.elts if isinstance(e, ast.Name)]
            out = [node]
            node.value = ast.copy_location(
                _call("unpack", node.value, _names_of(target), _const(len(target.elts))),
                node.value)
            if not names:
                return node
            # capture previous values before the unpacking assignment overwrites them
            prev_tmp = {n: self._tmp("prev") for n in names}
            pre = [ast.copy_location(ast.Assign(targets=[ast.Name(id=t, ctx=ast.Store())],
                                                value=_previous(n)), node)
                   for n, t in prev_tmp.items()]
            post = [ast.copy_location(ast.Assign(
                targets=[ast.Name(id=n, ctx=ast.Store())],
                value=_call("bind", _const(n), ast.Name(id=n, ctx=ast.Load()),
                            ast.Name(id=t, ctx=ast.Load()))), node)
                for n, t in prev_tmp.items()]
            return pre + out + post
        return node

    def visit_AugAssign(self, node: ast.AugAssign):
        self.generic_visit(node)
        if not isinstance(node.target, ast.Name):
            return node
        name = node.target.id
        new = ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())],
                         value=_call("aug", _const(name), _previous(name),
                                     _const(_AUG_OPS[type(node.op)]), node.value))
        return ast.copy_location(new, node)

    def visit_AnnAssign(self, node: ast.AnnAssign):
        self.generic_visit(node)
        if not isinstance(node.target, ast.Name):
            return node
        name = node.target.id
        if node.value is None:
            value = _call("annotate", _const(name), _previous(name), node.annotation)
        else:
            value = _call("bind_annotated", _const(name), node.value, node.annotation,
                          _previous(name))
        return ast.copy_location(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())],
                                            value=value), node)

    def visit_Assert(self, node: ast.Assert):
        self.generic_visit(node)
        args = [node.test] + ([node.msg] if node.msg is not None else [])
        return ast.copy_location(ast.Expr(value=_call("assert_", *args)), node)

    def visit_With(self, node: ast.With):
        self.generic_visit(node)
        for item in node.items:
            if item.optional_vars is not None:
                item.context_expr = ast.copy_location(
                    _call("named", item.context_expr, _names_of(item.optional_vars)),
                    item.context_expr)
        return node

    def visit_Expr(self, node: ast.Expr):
        self.generic_visit(node)
        if isinstance(node.value, ast.Constant):  # docstrings
            return node
        node.value = ast.copy_location(_call("discard", node.value), node.value)
        return node

    # ---- expressions ------------------------------------------------------------------------
    def visit_BoolOp(self, node: ast.BoolOp):
        self.generic_visit(node)
        fn = "and_" if isinstance(node.op, ast.And) else "or_"
        first, *rest = node.values
        return ast.copy_location(_call(fn, first, *[_lambda(v) for v in rest]), node)

    def visit_UnaryOp(self, node: ast.UnaryOp):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call("not_", node.operand), node)
        return node

    def visit_Compare(self, node: ast.Compare):
        self.generic_visit(node)
        if len(node.ops) == 1 or not all(isinstance(op, _SCALAR_CMP) for op in node.ops):
            return node
        parts, left = [], node.left
        for op, right in zip(node.ops, node.comparators):
            parts.append(ast.copy_location(ast.Compare(left=left, ops=[op], comparators=[right]),
                                           node))
            left = right
        return ast.copy_location(_call("and_", parts[0], *[_lambda(p) for p in parts[1:]]),
                                 node)

    def visit_IfExp(self, node: ast.IfExp):
        self.generic_visit(node)
        return ast.copy_location(_call("ifexp", node.test, _lambda(node.body),
                                       _lambda(node.orelse)), node)


_CACHE: dict = {}


def _register_codes(code):
    USER_CODES.add(code)
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            _register_codes(c)


def _strip_signature(fn: ast.FunctionDef):
    """Defaults and annotations are taken from the original function object instead."""
    a = fn.args
    a.defaults = []
    a.kw_defaults = [None] * len(a.kwonlyargs)
    for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
        if arg is not None:
            arg.annotation = None
    fn.returns = None
    fn.decorator_list = []


def _warn_at(code, message: str):
    """A warning attributed to the user's function definition, not to the compiler."""
    warnings.warn_explicit(message, UserWarning, code.co_filename, code.co_firstlineno)


def _build_maker(func: Callable):
    code = func.__code__
    # code objects compare by value, not by file: equal functions of two files are two entries
    key = (code.co_filename, code)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    disk_key = _disk_key(code)
    if disk_key is not None:
        cached = _load_maker(disk_key)
        if cached is not None:
            _register_codes(cached[0])
            _CACHE[key] = cached
            return cached
    built = _rewrite_source(func)
    if built is not None and disk_key is not None:
        _store_maker(disk_key, built)
    _CACHE[key] = built
    return built


def _disk_key(code):
    """The disk cache key of the maker of `code`, or None (no file, caching off)."""
    from ..env import env

    if not env.cache_enabled:
        return None
    try:
        st = os.stat(code.co_filename)
    except (OSError, ValueError):
        return None
    from ..runtime.cache import package_stamp

    h = hashlib.sha256()
    _digest_code(h, code)
    h.update(f"\0{code.co_filename}\0{st.st_size}\0{st.st_mtime_ns}\0{sys.version}\0"
             f"{package_stamp()}".encode())
    return h.hexdigest()


def _digest_code(h, code):
    """Feed what defines `code` into `h`. (Not `marshal.dumps(code)`: its bytes depend on
    reference counts, so they differ between processes.)"""
    for attr in ("co_name", "co_qualname", "co_firstlineno", "co_argcount",
                 "co_posonlyargcount", "co_kwonlyargcount", "co_flags", "co_names",
                 "co_varnames", "co_freevars", "co_cellvars", "co_code", "co_linetable",
                 "co_exceptiontable"):
        h.update(repr(getattr(code, attr, None)).encode() + b"\0")
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            _digest_code(h, c)
        else:
            h.update(f"{type(c).__name__}:{c!r}\0".encode())


def _load_maker(disk_key: str):
    from ..runtime.cache import load_blob

    payload = load_blob(disk_key, "code")
    if payload is None:
        return None
    try:
        compiled, freevars = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    return compiled, list(freevars)


def _store_maker(disk_key: str, built):
    from ..runtime.cache import store_blob

    compiled, freevars = built
    store_blob(disk_key, "code", marshal.dumps((compiled, tuple(freevars))))


def _rewrite_source(func: Callable):
    """(compiled maker module, free variable names) of `func`, or None (no usable source)."""
    code = func.__code__
    try:
        lines, firstline = inspect.getsourcelines(func)
    except (OSError, TypeError):
        _warn_at(code, f"source of {func.__qualname__} is unavailable; tracing it without the "
                       "control-flow rewrite (conditions on kernel values will fail)")
        return None
    source = "".join(lines)
    dedented = textwrap.dedent(source)
    indent = len(source.splitlines()[0]) - len(dedented.splitlines()[0])
    try:
        fn = ast.parse(dedented).body[0]
    except SyntaxError:
        fn = None
    if fn is not None and not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None  # e.g. a lambda
    if fn is None or fn.name != code.co_name:
        # the file changed since the function was defined: its lines are another function's
        _warn_at(code, f"source of {func.__qualname__} in {code.co_filename} no longer matches "
                       "the function (edited since it was loaded?); tracing it without the "
                       "control-flow rewrite")
        return None
    if indent:
        for n in ast.walk(fn):
            if hasattr(n, "col_offset"):
                n.col_offset += indent
                if getattr(n, "end_col_offset", None) is not None:
                    n.end_col_offset += indent
    ast.increment_lineno(fn, firstline - 1)
    _strip_signature(fn)
    fn = _Rewriter().visit(fn)
    freevars = list(code.co_freevars)
    maker = ast.FunctionDef(
        name="__tl_maker__",
        args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=HOOKS)] +
                           [ast.arg(arg=v) for v in freevars], vararg=None, kwonlyargs=[],
                           kw_defaults=[], kwarg=None, defaults=[]),
        body=[fn, ast.Return(value=ast.Name(id=fn.name, ctx=ast.Load()))],
        decorator_list=[], returns=None, type_params=[])
    ast.copy_location(maker, fn)
    module = ast.Module(body=[maker], type_ignores=[])
    ast.fix_missing_locations(module)
    compiled = compile(module, code.co_filename, "exec")
    _register_codes(compiled)
    return compiled, freevars


def rewrite(func: Callable) -> Callable:
    """The rewritten twin of `func` (same globals, closure values, defaults); `func` itself when
    its source is unavailable."""
    from . import hooks

    built = _build_maker(func)
    if built is None:
        return func
    compiled, freevars = built
    namespace: dict = {}
    exec(compiled, func.__globals__, namespace)
    cells = []
    for name, cell in zip(freevars, func.__closure__ or ()):
        try:
            cells.append(cell.cell_contents)
        except ValueError:
            raise NameError(f"free variable {name!r} of {func.__qualname__} is not bound yet") \
                from None
    new = namespace["__tl_maker__"](hooks, *cells)
    new.__defaults__ = func.__defaults__
    new.__kwdefaults__ = func.__kwdefaults__
    new.__annotations__ = dict(getattr(func, "__annotations__", {}))
    new.__wrapped_kernel__ = func
    return new
