"""CuTe integer tuples: the shapes, strides and coordinates of the layout algebra.

An `IntTuple` is a tree. Its leaves are

* `IntTupleConst`: a static integer;
* `IntTuplePrimExpr`: a dynamic integer, a kernel expression (`T.dynamic` sizes, loop vars) or,
  for vectorised evaluation, a numpy integer array;
* `IntTupleScaledBasis`: `value @ path`, CuTe's `E<path...>{value}`, a stride that lands in the
  codomain axis named by `path` (identity layouts, TMEM coordinates);

and its branches are `IntTupleTuple`s. `+` is CuTe's ArithmeticTuple sum (a zero leaf is the
identity, tuples add component-wise after zero padding, scaled bases add as one-hot tuples);
`*` multiplies leaves, tuples of equal rank component-wise, and scales a basis.

The text form is CuTe's: `(2,(3,4))`, `s`, and `v@m@...` with the basis path innermost-first
(`E<1,0>{2}` prints `2@0@1`). `IntTuple.parse` reads exactly what `str` writes.

Python programs see these trees through `to_python` (nested tuples of ints, expressions and
`ScaledBasis` values) and build them with `from_python`.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain

import numpy as np

from ...ir import nodes as ir
from .errors import check, fail

__all__ = ["IntTuple", "IntTupleConst", "IntTuplePrimExpr", "IntTupleScaledBasis",
           "IntTupleTuple", "ScaledBasis", "E", "to_python", "from_python", "product",
           "flatten_to_tuple", "congruent", "compatible", "leaf", "ZERO", "ONE"]


class IntTuple:
    """Base class of the IntTuple tree nodes (see the module docstring)."""

    __slots__ = ()

    # ---- tree access ---------------------------------------------------------------------
    @property
    def rank(self) -> int:
        """Number of children; a leaf has rank 1."""
        return 1

    def __getitem__(self, index: int) -> "IntTuple":
        if index != 0:
            fail(f"IntTuple leaf index out of range: {index} vs 0")
        return self  # a leaf is its own only child

    def leaves(self):
        """The leaves, depth-first, fastest mode first."""
        yield self

    def map_leaves(self, fn) -> "IntTuple":
        """The same tree with every leaf replaced by `fn(leaf)`."""
        return fn(self)

    def same_as(self, other: "IntTuple") -> bool:
        """Structural equality (expressions compare structurally, vars by identity)."""
        raise NotImplementedError

    # ---- arithmetic ----------------------------------------------------------------------
    def __add__(self, other):
        return add(self, from_python(other))

    def __radd__(self, other):
        return add(from_python(other), self)

    def __mul__(self, other):
        return mul(self, from_python(other))

    def __rmul__(self, other):
        return mul(from_python(other), self)

    # ---- text ----------------------------------------------------------------------------
    @staticmethod
    def parse(text: str) -> "IntTuple":
        """Read CuTe's spelling (the inverse of `str`)."""
        return _Parser(text).parse()

    def __repr__(self):
        return str(self)


@dataclass(frozen=True, eq=False, slots=True)
class IntTupleConst(IntTuple):
    value: int

    def same_as(self, other):
        return isinstance(other, IntTupleConst) and other.value == self.value

    def __str__(self):
        return str(self.value)


@dataclass(frozen=True, eq=False, slots=True)
class IntTuplePrimExpr(IntTuple):
    value: object  # a kernel expression or a numpy integer array

    def same_as(self, other):
        if not isinstance(other, IntTuplePrimExpr):
            return False
        if isinstance(self.value, np.ndarray) or isinstance(other.value, np.ndarray):
            return self.value is other.value
        return ir.structural_equal(self.value, other.value)

    def __str__(self):
        return str(self.value)


@dataclass(frozen=True, eq=False, slots=True)
class IntTupleScaledBasis(IntTuple):
    value: IntTuple  # a scalar leaf
    basis: tuple  # the codomain path, outermost first

    def __post_init__(self):
        check(isinstance(self.value, (IntTupleConst, IntTuplePrimExpr)),
              f"ScaledBasis value must be a scalar leaf, got {self.value}")
        object.__setattr__(self, "basis", tuple(int(m) for m in self.basis))

    def same_as(self, other):
        return (isinstance(other, IntTupleScaledBasis) and other.basis == self.basis
                and self.value.same_as(other.value))

    def __str__(self):
        return "@".join([str(self.value), *(str(m) for m in reversed(self.basis))])


@dataclass(frozen=True, eq=False, slots=True)
class IntTupleTuple(IntTuple):
    fields: tuple

    def __post_init__(self):
        object.__setattr__(self, "fields", tuple(self.fields))

    @property
    def rank(self):
        return len(self.fields)

    def __getitem__(self, index):
        if not 0 <= index < len(self.fields):
            fail(f"IntTuple index {index} out of range {len(self.fields)}")
        return self.fields[index]

    def leaves(self):
        for f in self.fields:
            yield from f.leaves()

    def map_leaves(self, fn):
        return IntTupleTuple(tuple(f.map_leaves(fn) for f in self.fields))

    def same_as(self, other):
        return (isinstance(other, IntTupleTuple) and other.rank == self.rank
                and all(a.same_as(b) for a, b in zip(self.fields, other.fields)))

    def __str__(self):
        return "(" + ",".join(str(f) for f in self.fields) + ")"


ZERO = IntTupleConst(0)
ONE = IntTupleConst(1)


def is_const(t: IntTuple, value=None) -> bool:
    """A static leaf (equal to `value` when given)."""
    return isinstance(t, IntTupleConst) and (value is None or t.value == value)


def is_scalar(t: IntTuple) -> bool:
    """A static or dynamic integer leaf (not a basis, not a tuple)."""
    return isinstance(t, (IntTupleConst, IntTuplePrimExpr))


def leaf(value) -> IntTuple:
    """A scalar leaf: static when `value` is a Python/numpy integer or a constant expression."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return IntTupleConst(int(value))
    if isinstance(value, ir.Const) and value.dtype.is_int:
        return IntTupleConst(int(value.value))
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return IntTupleConst(int(value))
    check(isinstance(value, (ir.Expr, np.ndarray)),
          f"an IntTuple leaf must be an integer or an integer expression, got {value!r}")
    return IntTuplePrimExpr(value)


def tuple_of(fields) -> IntTupleTuple:
    return IntTupleTuple(tuple(fields))


def wrap(t: IntTuple) -> IntTupleTuple:
    """`t` as a tuple (a leaf becomes a 1-tuple)."""
    return t if isinstance(t, IntTupleTuple) else IntTupleTuple((t,))


def unwrap(t: IntTuple) -> IntTuple:
    """Strip rank-1 tuples: ((x)) -> x (CuTe unwrap)."""
    while isinstance(t, IntTupleTuple) and t.rank == 1:
        t = t[0]
    return t


def flatten(t: IntTuple) -> IntTuple:
    """The leaves as one flat tuple (a leaf stays a leaf)."""
    return tuple_of(t.leaves()) if isinstance(t, IntTupleTuple) else t


def basis_get(path, t: IntTuple) -> IntTuple:
    """The subtree of `t` a basis path names."""
    for i in path:
        t = t[i]
    return t


# =============================================================================================
# Leaf arithmetic. A static pair folds to a static leaf; otherwise the operation is built on the
# dynamic values (kernel expressions fold their own constants, numpy arrays compute).
# =============================================================================================


def _check_dtypes(a: IntTuple, b: IntTuple):
    da = a.value.dtype if isinstance(a.value, ir.Expr) else None
    db = b.value.dtype if isinstance(b.value, ir.Expr) else None
    if da is not None and db is not None and da != db:
        fail(f"dtype mismatch: {da} vs {db} between operands {a} and {b}")


def _leaf_op(a: IntTuple, b: IntTuple, static, dynamic, what: str) -> IntTuple:
    if type(a) is IntTupleConst and type(b) is IntTupleConst:
        return IntTupleConst(static(a.value, b.value))
    if not (is_scalar(a) and is_scalar(b)):
        fail(f"cannot {what} {a} and {b}: scalar leaves only")
    _check_dtypes(a, b)
    return leaf(dynamic(a.value, b.value))


def add_leaf(a, b):
    return _leaf_op(a, b, lambda x, y: x + y, lambda x, y: x + y, "add")


def mul_leaf(a, b):
    return _leaf_op(a, b, lambda x, y: x * y, lambda x, y: x * y, "multiply")


def _nonzero(y):
    if y == 0:
        fail("division by zero in a layout")
    return y


def div_leaf(a, b):
    """Floored division (coordinates are non-negative)."""
    return _leaf_op(a, b, lambda x, y: x // _nonzero(y), lambda x, y: x // y, "divide")


def mod_leaf(a, b):
    """Floored modulo."""
    return _leaf_op(a, b, lambda x, y: x % _nonzero(y), lambda x, y: x % y, "take modulo of")


def ceil_div_leaf(a, b):
    return _leaf_op(a, b, lambda x, y: -(-x // _nonzero(y)), lambda x, y: (x + y - 1) // y,
                    "divide")


def abs_leaf(t: IntTuple) -> IntTuple:
    if isinstance(t, IntTupleScaledBasis):
        return IntTupleScaledBasis(abs_leaf(t.value), t.basis)
    if is_const(t):
        return IntTupleConst(abs(t.value))
    return leaf(abs(t.value))


def as_arithmetic_tuple(sb: IntTupleScaledBasis) -> IntTuple:
    """`v@(n0,n1,...)` as a one-hot nested tuple (CuTe as_arithmetic_tuple): 1@1 -> (0,1),
    2@(1,0) -> (0,(2)). This is how terms on different axes add into one coordinate."""
    out = sb.value
    for i in reversed(sb.basis):
        out = tuple_of([ZERO] * i + [out])
    return out


def add(a: IntTuple, b: IntTuple) -> IntTuple:
    """CuTe ArithmeticTuple addition."""
    if is_const(a, 0):
        return b
    if is_const(b, 0):
        return a
    if isinstance(a, IntTupleScaledBasis):
        return add(as_arithmetic_tuple(a), b)
    if isinstance(b, IntTupleScaledBasis):
        return add(a, as_arithmetic_tuple(b))
    if isinstance(a, IntTupleTuple) or isinstance(b, IntTupleTuple):
        check(isinstance(a, IntTupleTuple) and isinstance(b, IntTupleTuple),
              f"cannot add a non-zero leaf to a tuple: {a} + {b}")
        n = max(a.rank, b.rank)
        return tuple_of(add(a[i] if i < a.rank else ZERO, b[i] if i < b.rank else ZERO)
                        for i in range(n))
    return add_leaf(a, b)


def mul(a: IntTuple, b: IntTuple) -> IntTuple:
    """Leaf product; tuples of equal rank multiply component-wise; a basis scales its value
    (over every leaf of a tuple peer: (2,3) * E<1> == (2@1, 3@1)). 0 * E<1> stays the basis
    term 0@1: only addition treats a plain zero as the identity."""
    sa, sb = isinstance(a, IntTupleScaledBasis), isinstance(b, IntTupleScaledBasis)
    check(not (sa and sb), "two ScaledBasis leaves cannot multiply")
    if sa or sb:
        basis, peer = (a, b) if sa else (b, a)
        return peer.map_leaves(
            lambda x: IntTupleScaledBasis(mul_leaf(basis.value, x), basis.basis))
    if isinstance(a, IntTupleTuple) or isinstance(b, IntTupleTuple):
        check(a.rank == b.rank, f"cannot multiply {a} and {b}: ranks differ")
        return tuple_of(mul(x, y) for x, y in zip(wrap(a).fields, wrap(b).fields))
    return mul_leaf(a, b)


def product_of(t: IntTuple) -> IntTuple:
    """The product of the leaves (a leaf is its own product)."""
    if not isinstance(t, IntTupleTuple):
        return t
    acc = ONE
    for f in t.fields:
        acc = mul_leaf(acc, product_of(f))
    return acc


def sum_of(terms) -> IntTuple:
    acc = ZERO
    for t in terms:
        acc = add(acc, t)
    return acc


# =============================================================================================
# Shape relations
# =============================================================================================


def is_congruent(a: IntTuple, b: IntTuple) -> bool:
    """Same tree structure (nesting and rank at every branch)."""
    ta, tb = isinstance(a, IntTupleTuple), isinstance(b, IntTupleTuple)
    if ta != tb:
        return False
    if not ta:
        return True
    return a.rank == b.rank and all(is_congruent(x, y) for x, y in zip(a.fields, b.fields))


def is_compatible(a: IntTuple, b: IntTuple) -> bool:
    """CuTe shape compatibility `a <= b`: equal size, and every coordinate of `a` is one of
    `b` (a leaf of `a` may cover a whole subtree of `b`). Dynamic sizes compare by provable
    value."""
    if isinstance(a, IntTupleTuple):
        return (isinstance(b, IntTupleTuple) and a.rank == b.rank
                and all(is_compatible(x, y) for x, y in zip(a.fields, b.fields)))
    if not is_scalar(a) or not all(is_scalar(x) for x in b.leaves()):
        return False  # a basis is a stride, never a shape
    size = product_of(b)
    if is_const(a) and is_const(size):
        return a.value == size.value
    from ...arith import Analyzer

    return Analyzer().can_prove_equal(_as_expr(a), _as_expr(size))


def _as_expr(t: IntTuple):
    return ir.const(t.value) if is_const(t) else t.value


# =============================================================================================
# Text
# =============================================================================================


class _Parser:
    """Recursive descent over CuTe's IntTuple spelling; whitespace is free."""

    def __init__(self, text: str):
        self.text = str(text)
        self.pos = 0

    def parse(self) -> IntTuple:
        out = self.term()
        self.skip_space()
        check(self.pos == len(self.text),
              f"trailing characters in IntTuple text: {self.text[self.pos:]!r}")
        return out

    def term(self) -> IntTuple:
        self.skip_space()
        if self.peek() == "(":
            self.pos += 1
            fields = []
            self.skip_space()
            while self.peek() != ")":
                fields.append(self.term())
                self.skip_space()
                if self.peek() == ",":
                    self.pos += 1
                else:
                    check(self.peek() == ")", f"expected ',' or ')' at position {self.pos} of "
                          f"{self.text!r}")
                self.skip_space()
            self.pos += 1
            value = tuple_of(fields)
        else:
            value = IntTupleConst(self.integer())
        self.skip_space()
        path = []
        while self.peek() == "@":
            self.pos += 1
            path.append(self.integer())
            self.skip_space()
        if not path:
            return value
        # printed innermost-first: restore outermost-first
        return mul(value, IntTupleScaledBasis(ONE, tuple(reversed(path))))

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_space(self):
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def integer(self) -> int:
        self.skip_space()
        start = self.pos
        if self.peek() == "-":
            self.pos += 1
        while self.peek().isdigit():
            self.pos += 1
        digits = self.text[start:self.pos].lstrip("-")
        check(digits != "", f"expected an integer at position {start} of {self.text!r}")
        return int(self.text[start:self.pos])


# =============================================================================================
# The Python view
# =============================================================================================


class ScaledBasis:
    """`value @ mode`: a Python-side basis stride (`2 * E(1)`, `ScaledBasis(2, (1, 0))`)."""

    def __init__(self, value, mode):
        self._value = value
        self._mode = (int(mode),) if isinstance(mode, (int, np.integer)) else tuple(
            int(m) for m in mode)

    @property
    def value(self):
        return self._value

    @property
    def mode(self) -> tuple:
        return self._mode

    def __mul__(self, other):
        return to_python(mul(from_python(self), from_python(other)))

    def __rmul__(self, other):
        return to_python(mul(from_python(other), from_python(self)))

    def __repr__(self):
        return "@".join([str(self._value), *(str(m) for m in reversed(self._mode))])


def E(mode) -> ScaledBasis:  # noqa: N802 - CuTe's name
    """The unit basis of codomain axis `mode` (an int or a path)."""
    return ScaledBasis(1, mode)


def to_python(t: IntTuple):
    """A tree as Python: tuples, ints (static), expressions (dynamic), `ScaledBasis`."""
    if isinstance(t, IntTupleTuple):
        return tuple(to_python(f) for f in t.fields)
    if isinstance(t, IntTupleScaledBasis):
        return ScaledBasis(to_python(t.value), t.basis)
    if isinstance(t, (IntTupleConst, IntTuplePrimExpr)):
        return t.value
    raise TypeError(f"not an IntTuple: {t!r}")


def from_python(value) -> IntTuple:
    """The inverse of `to_python`: nested tuples/lists become branches, ints and expressions
    leaves, `ScaledBasis` basis leaves; an IntTuple passes through."""
    if isinstance(value, IntTuple):
        return value
    if isinstance(value, (tuple, list)):
        return tuple_of(from_python(v) for v in value)
    if isinstance(value, ScaledBasis):
        return IntTupleScaledBasis(from_python(value.value), value.mode)
    if isinstance(value, (int, np.integer, ir.Expr, np.ndarray)) and not isinstance(value, bool):
        return leaf(value)
    raise TypeError(f"cannot convert to IntTuple: {value!r}")


def product(shape):
    """The product of a shape's leaves (an int, or an expression for dynamic extents)."""
    return to_python(product_of(from_python(shape)))


def flatten_to_tuple(value) -> tuple:
    """The leaves of a nested shape/stride as one flat tuple."""
    if isinstance(value, IntTuple):
        value = to_python(value)
    if not isinstance(value, (tuple, list)):
        return (value,)
    return tuple(chain.from_iterable(flatten_to_tuple(x) for x in value))


def congruent(a, b) -> bool:
    return is_congruent(from_python(a), from_python(b))


def compatible(a, b) -> bool:
    return is_compatible(from_python(a), from_python(b))
