"""`T.sblock`: the reference's TVMScript block inside a kernel, kept here for the one thing a
program can observe through it: block-scoped annotations. `T.annotate_safe_value` inside a
`with T.sblock(...)` applies to the global loads and `T.copy`s of that block only (an inner
block's value wins over an outer one's), as the reference's block annotations do; outside any
block it applies to the whole kernel. `T.reads` / `T.writes` (the block's declared regions) are
accepted and have no effect: the compiler finds what a block reads and writes itself."""

from __future__ import annotations

from ..frontend.builder import current_builder, error
from ..ir import nodes as ir
from ..ir.visitor import Mutator

OOB_VALUE = ir.OOB_VALUE


class sblock:  # noqa: N801 - the reference spells it T.sblock
    """`with T.sblock("name"):` — a block whose annotations (`T.annotate_safe_value`) apply to
    the statements inside it, before or after the annotation."""

    def __init__(self, name_hint: str = "", no_realize: bool = False):
        if not isinstance(name_hint, str):
            raise error(TypeError, f"T.sblock takes a name (str), got "
                                   f"{type(name_hint).__name__} {name_hint!r}")
        self.name = name_hint

    def __enter__(self):
        b = current_builder(what="T.sblock")
        if not b.in_kernel():
            raise error(ValueError, "T.sblock must be inside `with T.Kernel(...)`")
        self._frame = b.frame
        self._start = len(b.frame.items)
        b.sblock_scopes.append({})
        return self

    def __exit__(self, exc_type, *rest):
        b = current_builder()
        safe_values = b.sblock_scopes.pop()
        if exc_type is not None or not safe_values:
            return False
        if b.frame is not self._frame:
            raise error(RuntimeError, "internal: T.sblock closed in another block than it opened")
        rewrite = _ScopedSafeValues(safe_values, b.oob_guarded)
        items = self._frame.items
        for k in range(self._start, len(items)):
            items[k] = _rewrite_item(rewrite, items[k])
        return False


def reads(*regions):
    """The regions a `T.sblock` reads: accepted and ignored (the compiler finds them)."""


def writes(*regions):
    """The regions a `T.sblock` writes: accepted and ignored (the compiler finds them)."""


def scoped_safe_values():
    """The innermost open `T.sblock`'s safe-value map, or None outside every block."""
    b = current_builder(what="this annotation")
    return b.sblock_scopes[-1] if b.sblock_scopes else None


def _rewrite_item(rewrite, item):
    if not isinstance(item, tuple):
        return rewrite.visit(item)
    if item[0] == "let":  # ("let", var, value, loc)
        return (item[0], item[1], rewrite.visit(item[2]), item[3])
    return item


class _ScopedSafeValues(Mutator):
    """Global loads of the annotated buffers read the block's value out of bounds (an explicit
    select, so that the kernel-wide value guard_global applies later does not override it);
    copies from them carry the value as an option. Loads and copies an inner block already
    rewrote keep the inner value (`guarded` holds their ids)."""

    def __init__(self, safe_values: dict, guarded: set):
        self.safe = safe_values
        self.guarded = guarded

    def visit_Load(self, e):
        e = self.generic(e)
        value = self.safe.get(e.buffer)
        if value is None or e.buffer.scope != "global" or id(e) in self.guarded:
            return e
        self.guarded.add(id(e))
        return ir.load_or(e, value)

    def visit_Copy(self, s):
        value = self.safe.get(s.src.buffer)
        if value is None or any(k == OOB_VALUE for k, _ in s.options):
            return s
        return ir.with_fields(s, options=s.options + ((OOB_VALUE, value),))
