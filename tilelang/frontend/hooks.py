"""Run-time helpers called by rewritten kernel code (bound to `__tl__` there).

Each helper decides, from the values it receives, whether the construct is Python-level
(concrete values: ordinary Python semantics, unrolled/specialised) or kernel-level (symbolic
values: IR is built through the active builder).
"""

from __future__ import annotations

import operator

from ..errors import KernelNotSupportedError
from ..ir import nodes as ir
from .builder import Builder, current_builder, current_loc, error

UNSET = object()


# ---------------------------------------------------------------------------------------------
# value classification
# ---------------------------------------------------------------------------------------------


def is_symbolic(value) -> bool:
    """True for values that only exist at kernel run time."""
    if isinstance(value, ir.Const):
        return False
    if isinstance(value, ir.Expr):
        return True
    if isinstance(value, ir.Buffer):
        return value.scope == "local.var"
    return hasattr(value, "__tl_expr__")


def concrete_truth(value):
    """Python truth of a concrete value; None when the value is symbolic."""
    if isinstance(value, ir.Const):
        return bool(value.value)
    if is_symbolic(value):
        return None
    return bool(value)


def is_mutable_scalar(value) -> bool:
    """Targets whose re-assignment is a store: `T.alloc_var` buffers and `T.Ref`s."""
    if isinstance(value, ir.Buffer):
        return value.scope == "local.var"
    return getattr(value, "__tl_ref__", False)


def store_scalar(target, value):
    from ..language.indexing import store_element

    if isinstance(target, ir.Buffer):
        store_element(target, (ir.const(0),), value)
    else:
        target.store(value)


def _expr_like(value) -> bool:
    return isinstance(value, (ir.Expr, int, float, bool)) or is_symbolic(value)


# ---------------------------------------------------------------------------------------------
# assignment
# ---------------------------------------------------------------------------------------------


def bind(name, value, prev=UNSET):
    """`name = value`: a store when `name` is a mutable scalar, a let binding when `value` is a
    non-trivial kernel expression inside a kernel, else plain Python binding."""
    if prev is not UNSET and is_mutable_scalar(prev) and _expr_like(value) \
            and value is not prev:
        store_scalar(prev, value)
        return prev
    b = Builder.current(required=False)
    if b is None:
        return value
    to_value = getattr(type(value), "__tl_bind__", None)
    if to_value is not None:  # a construct whose assignment binds a value (T.thread_binding)
        value = to_value(value, name)
    if isinstance(value, ir.Buffer) and value.name == "__unnamed":
        value.name = name
        return value
    if isinstance(value, ir.Expr) and not isinstance(value, (ir.Var, ir.Const)):
        if not b.in_kernel():
            return value  # host-level index arithmetic stays inline
        return b.let(name, value)
    return value


def bind_annotated(name, value, annotation, prev=UNSET):
    """`name: T.float32 = value`: a let binding cast to the annotated type."""
    from ..ir.dtype import DType

    if isinstance(annotation, DType) and _expr_like(value):
        value = ir.cast_to(value, annotation)
    return bind(name, value, prev)


def annotate(name, prev, annotation):
    """`name: annotation` with no value: the newer JIT style declaring a parameter's type."""
    b = current_builder(what="a parameter annotation statement")
    handler = b.attrs.get("annotate_hook")
    if handler is None:
        raise error(TypeError, f"`{name}: ...` annotation statements declare the parameters of "
                               "a @tilelang.jit kernel; they cannot be used here")
    return handler(name, prev, annotation)


_BINOPS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "&": operator.and_,
    "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
    "@": operator.matmul,
}


def aug(name, prev, op, value):
    if prev is UNSET:
        raise error(NameError, f"name {name!r} is not defined")
    if is_mutable_scalar(prev):
        store_scalar(prev, _BINOPS[op](prev, value))
        return prev
    if not is_symbolic(prev) and not is_symbolic(value):
        # Python semantics (in-place for mutable objects)
        inplace = getattr(operator, "i" + _BINOPS[op].__name__.strip("_"), None)
        if inplace is not None:
            return inplace(prev, value)
    return bind(name, _BINOPS[op](prev, value))


def unpack(value, names, count):
    """Evaluate the right side of a tuple assignment before any target is written: kernel
    values that read memory are snapshotted into let bindings (so `a, b = b, a` swaps)."""
    items = list(value)
    if len(items) != count:
        raise error(ValueError, f"cannot unpack {len(items)} values into {count} targets")
    b = Builder.current(required=False)
    if b is None or not b.in_kernel():
        return items
    names = names if isinstance(names, tuple) else (None,) * count
    out = []
    for item, name in zip(items, names):
        if is_mutable_scalar(item) or (isinstance(item, ir.Expr) and _reads_memory(item)):
            item = b.let(name if isinstance(name, str) else "tmp", ir.as_expr(item))
        out.append(item)
    return out


def _reads_memory(e) -> bool:
    from ..ir.visitor import any_node

    return any_node(e, lambda n: isinstance(n, ir.Load) or
                    (isinstance(n, ir.Call) and n.op in ir.SIDE_EFFECT_CALLS))


# ---------------------------------------------------------------------------------------------
# control flow
# ---------------------------------------------------------------------------------------------


class If:
    """`with If(cond) as br: if br.then(): ... if br.otherwise(): ...`

    The rewrite passes `check_exits=True` and closes each branch with `br.end()`, so a branch
    left early by a Python `break`/`continue`/`return` is an error rather than silently cut."""

    def __init__(self, cond, check_exits=False):
        self.truth = concrete_truth(cond)
        self.cond = cond
        self.builder = None
        self.then_stmt = None
        self.open = None
        self.check_exits = check_exits
        self.ended = True

    def __enter__(self):
        if self.truth is None:
            self.builder = current_builder(what="a condition on a kernel value")
            self.loc = current_loc()
        return self

    def then(self) -> bool:
        if self.truth is not None:
            return self.truth
        self.builder.push("then")
        self.open = "then"
        self.ended = not self.check_exits
        return True

    def otherwise(self) -> bool:
        if self.truth is not None:
            return not self.truth
        _, self.then_stmt = self.builder.pop("then")
        self.builder.push("else")
        self.open = "else"
        self.ended = not self.check_exits
        return True

    def end(self):
        """The open branch ran to its end (not left by a Python break/continue/return)."""
        self.ended = True

    def __exit__(self, exc_type, *rest):
        if self.truth is not None or exc_type is not None:
            return False
        b = self.builder
        if not self.ended:
            raise error(KernelNotSupportedError, "a `break`, `continue` or `return` that leaves a "
                        "Python-level loop or function cannot depend on a condition on a kernel "
                        "value (it would be taken at trace time); use a kernel loop (T.serial, "
                        "while) or a T.alloc_var flag", self.loc)
        if self.open == "then":
            _, self.then_stmt = b.pop("then")
            else_stmt = None
        else:
            _, else_stmt = b.pop("else")
        cond = ir.as_expr(self.cond)
        if not cond.dtype.is_bool:
            cond = ir.compare("ne", cond, ir.const(0, cond.dtype))
        b.emit(ir.If(cond, self.then_stmt, else_stmt, loc=self.loc))
        return False


def loop(iterable, names):
    """A `for` loop: kernel loops (T.Parallel, T.serial, range, ...) are traced once; any other
    iterable is iterated in Python (unrolled)."""
    from ..language.loops import LoopSpec

    if isinstance(iterable, LoopSpec):
        yield from iterable.trace(names)
        return
    b = Builder.current(required=False)
    if b is None:
        yield from iterable
        return
    b.loop_kinds.append("python")
    try:
        yield from iterable
    finally:
        b.loop_kinds.pop()


def range_(*args):
    from ..language.loops import serial

    if all(isinstance(a, int) for a in args) and Builder.current(required=False) is None:
        return range(*args)
    return serial(*args)


def while_(cond_fn):
    """`while c:` — Python-level when `c` is concrete, a kernel while loop otherwise."""
    cond = cond_fn()
    truth = concrete_truth(cond)
    b = Builder.current(required=False)
    if truth is not None:
        if b is not None:
            b.loop_kinds.append("python")
        try:
            while truth:
                yield None
                truth = concrete_truth(cond_fn())
                if truth is None:
                    raise error(TypeError, "a while condition changed from a Python value to a "
                                           "kernel value between iterations")
        finally:
            if b is not None:
                b.loop_kinds.pop()
        return
    b = current_builder(what="a while loop on a kernel value")
    loc = current_loc()
    b.push("while")
    b.loop_kinds.append("ir")
    yield None
    b.loop_kinds.pop()
    _, body = b.pop("while")
    c = ir.as_expr(cond)
    if not c.dtype.is_bool:
        c = ir.compare("ne", c, ir.const(0, c.dtype))
    b.emit(ir.While(c, body, loc=loc))


def frame_depth():
    """How many IR frames are open (None outside a trace)."""
    b = Builder.current(required=False)
    return None if b is None else len(b.frames)


_FRAME_WORDS = {"kernel": "`with T.Kernel(...)`", "for": "a kernel loop",
                "then": "a branch on a kernel value", "else": "a branch on a kernel value",
                "while": "a kernel `while` loop"}


def return_(depth, value):
    """`return value`: allowed unless it would leave an IR frame the function opened (the
    statements after it would silently vanish from the kernel: a kernel has no early exit)."""
    b = Builder.current(required=False)
    if b is not None and depth is not None and len(b.frames) > depth:
        inner = b.frames[-1].kind
        raise error(KernelNotSupportedError,
                    f"`return` inside {_FRAME_WORDS.get(inner, 'a kernel frame')}: a kernel "
                    "cannot return early (the statements after it would be dropped at trace "
                    "time); put the rest under a condition, or end the loop with a "
                    "T.alloc_var flag")
    return value


def _innermost_loop_is_ir() -> bool:
    b = Builder.current(required=False)
    return b is not None and bool(b.loop_kinds) and b.loop_kinds[-1] == "ir"


def brk() -> bool:
    """True: do a Python break. False: a kernel `break` was emitted."""
    if _innermost_loop_is_ir():
        from .builder import emit

        if Builder.current().innermost_loop_kind() == "parallel":
            raise error(KernelNotSupportedError, "`break` inside T.Parallel: its iterations run "
                        "on different threads in no order; use `continue` or a condition")
        emit(ir.Break)
        return False
    return True


def cont() -> bool:
    if _innermost_loop_is_ir():
        from .builder import emit

        emit(ir.Continue)
        return False
    return True


# ---------------------------------------------------------------------------------------------
# boolean expressions
# ---------------------------------------------------------------------------------------------


def and_(first, *rest):
    value = first
    for fn in rest:
        truth = concrete_truth(value)
        if truth is False:
            return value
        nxt = fn()
        if truth is True:
            value = nxt
        else:
            value = ir.logical_and(value, nxt)
    return value


def or_(first, *rest):
    value = first
    for fn in rest:
        truth = concrete_truth(value)
        if truth is True:
            return value
        nxt = fn()
        if truth is False:
            value = nxt
        else:
            value = ir.logical_or(value, nxt)
    return value


def not_(value):
    truth = concrete_truth(value)
    if truth is not None:
        return not truth
    return ir.logical_not(value)


def ifexp(cond, then_fn, else_fn):
    truth = concrete_truth(cond)
    if truth is True:
        return then_fn()
    if truth is False:
        return else_fn()
    return ir.select(cond, then_fn(), else_fn())


def assert_(cond, msg=None):
    truth = concrete_truth(cond)
    if truth is True:
        return
    if truth is False:
        raise error(AssertionError, str(msg) if msg is not None else "assertion failed")
    from .builder import emit

    emit(ir.Assert, ir.as_expr(cond), str(msg) if msg is not None else "")


def discard(value):
    """An expression statement: a kernel call with side effects (T.call_extern, a scalar
    atomic returning its old value) is kept as an evaluation; anything else is dropped."""
    if isinstance(value, ir.Call) and (value.op in ir.SIDE_EFFECT_CALLS or value.op == "comment"):
        b = Builder.current(required=False)
        if b is not None:
            from .builder import emit

            emit(ir.Evaluate, value)
    return None


def named(context, names):
    """Let a frame-opening context manager (T.Kernel) name the variables it yields."""
    setter = getattr(context, "set_names", None)
    if setter is not None:
        setter(names)
    return context
