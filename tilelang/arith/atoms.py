"""Canonical integer forms: interned atoms, sums of monomials, and rendering back to IR.

A *sum* is a plain dict `{monomial: coefficient}` with int coefficients, never holding a zero
coefficient. A monomial is a tuple of atom ids sorted ascending (repeats for powers); the empty
tuple `()` is the constant term. `{}` is zero. Sums are shared between caches, so every helper
here returns a fresh dict (or one of its inputs unchanged) and never mutates an argument.

An *atom* is whatever the sum form treats as an unknown: a `Var`, a floor division or modulo of
a sum by a positive constant, a min/max of two sums, or an opaque expression (a load, cast,
select, call, bit operation ...) whose children are already simplified. Atoms are interned
globally by structure, so two equal atoms built under different analyzers share one id; an
atom never depends on variable bounds (bounds only decide *which* atom a rule produces).

Structural keys contain only ints, strings and tuples of those: Vars and Buffers overload `==`
to build IR, so they must never sit inside a tuple that a dict might compare on a hash clash.
Objects are mapped to stable ints through `obj_uid` instead (tables keyed by a Var or an Expr
node itself are safe: those hash by identity, and distinct live objects never share a hash).

The tables are cleared by `maybe_reset` when they grow past a limit; `GENERATION` tells the
analyzers that their caches (which hold atom ids) are stale.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.dtype import DType

Binary, Const, Unary = ir.Binary, ir.Const, ir.Unary

# ---- global tables --------------------------------------------------------------------------

ATOMS: list = []            # atom id -> Atom
_BY_KEY: dict = {}          # structural key -> Atom
_VAR_ATOM: dict = {}        # Var -> Atom (dict keyed by identity-hashed Var: safe)
_UIDS: dict = {}            # id(object) -> (object, stable int)
_EKEY: dict = {}            # expression node -> interned structural key (int)
_EKEY_IDS: dict = {}        # structural key tuple -> int
GENERATION = [0]
_LIMIT = 200_000


def maybe_reset():
    """Drop every table when they have grown large (called between top-level requests)."""
    if len(ATOMS) > _LIMIT or len(_EKEY) > 2 * _LIMIT or len(_UIDS) > _LIMIT:
        ATOMS.clear()
        _BY_KEY.clear()
        _VAR_ATOM.clear()
        _UIDS.clear()
        _EKEY.clear()
        _EKEY_IDS.clear()
        GENERATION[0] += 1


def obj_uid(obj) -> int:
    """A stable int per object identity (works for unhashable objects; the table keeps the
    object alive, so its id cannot be reused while listed)."""
    ent = _UIDS.get(id(obj))
    if ent is None:
        ent = _UIDS[id(obj)] = (obj, len(_UIDS))
    return ent[1]


class Atom:
    """One unknown of the sum form. `data` depends on `kind`:
    var: the Var; fdiv/fmod: (sum, divisor); min/max: (sum_a, sum_b);
    opaque: (expr, hint) where hint is extra structure the bound analysis can use."""

    __slots__ = ("id", "kind", "data", "dtype", "skey", "_expr", "_sort_key", "_vars",
                 "partner")

    def __init__(self, kind, data, dtype, skey, expr=None, sort_key=None):
        self.id = len(ATOMS)
        self.kind = kind
        self.data = data
        self.dtype = dtype
        self.skey = skey
        self._expr = expr
        self._sort_key = sort_key
        self._vars = None
        self.partner = None  # fdiv <-> fmod atom of the same sum and divisor, once both exist
        ATOMS.append(self)

    @property
    def sort_key(self):
        """The order of atoms in rendered sums and products: by structure (variable names,
        then kinds and operands), never by the order atoms happened to be created in, so the
        same program renders the same however much was simplified before it."""
        k = self._sort_key
        if k is None:
            k = self._sort_key = _structural_order(self)
        return k

    @property
    def expr(self):
        e = self._expr
        if e is None:
            e = self._expr = _render_atom(self)
        return e

    @property
    def vars(self) -> frozenset:
        """Ids of the var atoms this atom depends on."""
        v = self._vars
        if v is None:
            v = self._vars = _atom_vars(self)
        return v

    def __repr__(self):
        return f"Atom#{self.id}({self.kind}: {self.expr})"


def var_atom(v) -> Atom:
    a = _VAR_ATOM.get(v)
    if a is None:
        a = Atom("var", v, v.dtype, None, expr=v, sort_key=(0, v.name, obj_uid(v)))
        _VAR_ATOM[v] = a
    return a


def sum_key(s: dict) -> tuple:
    """Hashable, order-independent key of a sum (ints and tuples only)."""
    if len(s) == 1:
        return tuple(s.items())
    return tuple(sorted(s.items()))


def intern(kind, data, dtype, key, expr=None) -> Atom:
    a = _BY_KEY.get(key)
    if a is None:
        a = _BY_KEY[key] = Atom(kind, data, dtype, key, expr)
    return a


def find(key):
    return _BY_KEY.get(key)


def divmod_atom(kind, s, c, dtype) -> Atom:
    key = (kind, dtype.name, c, sum_key(s))
    a = _BY_KEY.get(key)
    if a is None:
        a = _BY_KEY[key] = Atom(kind, (s, c), dtype, key)
        other = _BY_KEY.get(("fmod" if kind == "fdiv" else "fdiv",) + key[1:])
        if other is not None:
            a.partner, other.partner = other, a
    return a


def _atom_vars(a: Atom) -> frozenset:
    k = a.kind
    if k == "var":
        return frozenset((a.id,))
    if k in ("fdiv", "fmod"):
        return sum_vars(a.data[0])
    if k in ("min", "max"):
        return sum_vars(a.data[0]) | sum_vars(a.data[1])
    return expr_vars(a.data[0])


def sum_vars(s: dict) -> frozenset:
    out = frozenset()
    for m in s:
        for aid in m:
            out = out | ATOMS[aid].vars
    return out


def expr_vars(e) -> frozenset:
    from ..ir.visitor import collect

    return frozenset(var_atom(v).id for v in collect(e, lambda n: isinstance(n, ir.Var)))


# ---- structural keys of arbitrary expressions -------------------------------------------------


def expr_key(e) -> int:
    """An int that is equal for structurally equal expressions (memoised by identity)."""
    k = _EKEY.get(e)
    if k is not None:
        return k
    t = type(e)
    if t is ir.Var:
        tup = ("v", obj_uid(e))
    elif t is Const:
        v = e.value
        tup = ("c", e.dtype.name, repr(v) if isinstance(v, float) else v)
    elif t is Binary:
        tup = ("b", e.op, e.dtype.name, expr_key(e.a), expr_key(e.b))
    elif t is ir.Compare or t is ir.Logical:
        tup = (t.__name__, e.op, expr_key(e.a), expr_key(e.b))
    elif t is Unary:
        tup = ("u", e.op, e.dtype.name, expr_key(e.a))
    elif t is ir.Select:
        tup = ("s", e.dtype.name, expr_key(e.cond), expr_key(e.true_value),
               expr_key(e.false_value))
    elif t is ir.Cast:
        tup = ("t", e.dtype.name, expr_key(e.value))
    elif t is ir.Load:
        tup = ("l", e.dtype.name, obj_uid(e.buffer), tuple(_arg_key(i) for i in e.indices))
    elif t is ir.Call and e.op not in ir.SIDE_EFFECT_CALLS:
        tup = ("f", e.op, e.dtype.name, tuple(_arg_key(x) for x in e.args), obj_uid(e.attrs))
    else:
        # side-effecting calls and unknown nodes: equal only to themselves
        tup = ("id", obj_uid(e))
    k = _EKEY_IDS.get(tup)
    if k is None:
        k = _EKEY_IDS[tup] = len(_EKEY_IDS)
    _EKEY[e] = k
    return k


def _arg_key(x):
    if isinstance(x, ir.Expr):
        return expr_key(x)
    if isinstance(x, (str, int, float, bool)):
        return ("lit", type(x).__name__, repr(x))
    return ("obj", obj_uid(x))


# ---- sum algebra ------------------------------------------------------------------------------


def s_const(v: int) -> dict:
    return {(): v} if v else {}


def const_of(s: dict) -> int:
    return s.get((), 0)


def is_const(s: dict) -> bool:
    return not s or (len(s) == 1 and () in s)


def s_add(a: dict, b: dict) -> dict:
    if not b:
        return a
    if not a:
        return b
    if len(a) < len(b):
        a, b = b, a
    r = a.copy()
    get = r.get
    for m, k in b.items():
        v = get(m, 0) + k
        if v:
            r[m] = v
        else:
            del r[m]
    return r


def s_sub(a: dict, b: dict) -> dict:
    if not b:
        return a
    r = a.copy()
    get = r.get
    for m, k in b.items():
        v = get(m, 0) - k
        if v:
            r[m] = v
        else:
            del r[m]
    return r


def s_add_const(a: dict, c: int) -> dict:
    if not c:
        return a
    r = a.copy()
    v = r.get((), 0) + c
    if v:
        r[()] = v
    else:
        del r[()]
    return r


def s_scale(a: dict, k: int) -> dict:
    if k == 1:
        return a
    if not k:
        return {}
    return {m: v * k for m, v in a.items()}


def s_mul(a: dict, b: dict) -> dict:
    if not a or not b:
        return {}
    if len(a) == 1 and () in a:
        return s_scale(b, a[()])
    if len(b) == 1 and () in b:
        return s_scale(a, b[()])
    r: dict = {}
    for m1, k1 in a.items():
        for m2, k2 in b.items():
            if not m1:
                m = m2
            elif not m2:
                m = m1
            else:
                m = tuple(sorted(m1 + m2))
            v = r.get(m, 0) + k1 * k2
            if v:
                r[m] = v
            else:
                r.pop(m, None)
    return r


def s_atom(a: Atom, k: int = 1) -> dict:
    return {(a.id,): k}


def single_atom(s: dict):
    """The atom of a sum that is exactly `1 * atom`, else None."""
    if len(s) == 1:
        for m, k in s.items():
            if k == 1 and len(m) == 1:
                return ATOMS[m[0]]
    return None


# ---- rendering -------------------------------------------------------------------------------


def mk_const(v: int, dt: DType) -> Const:
    if dt.bits >= 64 or -2**31 <= v < 2**31:
        return Const(v, dt)
    return ir.const(v, dt)


def _mono_expr(m: tuple, dt: DType):
    if len(m) == 1:
        return ATOMS[m[0]].expr
    atoms = sorted((ATOMS[i] for i in m), key=_sort_key)
    e = atoms[0].expr
    for a in atoms[1:]:
        e = Binary("mul", e, a.expr, dt)
    return e


def _sort_key(a: Atom):
    return a.sort_key


def _sum_order(s: dict) -> tuple:
    return (tuple(order_key(s)), s.get((), 0))


def _structural_order(a: Atom) -> tuple:
    """Var atoms carry (0, name, uid); the others sort after them, by kind and operands (the
    printed expression for opaque ones), the id breaking ties between distinct atoms that
    print alike."""
    if a.kind in ("fdiv", "fmod"):
        s, c = a.data
        key = (_sum_order(s), c)
    elif a.kind in ("min", "max"):
        key = (_sum_order(a.data[0]), _sum_order(a.data[1]))
    else:
        key = (str(a.expr),)
    return (1, a.kind) + key + (a.id,)


def _term_order(item):
    m, k = item
    if len(m) == 1:
        return (k < 0, -abs(k), -1, ATOMS[m[0]].sort_key)
    return (k < 0, -abs(k), -len(m), tuple(ATOMS[i].sort_key for i in m))


def order_key(s: dict):
    """A deterministic order of sums that follows the rendering (names, then coefficients)."""
    return sorted(_term_order(item) for item in s.items() if item[0])


def render(s: dict, dt: DType):
    """Turn a sum back into IR: positive terms first (largest coefficient first), then the
    subtracted ones, the constant last: `x * 8 + y - z * 2 + 3`."""
    if not s:
        return mk_const(0, dt)
    c = s.get((), 0)
    n = len(s) - (1 if c else 0)
    if n == 0:
        return mk_const(c, dt)
    if n == 1:
        for m, k in s.items():
            if m:
                break
        terms = ((m, k),)
    else:
        terms = sorted(((m, k) for m, k in s.items() if m), key=_term_order)
    e = None
    if c > 0 and terms[0][1] < 0:  # no positive term: lead with the constant, `31 - x`
        e, c = mk_const(c, dt), 0
    for m, k in terms:
        t = _mono_expr(m, dt)
        if e is None:
            if k == 1:
                e = t
            elif k == -1:
                e = Unary("neg", t, dt)
            else:
                e = Binary("mul", t, mk_const(k, dt), dt)
        elif k > 0:
            e = Binary("add", e, t if k == 1 else Binary("mul", t, mk_const(k, dt), dt), dt)
        else:
            e = Binary("sub", e, t if k == -1 else Binary("mul", t, mk_const(-k, dt), dt), dt)
    if c > 0:
        e = Binary("add", e, mk_const(c, dt), dt)
    elif c < 0:
        e = Binary("sub", e, mk_const(-c, dt), dt)
    return e


def _render_atom(a: Atom):
    k, dt = a.kind, a.dtype
    if k == "fdiv":
        s, c = a.data
        return Binary("floordiv", render(s, dt), mk_const(c, dt), dt)
    if k == "fmod":
        s, c = a.data
        return Binary("floormod", render(s, dt), mk_const(c, dt), dt)
    if k in ("min", "max"):
        return Binary(k, render(a.data[0], dt), render(a.data[1], dt), dt)
    raise AssertionError(f"atom {k} has no expression")
