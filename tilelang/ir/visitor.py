"""Generic traversal of the IR: a read-only `Visitor`, a rebuilding `Mutator`, and helpers.

Both dispatch on the node class name (`visit_Load`, `visit_For`, ...) and fall back to a
generic walk over the dataclass fields. A `Mutator` returns the very same node when nothing
below it changed, so "did this pass change anything" is an identity test.
"""

from __future__ import annotations

from dataclasses import fields, replace
from operator import attrgetter

from . import nodes as ir

# Every pass walks the IR several times, so the walk itself is kept cheap: the sub-values of a
# node class are read by one precomputed getter, and the method a visitor runs for a node
# class is looked up once per (visitor class, node class) instead of by name on every node.

_FIELDS: dict = {}
_FIELD_GETTERS: dict = {}
_GETTERS: dict = {}
_LEAVES = (int, float, str, bool, ir.DType, type(None))
# exact classes of the values that hold no IR: the walks skip them without a call
_LEAF_CLASSES = frozenset(_LEAVES)
_BASES = (ir.Node, ir.Expr, ir.Stmt, object)  # no visitor method stands for all of these


def _node_fields(cls):
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls) if f.name != "loc")
    return names


def _no_children(node):
    return ()


def _field_getter(cls):
    """A function returning the values of `cls`'s fields (but `loc`), as a tuple."""
    getter = _FIELD_GETTERS.get(cls)
    if getter is None:
        names = _node_fields(cls)
        if len(names) == 1:
            one = attrgetter(names[0])
            getter = (lambda node: (one(node),))
        else:
            getter = attrgetter(*names) if names else _no_children
        _FIELD_GETTERS[cls] = getter
    return getter


def _children_getter(cls):
    if issubclass(cls, (tuple, list)):
        getter = tuple
    elif issubclass(cls, ir.Buffer):
        getter = _no_children
    elif issubclass(cls, ir.PrimFunc):
        getter = (lambda node: (node.body,))
    elif issubclass(cls, ir.Node):
        getter = _field_getter(cls)
    else:
        getter = _no_children
    _GETTERS[cls] = getter
    return getter


def children(node) -> tuple:
    """Direct sub-values of a node that may contain IR (nodes, tuples, buffers)."""
    getter = _GETTERS.get(node.__class__)
    if getter is None:
        getter = _children_getter(node.__class__)
    return getter(node)


class _Dispatch:
    """What a visitor class runs for each node class: `visit_<Class>` if it defines one,
    `leaf` for values that hold no IR, else `generic`; one table per visitor class.

    When a class keeps the base `visit`, its walks call the table directly (one Python call
    per node instead of two); a class that overrides `visit` gets it called for every child."""

    _direct = True

    @classmethod
    def _resolve(cls, node_cls):
        if issubclass(node_cls, _LEAVES) or \
                (issubclass(node_cls, ir.Expr) and cls._statements_only()):
            fn = cls.leaf
        else:
            # a node class derived from another (GemmSp from Gemm) takes the base's method
            # when the visitor has none of its own
            fn = next((getattr(cls, "visit_" + k.__name__) for k in node_cls.__mro__
                       if k not in _BASES and hasattr(cls, "visit_" + k.__name__)),
                      cls.generic)
        cls._methods[node_cls] = fn
        return fn

    @classmethod
    def _statements_only(cls) -> bool:
        """Whether the class acts on statements alone: it defines `visit_<Class>` only for
        statement classes and keeps the base `visit`, `generic` and `leaf`. Its walks then
        treat an expression as a leaf: expressions hold no statements (ir/nodes.py), so walking
        one would change and find nothing. Most passes' walks are such, and expressions are
        most of the IR's nodes."""
        known = cls.__dict__.get("_stmt_only")
        if known is None:
            base = next(b for b in cls.__mro__ if b.__dict__.get("_walk_base"))
            own = {n for k in cls.__mro__[:cls.__mro__.index(base)] for n in vars(k)}
            targets = [getattr(ir, n[len("visit_"):], None) for n in own
                       if n.startswith("visit_")]
            known = cls._direct and \
                all(getattr(cls, m) is getattr(base, m) for m in ("visit", "generic", "leaf")) \
                and all(isinstance(t, type) and issubclass(t, ir.Stmt) for t in targets)
            cls._stmt_only = known
        return known

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._methods = {}
        cls._stmt_only = None


class Visitor(_Dispatch):
    """Read-only walk. Override `visit_<Class>`; call `self.generic(node)` to descend."""

    _walk_base = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._direct = cls.visit is Visitor.visit

    def visit(self, node):
        fn = self._methods.get(node.__class__)
        if fn is None:
            fn = self._resolve(node.__class__)
        return fn(self, node)

    def leaf(self, node):
        return None

    # classes of children that go through self.visit() even on the direct path
    _via_visit: tuple = ()

    def generic(self, node):
        getter = _GETTERS.get(node.__class__)
        if getter is None:
            getter = _children_getter(node.__class__)
        if not self._direct:
            for child in getter(node):
                self.visit(child)
            return
        methods, via = self._methods, self._via_visit
        for child in getter(node):
            cls = child.__class__
            if cls in _LEAF_CLASSES:
                continue
            if via and isinstance(child, via):
                self.visit(child)
                continue
            fn = methods.get(cls)
            if fn is None:
                fn = self._resolve(cls)
            fn(self, child)


class LocatedVisitor(Visitor):
    """A Visitor that keeps `self.loc`: the source location of the innermost statement being
    visited that has one (for located errors)."""

    _walk_base = True

    loc = None
    # only statements move `loc`: they (and the tuples holding them) go through visit(),
    # everything else straight to its method
    _via_visit = (ir.Stmt, tuple, list)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._direct = cls.visit is LocatedVisitor.visit

    def visit(self, node):
        if isinstance(node, ir.Stmt) and node.loc is not None:
            old, self.loc = self.loc, node.loc
            try:
                return Visitor.visit(self, node)
            finally:
                self.loc = old
        return Visitor.visit(self, node)


class Mutator(_Dispatch):
    """Rebuilding walk. Override `visit_<Class>` returning a replacement node."""

    _walk_base = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._direct = cls.visit is Mutator.visit

    def visit(self, node):
        fn = self._methods.get(node.__class__)
        if fn is None:
            fn = self._resolve(node.__class__)
        return fn(self, node)

    def leaf(self, node):
        return node

    def visit_tuple(self, node):
        if not self._direct:
            visit = self.visit
            new = tuple([visit(c) for c in node])
            for a, b in zip(new, node):
                if a is not b:
                    return new
            return node
        methods = self._methods
        new = None
        for i, c in enumerate(node):
            cls = c.__class__
            if cls in _LEAF_CLASSES:
                continue
            fn = methods.get(cls)
            if fn is None:
                fn = self._resolve(cls)
            n = fn(self, c)
            if n is not c:
                if new is None:
                    new = list(node)
                new[i] = n
        return node if new is None else tuple(new)

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
        cls = node.__class__
        values = _field_getter(cls)(node)
        changes = None
        if self._direct:
            methods = self._methods
            for i, old in enumerate(values):
                ocls = old.__class__
                if ocls in _LEAF_CLASSES:
                    continue
                fn = methods.get(ocls)
                if fn is None:
                    fn = self._resolve(ocls)
                new = fn(self, old)
                if new is not old:
                    if changes is None:
                        changes = {}
                    changes[_FIELDS[cls][i]] = new
        else:
            visit = self.visit
            for name, old in zip(_node_fields(cls), values):
                new = visit(old)
                if new is not old:
                    if changes is None:
                        changes = {}
                    changes[name] = new
        if changes is None:
            return node
        return replace(node, **changes)


Visitor._methods = {}
Mutator._methods = {}


# The walks below (any_node, collect) pop from the end of a stack, so they push a node's
# sub-values last first to visit them first to last; leaf values (ints, floats, strings, bools,
# dtypes, None) hold no IR and are never pushed, which halves the values a walk handles.


def any_node(root, predicate) -> bool:
    """Whether `predicate` holds for `root` or anything in it (leaf values are not offered
    to it)."""
    stack, getters, leaves = ([] if root is None else [root]), _GETTERS, _LEAF_CLASSES
    while stack:
        node = stack.pop()
        if predicate(node):
            return True
        getter = getters.get(node.__class__) or _children_getter(node.__class__)
        stack += [c for c in reversed(getter(node)) if c.__class__ not in leaves]
    return False


def any_stmt(root, predicate) -> bool:
    """Whether `predicate` holds for a statement in `root` (itself included). Expressions hold
    no statements, so the walk does not enter them: much cheaper than `any_node` where only
    statements can match."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node is None or isinstance(node, ir.Expr):
            continue
        if isinstance(node, ir.Stmt) and predicate(node):
            return True
        stack.extend(children(node))
    return False


def collect_stmts(root, predicate) -> list:
    """Every statement in `root` (itself included) for which `predicate` holds, in pre-order,
    first to last. Expressions hold no statements, so the walk does not enter them: much
    cheaper than `collect` where only statements can match."""
    out, stack, getters, leaves = [], ([] if root is None else [root]), _GETTERS, _LEAF_CLASSES
    expr = ir.Expr
    while stack:
        node = stack.pop()
        if isinstance(node, ir.Stmt) and predicate(node):
            out.append(node)
        getter = getters.get(node.__class__) or _children_getter(node.__class__)
        stack += [c for c in reversed(getter(node))
                  if c.__class__ not in leaves and not isinstance(c, expr)]
    return out


def collect(root, predicate) -> list:
    """Every value in `root` (itself included, leaf values not offered) for which `predicate`
    holds, in pre-order, sub-values first to last."""
    out, stack, getters, leaves = [], ([] if root is None else [root]), _GETTERS, _LEAF_CLASSES
    while stack:
        node = stack.pop()
        if predicate(node):
            out.append(node)
        getter = getters.get(node.__class__) or _children_getter(node.__class__)
        stack += [c for c in reversed(getter(node)) if c.__class__ not in leaves]
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
