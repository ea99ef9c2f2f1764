"""Generic traversal of the IR: a read-only `Visitor`, a rebuilding `Mutator`, and helpers.

Both dispatch on the node class name (`visit_Load`, `visit_For`, ...) and fall back to a
generic walk over the dataclass fields. A `Mutator` returns the very same node when nothing
below it changed, so "did this pass change anything" is an identity test.
"""

from __future__ import annotations

from dataclasses import fields, replace

from . import nodes as ir

_FIELDS: dict = {}


def _node_fields(cls):
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls) if f.name != "loc")
    return names


def children(node):
    """Direct sub-values of a node that may contain IR (nodes, tuples, buffers)."""
    if isinstance(node, (tuple, list)):
        return list(node)
    if isinstance(node, ir.Buffer):
        return []
    if isinstance(node, ir.PrimFunc):
        return [node.body]
    if isinstance(node, ir.Node):
        return [getattr(node, n) for n in _node_fields(type(node))]
    return []


class Visitor:
    """Read-only walk. Override `visit_<Class>`; call `self.generic(node)` to descend."""

    def visit(self, node):
        if node is None or isinstance(node, (int, float, str, bool, ir.DType)):
            return
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            return method(node)
        return self.generic(node)

    def generic(self, node):
        for child in children(node):
            self.visit(child)


class LocatedVisitor(Visitor):
    """A Visitor that keeps `self.loc`: the source location of the innermost statement being
    visited that has one (for located errors)."""

    loc = None

    def visit(self, node):
        if isinstance(node, ir.Stmt) and node.loc is not None:
            old, self.loc = self.loc, node.loc
            try:
                return super().visit(node)
            finally:
                self.loc = old
        return super().visit(node)


class Mutator:
    """Rebuilding walk. Override `visit_<Class>` returning a replacement node."""

    def visit(self, node):
        if node is None or isinstance(node, (int, float, str, bool, ir.DType)):
            return node
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            return method(node)
        return self.generic(node)

    def visit_tuple(self, node):
        new = tuple(self.visit(c) for c in node)
        if all(a is b for a, b in zip(new, node)):
            return node
        return new

    def visit_list(self, node):
        return list(self.visit_tuple(tuple(node)))

    def visit_Buffer(self, node):
        return node

    def visit_PrimFunc(self, node):
        body = self.visit(node.body)
        return node if body is node.body else node.with_body(body)

    def generic(self, node):
        if not isinstance(node, ir.Node):
            return node
        changes = {}
        for name in _node_fields(type(node)):
            old = getattr(node, name)
            new = self.visit(old)
            if new is not old:
                changes[name] = new
        if not changes:
            return node
        return replace(node, **changes)


def any_node(root, predicate) -> bool:
    stack = [root]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        if predicate(node):
            return True
        stack.extend(children(node))
    return False


def collect(root, predicate) -> list:
    out, stack = [], [root]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        if predicate(node):
            out.append(node)
        stack.extend(reversed(children(node)))
    return out


class _Substitute(Mutator):
    def __init__(self, mapping):
        self.mapping = mapping

    def visit_Var(self, node):
        return self.mapping.get(node, node)


def substitute(node, mapping: dict):
    """Replace Vars (by identity) with expressions; values are converted with `as_expr`."""
    if not mapping:
        return node
    mapping = {k: ir.as_expr(v) for k, v in mapping.items()}
    return _Substitute(mapping).visit(node)


def free_vars(node) -> list:
    """Vars read in `node` that it does not bind itself (loop, let and kernel vars)."""
    bound, seen, out = set(), set(), []

    class V(Visitor):
        def visit_Var(self, v):
            if v not in bound and v not in seen:
                seen.add(v)
                out.append(v)

        def visit_For(self, s):
            bound.add(s.var)
            self.generic(s)

        def visit_LetStmt(self, s):
            self.visit(s.value)
            bound.add(s.var)
            self.visit(s.body)

        def visit_Kernel(self, s):
            bound.update(s.block_vars)
            bound.update(s.thread_vars)
            self.generic(s)

    V().visit(node)
    return out
