"""`Analyzer`: variable ranges plus the simplifier and the questions lowering asks of it.

An analyzer holds ranges of variables (`bind`, `bind_range`) and caches keyed by expression
identity; changing a range clears the caches. Everything it answers is sound for all values
of the bound variables within their ranges, treating int32/int64 index arithmetic as
mathematical integers (no overflow). Variables without a range are unknown integers.

    ana = Analyzer()
    ana.bind(tx, 0, 128)
    ana.simplify((tx // 32) * 32 + tx % 32)      # tx
    ana.prove(tx < 256)                           # True
    ana.const_int_bound(tx * 4 + 3)              # (3, 511)
    ana.detect_linear(bx * 128 + tx * 4, tx)     # (4, bx * 128)
"""

from __future__ import annotations

from contextlib import contextmanager

from ..ir import nodes as ir
from ..ir.visitor import substitute as _substitute
from . import atoms as A
from . import bounds as B
from . import canonical as C
from . import logic as L

_MEMO_LIMIT = 100_000


def _symbolic_side(bound, op):
    """The non-constant operand of `op(c, e)` / `op(e, c)` with c a constant (a symbolic
    bound implied by the whole), else `bound`."""
    if isinstance(bound, ir.Binary) and bound.op == op:
        a, b = bound.a, bound.b
        if type(a) is ir.Const and type(b) is not ir.Const:
            return b
        if type(b) is ir.Const and type(a) is not ir.Const:
            return a
    return bound


class Analyzer:
    __slots__ = ("_ranges", "_vb", "_sym", "_smemo", "_ememo", "_abound", "_dmemo", "_gen",
                 "_facts")

    def __init__(self):
        self._ranges: dict = {}   # Var -> (lo Expr, hi Expr), inclusive; source of truth
        self._vb: dict = {}       # var atom id -> (lo, hi) constant bounds
        self._sym: dict = {}      # var atom id -> (lo sum | None, hi sum | None) symbolic ends
        self._smemo: dict = {}    # Expr -> sum
        self._ememo: dict = {}    # Expr -> simplified Expr
        self._abound: dict = {}   # atom id -> (lo, hi)
        self._dmemo: dict = {}    # (fdiv|fmod, dtype, c, sum key) -> sum
        self._gen = A.GENERATION[0]
        self._facts: tuple = ()   # simplified conditions assumed true (T.assume)

    # ---- ranges ------------------------------------------------------------------------------
    def bind(self, var, lo, extent):
        """Declare `lo <= var < lo + extent` (ints or expressions)."""
        lo, extent = ir.as_expr(lo), ir.as_expr(extent)
        hi = ir.binary("sub", ir.binary("add", lo, extent), 1)
        self.bind_range(var, lo, hi)

    def bind_range(self, var, lo, hi_inclusive):
        """Declare `lo <= var <= hi_inclusive`; None leaves a side unbounded."""
        if not isinstance(var, ir.Var):
            raise TypeError(f"Analyzer.bind expects a Var, got {type(var).__name__}")
        lo = None if lo is None else ir.as_expr(lo)
        hi = None if hi_inclusive is None else ir.as_expr(hi_inclusive)
        self._enter()
        old = self._ranges.get(var)
        self._ranges[var] = (lo, hi)  # a rebound var keeps its place in the binding order
        if old is None:
            self._install(var, lo, hi)
        elif not (_same_opt(old[0], lo) and _same_opt(old[1], hi)):
            # other ranges may have been computed from the old one (bind(p, 0, n))
            self._rebuild()

    def range_of(self, var):
        """(lo, hi) inclusive as bound (either may be None), or None for an unbound var."""
        return self._ranges.get(var)

    def unbind(self, var):
        if self._ranges.pop(var, None) is not None:
            self._rebuild()

    def assume(self, cond):
        """Take `cond` (a boolean expression; a conjunction is split) as true: `prove` answers
        True for it and for its conjuncts, in the simplified form both take. Ranges are not
        derived from it (bind them too where the condition bounds a variable)."""
        cond = ir.as_expr(cond)
        if isinstance(cond, ir.Logical) and cond.op == "and":
            self.assume(cond.a)
            self.assume(cond.b)
            return
        r = self.simplify(cond)
        if type(r) is not ir.Const:
            self._facts = self._facts + (r,)

    def _implied(self, r) -> bool:
        if isinstance(r, ir.Logical) and r.op == "and":
            return self._implied(r.a) and self._implied(r.b)
        key = A.expr_key(r)
        return any(A.expr_key(f) == key for f in self._facts)

    @contextmanager
    def scope(self):
        """Ranges bound and facts assumed inside the `with` block are dropped when it ends."""
        saved = dict(self._ranges)
        saved_facts = self._facts
        try:
            yield self
        finally:
            self._facts = saved_facts
            self._leave(saved)

    def _leave(self, saved: dict):
        """Go back to the ranges `saved`. When the scope only added variables (a loop's own),
        they are dropped one by one: the other variables' bounds were computed without them,
        and the cached results stay valid unless one looked at a dropped variable's range
        (every such question goes through its atom's entry in `_abound`, see `_install`).
        Anything else (a variable rebound or unbound inside) rebuilds everything."""
        ranges = self._ranges
        kept = all(ranges.get(v) is r for v, r in saved.items())
        if kept and len(ranges) == len(saved):
            return
        if not kept or self._gen != A.GENERATION[0]:
            self._ranges = saved
            self._rebuild()
            return
        looked_at = False
        for var in [v for v in ranges if v not in saved]:
            aid = A.var_atom(var).id
            looked_at = looked_at or aid in self._abound
            self._vb.pop(aid, None)
            self._sym.pop(aid, None)
        self._ranges = saved
        if looked_at:
            self._clear()

    def _clear(self):
        self._smemo.clear()
        self._ememo.clear()
        self._abound.clear()
        self._dmemo.clear()

    def _install(self, var, lo, hi):
        aid = A.var_atom(var).id
        # Cached results stay valid when no cached decision looked at this var's range (a
        # fresh loop var, the usual case while lowering walks into a loop nest): every
        # question about a range goes through the var atom's entry in `_abound`.
        if aid in self._abound or aid in self._vb or aid in self._sym:
            self._clear()
        self._vb.pop(aid, None)
        self._sym.pop(aid, None)
        blo = self._expr_bound(lo)[0] if lo is not None else None
        bhi = self._expr_bound(hi)[1] if hi is not None else None
        # a bound tightened by a condition (`min(31, M - 3)`): the constant side gives the
        # constant bound, the symbolic side the symbolic one
        lo, hi = _symbolic_side(lo, "max"), _symbolic_side(hi, "min")
        slo = shi = None
        if lo is not None and C.is_canon(lo.dtype) and type(lo) is not ir.Const:
            slo = C.to_sum(self, lo)
        if hi is not None and C.is_canon(hi.dtype) and type(hi) is not ir.Const:
            shi = C.to_sum(self, hi)
        self._abound.pop(aid, None)
        self._vb[aid] = (blo, bhi)
        if (slo and not A.is_const(slo)) or (shi and not A.is_const(shi)):
            self._sym[aid] = (slo, shi)

    def _rebuild(self):
        self._vb.clear()
        self._sym.clear()
        self._clear()
        for var, (lo, hi) in list(self._ranges.items()):
            self._install(var, lo, hi)

    def _enter(self):
        """Called at each public entry: keep the caches consistent with the atom tables."""
        A.maybe_reset()
        if self._gen != A.GENERATION[0]:
            self._gen = A.GENERATION[0]
            self._rebuild()
        elif len(self._ememo) > _MEMO_LIMIT or len(self._smemo) > _MEMO_LIMIT:
            self._smemo.clear()
            self._ememo.clear()
            self._dmemo.clear()

    # ---- simplification ----------------------------------------------------------------------
    def simplify(self, e):
        """An equivalent, simpler expression with the same dtype."""
        if not isinstance(e, ir.Expr):
            if isinstance(e, ir.Node):
                raise TypeError(f"simplify expects an expression, got {type(e).__name__}")
            e = ir.as_expr(e)
        self._enter()
        return self._simp(e)

    def _simp(self, e):
        r = self._ememo.get(e)
        if r is not None:
            return r
        t = type(e)
        if t is ir.Var or t is ir.Const:
            return e
        dt = e.dtype
        if dt is C.I32 or dt is C.I64:
            s = C.to_sum(self, e)
            r = A.render(s, dt)
            if _same(e, r):  # already canonical: hand back the caller's node
                r = e
            self._smemo[r] = s
        else:
            r = L.simplify_node(self, e)
        self._ememo[e] = r
        self._ememo[r] = r
        return r

    def simplify_node(self, e):
        """Simplify the children of `e` and fold it, without canonicalising `e` itself."""
        return L.simplify_node(self, e)

    def substitute(self, e, mapping):
        """Replace vars (by identity) with expressions, then simplify."""
        return self.simplify(_substitute(ir.as_expr(e), mapping))

    # ---- questions ---------------------------------------------------------------------------
    def prove(self, cond) -> bool:
        """True only when `cond` holds for every value of the bound variables."""
        if isinstance(cond, (bool, int)) and not isinstance(cond, ir.Expr):
            return bool(cond)
        cond = ir.as_expr(cond)
        if not cond.dtype.is_bool:
            cond = ir.compare("ne", cond, ir.const(0, cond.dtype))
        r = self.simplify(cond)
        if type(r) is ir.Const:
            return bool(r.value)
        return bool(self._facts) and self._implied(r)

    def const_int_bound(self, e):
        """(lo, hi), inclusive, None for an unbounded side."""
        e = ir.as_expr(e)
        self._enter()
        return self._expr_bound(e)

    def _expr_bound(self, e):
        dt = e.dtype
        if C.is_canon(dt):
            s = C.to_sum(self, e)
            return B.sym_bound(self, s) if self._sym else B.sum_bound(self, s)
        t = type(e)
        if t is ir.Const:
            v = e.value
            return (int(v), int(v)) if not isinstance(v, float) else B.UNBOUNDED
        if dt.is_bool:
            r = self._simp(e)
            if type(r) is ir.Const:
                return (int(r.value), int(r.value))
            return (0, 1)
        if dt.is_int:
            rng = B.dtype_range(dt)
            if t is ir.Cast:
                inner = self._expr_bound(e.value)
                if B.fits(inner, B.real_range(dt)):
                    return inner
            return rng
        return B.UNBOUNDED

    def can_prove_equal(self, a, b) -> bool:
        a, b = ir.as_expr(a), ir.as_expr(b)
        if (a.dtype.is_int or a.dtype.is_bool) and (b.dtype.is_int or b.dtype.is_bool):
            return self.prove(ir.compare("eq", a, b))
        self._enter()
        return A.expr_key(self._simp(a)) == A.expr_key(self._simp(b))

    def is_divisible(self, e, k) -> bool:
        """Prove `e % k == 0` (k a positive int)."""
        k = k.value if isinstance(k, ir.Const) else k
        if not isinstance(k, int) or k <= 0:
            raise ValueError(f"is_divisible needs a positive int divisor, got {k!r}")
        e = ir.as_expr(e)
        if not C.is_canon(e.dtype):
            return self.prove(ir.compare("eq", ir.binary("floormod", e, k), 0))
        self._enter()
        if not C.fmod(self, C.to_sum(self, e), k, e.dtype):
            return True
        return bool(self._facts) and self.prove(ir.compare("eq", ir.binary("floormod", e, k), 0))

    def detect_linear(self, e, var):
        """(coef, rest) with e == coef * var + rest and neither part depending on var, or None.
        `coef` is a Python int when constant (an Expr otherwise); `rest` is an Expr."""
        e = ir.as_expr(e)
        if not C.is_canon(e.dtype):
            return None
        self._enter()
        s = C.to_sum(self, e)
        vid = A.var_atom(var).id
        coef, rest = {}, {}
        atoms = A.ATOMS
        for m, k in s.items():
            n = m.count(vid)
            others = m
            if n == 1:
                i = m.index(vid)
                others = m[:i] + m[i + 1:]
            elif n > 1:
                return None
            for aid in others:
                if vid in atoms[aid].vars:
                    return None
            if n:
                coef[others] = coef.get(others, 0) + k
            else:
                rest[m] = k
        coef = {m: k for m, k in coef.items() if k}
        dt = e.dtype
        c = A.const_of(coef) if A.is_const(coef) else A.render(coef, dt)
        return c, A.render(rest, dt)


def _same(a, b) -> bool:
    """Structural equality of rendered arithmetic (Binary/Unary/Var/Const trees only)."""
    while True:
        ta = type(a)
        if ta is not type(b):
            return False
        if ta is ir.Binary:
            if a.op != b.op or a.dtype is not b.dtype or not _same(a.b, b.b):
                return False
            a, b = a.a, b.a
        elif ta is ir.Var:
            return a is b
        elif ta is ir.Const:
            return a.value == b.value and a.dtype is b.dtype
        elif ta is ir.Unary:
            if a.op != b.op:
                return False
            a, b = a.a, b.a
        else:
            return a is b


def _same_opt(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return a is b or A.expr_key(a) == A.expr_key(b)
