"""Errors that point at the user's kernel source.

Every error raised while building or compiling a kernel carries a `SourceLoc` (file, line,
column, source line) of the user's code and renders it under the message, with a caret. The
located classes also derive from the matching builtin (`KernelTypeError` is a `TypeError`), so
callers can catch either.
"""

from __future__ import annotations

import functools
import linecache
from dataclasses import dataclass
from typing import Optional

__all__ = ["SourceLoc", "TileLangError", "KernelError", "located", "raise_at",
           "KernelTypeError", "KernelValueError", "KernelNotSupportedError", "user_facing"]


@dataclass(frozen=True)
class SourceLoc:
    filename: str
    lineno: int
    col: Optional[int] = None
    end_col: Optional[int] = None

    @property
    def source_line(self) -> str:
        return linecache.getline(self.filename, self.lineno).rstrip("\n")

    def __str__(self):
        col = f":{self.col + 1}" if self.col is not None else ""
        return f"{self.filename}:{self.lineno}{col}"

    def render(self) -> str:
        text = self.source_line
        out = [f"  --> {self}"]
        if text:
            out.append(f"{self.lineno:>5} | {text}")
            if self.col is not None:
                width = max(1, (self.end_col or self.col + 1) - self.col)
                if self.end_col is None or self.end_col <= self.col:
                    width = 1
                out.append("      | " + " " * self.col + "^" * width)
        return "\n".join(out)


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
