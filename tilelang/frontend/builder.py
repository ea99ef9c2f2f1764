"""The trace-time IR builder.

While a kernel body runs (once, on symbolic values) every `T.*` call and every rewritten
statement appends IR to the innermost open frame of the active `Builder`. Frames nest like the
Python blocks that open them: function, kernel, loop, if-branch, while. Let bindings and
thread-local allocations are recorded as markers and folded into scoped `LetStmt`/`Allocate`
nodes when their frame closes, so they cover the statements that follow them.
"""

from __future__ import annotations

import sys
import threading
from typing import Optional

from ..errors import KernelError, SourceLoc, located
from ..ir import hooks as ir_hooks
from ..ir import nodes as ir

_state = threading.local()

# Code objects produced by the frontend rewrite (user kernel/macro bodies): frames running
# them are "user frames", whose position is the location of the IR they build.
USER_CODES: set = set()


def current_loc() -> Optional[SourceLoc]:
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code in USER_CODES:
            return _frame_loc(frame)
        frame = frame.f_back
    return None


def _frame_loc(frame) -> SourceLoc:
    return _code_loc(frame.f_code, frame.f_lineno, frame.f_lasti)


def user_frames(tb) -> list:
    """The code objects of the user frames of a traceback, outermost first."""
    out = []
    while tb is not None:
        if tb.tb_frame.f_code in USER_CODES:
            out.append(tb.tb_frame.f_code)
        tb = tb.tb_next
    return out


def loc_from_traceback(tb) -> Optional[SourceLoc]:
    """The innermost user frame of a traceback (where an exception left the user's code)."""
    found = None
    while tb is not None:
        if tb.tb_frame.f_code in USER_CODES:
            found = _code_loc(tb.tb_frame.f_code, tb.tb_lineno, tb.tb_lasti)
        tb = tb.tb_next
    return found


def _code_loc(code, lineno: int, lasti: int) -> SourceLoc:
    """The location of instruction `lasti` of `code` on `lineno` (its columns found when an
    error asks for them)."""
    return SourceLoc.at(code, lineno, lasti)


def error(exc_type, message, loc=None):
    """Build a located error at the current user line (or `loc`)."""
    return located(exc_type)(message, loc if loc is not None else current_loc())


ir_hooks.error = error


def defer_error(exc_type, message):
    """A located error raised when the function is compiled (for the CPU interpreter and
    CUDA alike), not while it is traced: the reference finds these problems in its lowering,
    so its programs define such functions without error and fail at tilelang.compile.
    Outside a trace (an expression built on its own) there is nothing to compile later: the
    error is raised now."""
    b = Builder.current(required=False)
    if b is None:
        raise error(exc_type, message)
    b.attrs.setdefault("deferred_errors", []).append(error(exc_type, message))


class Frame:
    """A block under construction: statements plus let/alloc markers."""

    __slots__ = ("kind", "items", "data")

    def __init__(self, kind: str, **data):
        self.kind = kind
        self.items: list = []
        self.data = data

    def build(self) -> ir.Stmt:
        body = None
        for item in reversed(self.items):
            if isinstance(item, tuple):
                tag = item[0]
                inner = body if body is not None else ir.Seq(())
                if tag == "let":
                    body = ir.LetStmt(item[1], item[2], inner, loc=item[3])
                elif tag == "attr":
                    body = ir.Attr(item[1], item[2], inner, loc=item[3])
                else:  # alloc
                    body = ir.Allocate(item[1], inner, item[2], loc=item[3])
            elif body is None:
                body = item
            elif isinstance(body, ir.Seq):
                body = ir.Seq((item,) + body.stmts)
            else:
                body = ir.Seq((item, body))
        if body is None:
            return ir.Seq(())
        return body


class Builder:
    """State of one trace: the frame stack, kernel frames, parameters and outputs."""

    def __init__(self, name: str = "main"):
        self.name = name
        self.frames: list[Frame] = [Frame("func")]
        self.kernels: list[Frame] = []
        self.loop_kinds: list[str] = []  # "ir" or "python", innermost last
        self.params: list = []
        self.outputs: list = []
        self.workspaces: list = []
        self.attrs: dict = {}
        self.function_assumptions: list = []  # T.assume at function level: (cond, loc)
        self.symbols: dict = {}  # T.const / T.dyn names -> Var or int
        self.negative_points: dict = {}  # id(Load) -> (Load, [(dim, index < 0 as written)])
        self.names_used: dict = {}
        self.let_bound: set = set()  # ids of the symbols T.let has bound (each once)
        self.sblock_scopes: list = []  # open T.sblock's safe-value maps, innermost last
        self.oob_guarded: set = set()  # ids of loads a T.sblock's safe value already guards

    # ---- activation ----------------------------------------------------------------------
    def __enter__(self):
        stack = getattr(_state, "stack", None)
        if stack is None:
            stack = _state.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc):
        _state.stack.pop()
        return False

    @staticmethod
    def current(required: bool = True, what: str = "this operation") -> Optional["Builder"]:
        stack = getattr(_state, "stack", None)
        if stack:
            return stack[-1]
        if required:
            raise error(RuntimeError, f"{what} can only be used inside a kernel body "
                        "(a @T.prim_func, @T.macro or @tilelang.jit function being traced)")
        return None

    # ---- frames ---------------------------------------------------------------------------
    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    def push(self, kind: str, **data) -> Frame:
        f = Frame(kind, **data)
        self.frames.append(f)
        return f

    def pop(self, kind: str) -> tuple[Frame, ir.Stmt]:
        f = self.frames.pop()
        if f.kind != kind:
            raise KernelError(f"internal: closing a {kind} frame but the open one is {f.kind}",
                              current_loc())
        return f, f.build()

    def emit(self, stmt: ir.Stmt):
        self.frame.items.append(stmt)

    def in_kernel(self) -> bool:
        return bool(self.kernels)

    @property
    def kernel(self) -> Frame:
        if not self.kernels:
            raise error(RuntimeError, "this operation must be inside `with T.Kernel(...)`")
        return self.kernels[-1]

    def inside(self, kind: str) -> bool:
        return any(f.kind == kind for f in self.frames)

    def innermost_loop_kind(self) -> Optional[str]:
        for f in reversed(self.frames):
            if f.kind == "for":
                return f.data.get("loop_kind")
        return None

    # ---- names, lets and allocations ------------------------------------------------------
    def fresh_name(self, base: str) -> str:
        n = self.names_used.get(base, 0)
        self.names_used[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    def let(self, name: str, value: ir.Expr) -> ir.Var:
        var = ir.Var(name, value.dtype)
        self.frame.items.append(("let", var, value, current_loc()))
        return var

    def scope_attr(self, key: str, value):
        """An Attr(key, value) around the statements that follow in the current frame."""
        self.frame.items.append(("attr", key, value, current_loc()))

    def declare_local(self, buffer: ir.Buffer, init=None):
        self.frame.items.append(("alloc", buffer, init, current_loc()))

    def declare_block_buffer(self, buffer: ir.Buffer):
        self.kernel.data["allocs"].append(buffer)


def current_builder(required=True, what="this operation") -> Optional[Builder]:
    return Builder.current(required, what)


def emit(stmt_cls, *args, **kwargs):
    """Append a statement built at the current user location."""
    b = current_builder(what=f"T.{stmt_cls.__name__.lower()}")
    stmt = stmt_cls(*args, loc=current_loc(), **kwargs)
    b.emit(stmt)
    return stmt
