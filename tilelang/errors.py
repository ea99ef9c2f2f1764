"""Errors that point at the user's kernel source.

Every error raised while building or compiling a kernel carries a `SourceLoc` (file, line,
column, source line) of the user's code and renders it under the message, with a caret. The
located classes also derive from the matching builtin (`KernelTypeError` is a `TypeError`), so
callers can catch either.
"""

from __future__ import annotations

import functools
import linecache
from typing import Optional

__all__ = ["SourceLoc", "TileLangError", "KernelError", "located", "raise_at",
           "KernelTypeError", "KernelValueError", "KernelNotSupportedError", "user_facing"]


class SourceLoc:
    """A place in the user's source: file, line and, where Python records them, the columns
    (0-based, `end_col` exclusive). Immutable; equal and hashed by those four.

    `SourceLoc.at(code, lineno, lasti)` (the tracer's: a statement built by instruction
    `lasti` of `code`) finds the columns only when they are asked for. Reading a code
    object's positions costs about 0.15 us per instruction, 0.6 ms for a long kernel body in
    each process's first trace of it, and only an error shows them."""

    __slots__ = ("filename", "lineno", "_columns", "_site")

    def __init__(self, filename: str, lineno: int, col: Optional[int] = None,
                 end_col: Optional[int] = None):
        set_ = object.__setattr__
        set_(self, "filename", filename)
        set_(self, "lineno", lineno)
        set_(self, "_columns", (col, end_col))
        set_(self, "_site", None)

    @classmethod
    def at(cls, code, lineno: int, lasti: int) -> "SourceLoc":
        loc = cls(code.co_filename, lineno)
        object.__setattr__(loc, "_columns", None)
        object.__setattr__(loc, "_site", (code, lasti))
        return loc

    def __setattr__(self, name, value):
        raise AttributeError(f"SourceLoc is immutable (cannot set {name!r})")

    def columns(self) -> tuple:
        """(col, end_col), either None where unknown."""
        if self._columns is None:
            object.__setattr__(self, "_columns", _columns_at(*self._site, self.lineno))
        return self._columns

    @property
    def col(self) -> Optional[int]:
        return self.columns()[0]

    @property
    def end_col(self) -> Optional[int]:
        return self.columns()[1]

    def _fields(self):
        return (self.filename, self.lineno) + self.columns()

    def __eq__(self, other):
        return type(other) is SourceLoc and self._fields() == other._fields()

    def __hash__(self):
        return hash(self._fields())

    def __repr__(self):
        col, end_col = self.columns()
        return (f"SourceLoc(filename={self.filename!r}, lineno={self.lineno!r}, col={col!r}, "
                f"end_col={end_col!r})")

    def __reduce__(self):  # code objects do not pickle: the columns are found first
        return (SourceLoc, self._fields())

    @property
    def source_line(self) -> str:
        return linecache.getline(self.filename, self.lineno).rstrip("\n")

    def __str__(self):
        col = f":{self.col + 1}" if self.col is not None else ""
        return f"{self.filename}:{self.lineno}{col}"

    def render(self) -> str:
        text = self.source_line
        out = [f"  --> {self}"]
        col, end_col = self.columns()
        if text:
            out.append(f"{self.lineno:>5} | {text}")
            if col is not None:
                width = max(1, (end_col or col + 1) - col)
                if end_col is None or end_col <= col:
                    width = 1
                out.append("      | " + " " * col + "^" * width)
        return "\n".join(out)


def _columns_at(code, lasti: int, lineno: int) -> tuple:
    """The columns of instruction `lasti` of `code` where it lies on `lineno` (Python >= 3.11
    records them), else (None, None)."""
    if lasti < 0:
        return None, None
    positions = _positions(code)
    if lasti // 2 < len(positions):
        pos = positions[lasti // 2]
        if pos[0] is not None and pos[0] == lineno:
            return pos[2], (pos[3] if pos[1] == lineno else None)
    return None, None


@functools.lru_cache(maxsize=1024)
def _positions(code) -> tuple:
    """`code.co_positions()` as a tuple, once per code object (errors of one kernel body
    ask for many locations of it)."""
    positions = getattr(code, "co_positions", None)
    return tuple(positions()) if positions is not None else ()


class TileLangError(Exception):
    """Base class of all errors raised by this package."""


class KernelError(TileLangError):
    """An error in a kernel program, located at the user's source."""

    def __init__(self, message: str, loc: Optional[SourceLoc] = None):
        self.message = message
        self.loc = loc
        super().__init__(self._render())

    def _render(self) -> str:
        if self.loc is None:
            return self.message
        return f"{self.message}\n{self.loc.render()}"

    def __str__(self):  # not the builtin base's (KeyError would print the repr)
        return self._render()

    def __reduce__(self):
        base = type(self).__dict__.get("_located_base")
        if base is not None:  # classes made by `located` are not module attributes
            return (_rebuild_located, (base, self.message, self.loc))
        return (type(self), (self.message, self.loc))


_LOCATED: dict = {}


def located(base: type) -> type:
    """The KernelError subclass that also is a `base` (TypeError, ValueError...)."""
    if issubclass(base, KernelError):
        return base
    cls = _LOCATED.get(base)
    if cls is None:
        try:
            cls = type(f"Kernel{base.__name__}", (KernelError, base), {"_located_base": base})
        except TypeError:  # builtins with incompatible layouts
            cls = KernelError
        _LOCATED[base] = cls
    return cls


def _rebuild_located(base, message, loc):
    return located(base)(message, loc)


KernelTypeError = located(TypeError)
KernelValueError = located(ValueError)


class KernelNotSupportedError(KernelError, NotImplementedError):
    """A construct this compiler does not support (yet); says what and where."""


def raise_at(loc, exc_type, message):
    raise located(exc_type)(message, loc)


def user_facing(fn):
    """Decorate a compiler stage whose errors reach the user (tracing, the semantic checks,
    lowering, the interpreter): a KernelError leaving it already shows the user's line, so the
    compiler frames below this point are dropped from its traceback (a pass may raise from
    fifty frames deep; what the user needs is the message and their own line)."""

    @functools.wraps(fn)
    def stage(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except KernelError as err:
            raise err.with_traceback(None) from None

    return stage
