"""Integer expressions (int32/int64) to canonical sums, with the division/modulo, min/max and
bit-operation rules that use variable bounds.

Input: any expression whose dtype is int32 or int64. Output: a sum (see `atoms`) equal to it
for every assignment of the variables within the analyzer's ranges, treating values as
mathematical integers (overflow is ignored, as index arithmetic must not overflow anyway).

Rules, each commented where it is applied:
  (a*c + b) // c = a + b // c            (a*c + b) % c = b % c
  (g*a + r) // (g*m) = (a + r//g) // m    (the gcd of divisor and coefficients is cancelled)
  b // c = k, b % c = b - k*c            when b provably lies in [k*c, k*c + c)
  (x // a + r) // b = (x + r*a) // (a*b)   (x % m) // c = (x // c) % (m / c) when c | m
  (x % m) % c = x % c when c | m          x % c + (x // c) * c = x   x - (x // c) * c = x % c
  (d*a + b) // c = a // (c/d), (d*a + b) % c = d * (a % (c/d)) + b   when d | c, 0 <= b < d
  min/max decided by the bound of the difference; common terms pulled out
  truncdiv/truncmod = floor forms for dividends of known sign; x << k = x * 2**k;
  x >> k = x // 2**k (x >= 0); x & (2**k - 1) = x % 2**k;  ~x = -x - 1
Anything else becomes an opaque atom whose children are simplified. Results of the
division/modulo rules are memoised per analyzer (they depend on its ranges).
"""

from __future__ import annotations

from math import gcd

from ..ir import nodes as ir
from . import atoms as A
from . import bounds as B

Binary, Const, Var, Unary = ir.Binary, ir.Const, ir.Var, ir.Unary
ATOMS = A.ATOMS
s_add, s_sub, s_scale, s_const = A.s_add, A.s_sub, A.s_scale, A.s_const
is_const, const_of, render = A.is_const, A.const_of, A.render
I32, I64 = ir.INT32, ir.DType("int64")
MUL_TERMS_LIMIT = 32  # distribute products of sums only up to this many term pairs


def is_canon(dt) -> bool:
    return dt is I32 or dt is I64


def to_sum(ana, e) -> dict:
    s = ana._smemo.get(e)
    if s is not None:
        return s
    t = type(e)
    if t is Binary:
        rule = _RULES.get(e.op)
        s = rule(ana, e) if rule is not None else _opaque_any(ana, e)
    elif t is Var:
        s = {(A.var_atom(e).id,): 1}
    elif t is Const:
        v = e.value
        s = {(): int(v)} if v else {}
    elif t is Unary and e.op == "neg":
        s = s_scale(_child(ana, e.a, e.dtype), -1)
    elif t is Unary and e.op == "bitnot":
        # two's complement: ~x == -x - 1
        s = A.s_add_const(s_scale(_child(ana, e.a, e.dtype), -1), -1)
    else:
        s = _opaque_any(ana, e)
    ana._smemo[e] = s
    return s


def _child(ana, c, dt) -> dict:
    if c.dtype is dt:
        return to_sum(ana, c)
    # a hand-built node whose operand type differs: keep the operand whole
    c = ana._simp(c)
    key = ("op", A.expr_key(c))
    return A.s_atom(A.intern("opaque", (c, ("leaf",)), dt, key, c))


def _operands(ana, e):
    dt, a, b = e.dtype, e.a, e.b
    memo = ana._smemo
    sa = memo.get(a)
    if sa is None:
        if type(a) is Const and a.dtype is dt:
            v = int(a.value)
            sa = {(): v} if v else {}
        else:
            sa = to_sum(ana, a) if a.dtype is dt else _child(ana, a, dt)
    sb = memo.get(b)
    if sb is None:
        if type(b) is Const and b.dtype is dt:
            v = int(b.value)
            sb = {(): v} if v else {}
        else:
            sb = to_sum(ana, b) if b.dtype is dt else _child(ana, b, dt)
    return sa, sb, dt


def _add(ana, e):
    sa, sb, dt = _operands(ana, e)
    return merge_divmod(ana, s_add(sa, sb), dt)


def _sub(ana, e):
    sa, sb, dt = _operands(ana, e)
    return merge_divmod(ana, s_sub(sa, sb), dt)


def _mul(ana, e):
    sa, sb, dt = _operands(ana, e)
    if len(sa) * len(sb) > MUL_TERMS_LIMIT and not is_const(sa) and not is_const(sb):
        return _opaque_bin(ana, "mul", sa, sb, dt, ("leaf",))
    return A.s_mul(sa, sb)


def merge_divmod(ana, s, dt) -> dict:
    """x % c * k + (x // c) * (c*k) -> x * k and x * k - (x // c) * (c*k) -> (x % c) * k.
    Cheap when nothing applies: one pass over the terms."""
    for _ in range(4):
        for m, k in s.items():
            if len(m) != 1:
                continue
            at = ATOMS[m[0]]
            kind = at.kind
            if kind == "fmod":
                fd = at.partner
                if fd is not None:
                    s2, c = at.data
                    if s.get((fd.id,)) == k * c:
                        s = s_add(s_sub(s, {m: k, (fd.id,): k * c}), s_scale(s2, k))
                        break
            elif kind == "fdiv":
                s2, c = at.data
                if k % c:
                    continue
                kk = -k // c
                for m2, v in s2.items():
                    if m2 and s.get(m2) != kk * v:
                        break
                else:
                    s = s_sub(s_sub(s, s_scale(s2, kk)), {m: k})
                    s = s_add(s, s_scale(fmod(ana, s2, c, dt), kk))
                    break
        else:
            return s
    return s


# ---- division and modulo by constants --------------------------------------------------------


def _decided_quotient(ana, r, c):
    """k when every value of r lies in [k*c, k*c + c), else None."""
    lo, hi = B.sum_bound(ana, r)
    if lo is not None and hi is not None and lo // c == hi // c:
        return lo // c
    if ana._sym:
        lo, hi = B.sym_bound(ana, r)
        if lo is not None and hi is not None and lo // c == hi // c:
            return lo // c
    return None


def fdiv(ana, s, c, dt) -> dict:
    """floordiv(s, c) for a constant c > 0 (memoised per analyzer)."""
    if c == 1:
        return s
    key = ("fdiv", dt.name, c, A.sum_key(s))
    r = ana._dmemo.get(key)
    if r is None:
        r = ana._dmemo[key] = _fdiv(ana, s, c, dt)
    return r


def fmod(ana, s, c, dt) -> dict:
    """floormod(s, c) for a constant c > 0 (memoised per analyzer)."""
    if c == 1:
        return {}
    key = ("fmod", dt.name, c, A.sum_key(s))
    r = ana._dmemo.get(key)
    if r is None:
        r = ana._dmemo[key] = _fmod(ana, s, c, dt)
    return r


def _reduce_gcd(r, c):
    """The gcd of c and the coefficients of r's non-constant terms."""
    g = c
    for m, k in r.items():
        if m:
            g = gcd(g, k)
            if g == 1:
                break
    return g


def _small_split(ana, r, c):
    """(d, big) with r == d*big + small and 0 <= small < d for a divisor d of c, or None.
    Then r // c == big // (c/d) and r % c == d * (big % (c/d)) + small."""
    terms = [(m, k) for m, k in r.items() if m]
    if len(terms) < 2:
        return None
    cands = {gcd(c, k) for _, k in terms}
    cands.discard(1)
    for d in sorted(cands, reverse=True):
        big, small = {}, {}
        for m, k in terms:
            if k % d:
                small[m] = k
            else:
                big[m] = k // d
        if not small or not big:
            continue
        r0 = r.get((), 0)
        if r0 // d:
            big[()] = r0 // d
        if r0 % d:
            small[()] = r0 % d
        lo, hi = B.sym_bound(ana, small) if ana._sym else B.sum_bound(ana, small)
        if lo is not None and hi is not None and lo >= 0 and hi < d:
            return d, big, small
    return None


def _fdiv(ana, s, c, dt) -> dict:
    q, r = {}, {}
    for m, k in s.items():
        if m:
            if k % c:
                r[m] = k
            else:
                q[m] = k // c
        else:
            hi, lo = divmod(k, c)  # (a*c + b) // c = a + b // c
            if hi:
                q[()] = hi
            if lo:
                r[()] = lo
    if not r:
        return q
    g = _reduce_gcd(r, c)
    if g > 1:  # (g*a + r) // (g*m) == (a + r // g) // m
        r0 = r.get((), 0) // g
        r = {m: k // g for m, k in r.items() if m}
        if r0:
            r[()] = r0
        c //= g
    k = _decided_quotient(ana, r, c)
    if k is not None:
        return A.s_add_const(q, k)
    split = _small_split(ana, r, c)
    if split is not None:  # (d*a + b) // c == a // (c/d) when 0 <= b < d
        d, big, _ = split
        return s_add(q, fdiv(ana, big, c // d, dt))
    nonconst = len(r) - (1 if () in r else 0)
    if nonconst == 1:
        r0 = r.get((), 0)
        for m, k in r.items():
            if m:
                break
        if k == 1 and len(m) == 1:
            at = ATOMS[m[0]]
            if at.kind == "fdiv":  # (x // a + r0) // c == (x + r0*a) // (a*c)
                s2, a = at.data
                return s_add(q, fdiv(ana, A.s_add_const(s2, r0 * a), a * c, dt))
            if at.kind == "fmod" and r0 == 0 and at.data[1] % c == 0:
                s2, mo = at.data  # (x % mo) // c == (x // c) % (mo // c)
                return s_add(q, fmod(ana, fdiv(ana, s2, c, dt), mo // c, dt))
    return s_add(q, A.s_atom(A.divmod_atom("fdiv", r, c, dt)))


def _fmod(ana, s, c, dt) -> dict:
    r = {}
    inner = False
    for m, k in s.items():
        if m:
            if k % c:  # multiples of c vanish
                r[m] = k
                if len(m) == 1 and ATOMS[m[0]].kind == "fmod":
                    inner = True
        else:
            k %= c
            if k:
                r[()] = k
    if inner:
        # (x % mo) * k contributes like x * k when c divides mo * k
        replaced = False
        for m, k in list(r.items()):
            if len(m) == 1:
                at = ATOMS[m[0]]
                if at.kind == "fmod" and (at.data[1] * k) % c == 0:
                    r = s_add(s_sub(r, {m: k}), s_scale(at.data[0], k))
                    replaced = True
        if replaced:
            return fmod(ana, r, c, dt)
    if not r:
        return r
    g = _reduce_gcd(r, c)
    if g > 1:  # (g*a + r) % (g*m) == g * ((a + r // g) % m) + r % g
        r0 = r.get((), 0)
        r2 = {m: k // g for m, k in r.items() if m}
        if r0 // g:
            r2[()] = r0 // g
        return A.s_add_const(s_scale(fmod(ana, r2, c // g, dt), g), r0 % g)
    k = _decided_quotient(ana, r, c)
    if k is not None:
        return A.s_add_const(r, -k * c)
    split = _small_split(ana, r, c)
    if split is not None:  # (d*a + b) % c == d * (a % (c/d)) + b when 0 <= b < d
        d, big, small = split
        return s_add(s_scale(fmod(ana, big, c // d, dt), d), small)
    return A.s_atom(A.divmod_atom("fmod", r, c, dt))


def _const_divisor(sb):
    if not sb:
        return 0
    if len(sb) == 1:
        return sb.get(())
    return None


def _floordiv(ana, e):
    sa, sb, dt = _operands(ana, e)
    c = _const_divisor(sb)
    if c is not None and c > 0:
        return fdiv(ana, sa, c, dt)
    if c is not None and c < 0:  # floor(a / c) == floor(-a / -c)
        return fdiv(ana, s_scale(sa, -1), -c, dt)
    if c == 0:
        return _opaque_bin(ana, "floordiv", sa, sb, dt, ("leaf",))
    return sym_divmod(ana, "floordiv", sa, sb, dt)


def _floormod(ana, e):
    sa, sb, dt = _operands(ana, e)
    c = _const_divisor(sb)
    if c is not None and c > 0:
        return fmod(ana, sa, c, dt)
    if c is not None and c < 0:  # a mod c == -((-a) mod -c)
        return s_scale(fmod(ana, s_scale(sa, -1), -c, dt), -1)
    if c == 0:
        return _opaque_bin(ana, "floormod", sa, sb, dt, ("leaf",))
    return sym_divmod(ana, "floormod", sa, sb, dt)


def nonneg(ana, s) -> bool:
    lo = B.sum_bound(ana, s)[0]
    if lo is not None and lo >= 0:
        return True
    if ana._sym:
        lo = B.sym_bound(ana, s)[0]
        return lo is not None and lo >= 0
    return False


def nonpos(ana, s) -> bool:
    hi = B.sum_bound(ana, s)[1]
    if hi is not None and hi <= 0:
        return True
    if ana._sym:
        hi = B.sym_bound(ana, s)[1]
        return hi is not None and hi <= 0
    return False


def _mono_quotient(m, mb):
    rest = list(m)
    for aid in mb:
        try:
            rest.remove(aid)
        except ValueError:
            return None
    return tuple(rest)


def sym_divmod(ana, op, sa, sb, dt) -> dict:
    """floordiv/floormod by a non-constant divisor b: split off the multiples of b when b is a
    single monomial, and decide 0 <= a < b from the bounds."""
    if not sa:
        return {}
    if len(sb) == 1:
        for mb, kb in sb.items():
            pass
        q, r = {}, {}
        for m, k in sa.items():
            rest = _mono_quotient(m, mb) if len(m) >= len(mb) and k % kb == 0 else None
            if rest is None:
                r[m] = k
            else:
                q[rest] = k // kb
        if q:  # (q*b + r) // b == q + r // b;  (q*b + r) % b == r % b
            if op == "floordiv":
                return s_add(q, sym_divmod(ana, op, r, sb, dt))
            return sym_divmod(ana, op, r, sb, dt)
    if nonneg(ana, sa) and nonneg(ana, s_sub(A.s_add_const(sb, -1), sa)):
        return {} if op == "floordiv" else sa  # 0 <= a < b
    hint = ("sdiv" if op == "floordiv" else "smod", sa, sb)
    return _opaque_bin(ana, op, sa, sb, dt, hint)


def _trunc(ana, e):
    sa, sb, dt = _operands(ana, e)
    op = e.op
    c = _const_divisor(sb)
    if c:
        ac = abs(c)
        res = None
        if nonneg(ana, sa):
            res = fdiv(ana, sa, ac, dt) if op == "truncdiv" else fmod(ana, sa, ac, dt)
        elif nonpos(ana, sa):
            neg = s_scale(sa, -1)
            res = s_scale(fdiv(ana, neg, ac, dt) if op == "truncdiv" else fmod(ana, neg, ac, dt),
                          -1)
        if res is not None:
            # truncdiv(a, -c) == -truncdiv(a, c); truncmod takes the dividend's sign
            return s_scale(res, -1) if op == "truncdiv" and c < 0 else res
        hint = ("tdiv" if op == "truncdiv" else "tmod", sa, c)
    else:
        hint = ("leaf",)
    return _opaque_bin(ana, op, sa, sb, dt, hint)


def _minmax(ana, e):
    sa, sb, dt = _operands(ana, e)
    return minmax(ana, e.op, sa, sb, dt)


def minmax(ana, op, sa, sb, dt) -> dict:
    d = s_sub(sa, sb)
    if not d:
        return sa
    lo, hi = B.sum_bound(ana, d)
    if (lo is None or lo < 0) and (hi is None or hi > 0) and ana._sym:
        lo, hi = B.sym_bound(ana, d)
    if hi is not None and hi <= 0:  # a <= b
        return sa if op == "min" else sb
    if lo is not None and lo >= 0:  # a >= b
        return sb if op == "min" else sa
    common = {m: k for m, k in sa.items() if sb.get(m) == k}
    if common:  # min(a + t, b + t) == min(a, b) + t
        return s_add(common, minmax(ana, op, s_sub(sa, common), s_sub(sb, common), dt))
    ca, cb = is_const(sa), is_const(sb)
    if ca and not cb:
        sa, sb, ca, cb = sb, sa, cb, ca
    if cb:
        at = A.single_atom(sa)
        if at is not None and at.kind == op and is_const(at.data[1]):
            # min(min(x, c1), c2) == min(x, min(c1, c2))
            c = min if op == "min" else max
            return minmax(ana, op, at.data[0], s_const(c(const_of(at.data[1]), const_of(sb))),
                          dt)
    elif A.order_key(sb) < A.order_key(sa):  # commutative: order operands as rendered
        sa, sb = sb, sa
    ka, kb = A.sum_key(sa), A.sum_key(sb)
    key = (op, dt.name, ka, kb)
    at = A.find(key)
    if at is None:
        at = A.intern(op, (sa, sb), dt, key)
    return A.s_atom(at)


# ---- bit operations ----------------------------------------------------------------------------


def _shl(ana, e):
    sa, sb, dt = _operands(ana, e)
    c = _const_divisor(sb)
    if c is not None and 0 <= c < 63:
        return s_scale(sa, 1 << c)  # x << k == x * 2**k
    return _opaque_bin(ana, "shl", sa, sb, dt, ("bit", "shl", sa, sb))


def _shr(ana, e):
    sa, sb, dt = _operands(ana, e)
    c = _const_divisor(sb)
    if c is not None and 0 <= c < 63 and nonneg(ana, sa):
        return fdiv(ana, sa, 1 << c, dt)  # x >> k == x // 2**k for x >= 0
    return _opaque_bin(ana, "shr", sa, sb, dt, ("bit", "shr", sa, sb))


def _bitand(ana, e):
    sa, sb, dt = _operands(ana, e)
    for x, y in ((sa, sb), (sb, sa)):
        c = _const_divisor(y)
        if c is not None and c >= 0 and (c & (c + 1)) == 0:
            return fmod(ana, x, c + 1, dt)  # x & (2**k - 1) == x mod 2**k (two's complement)
    if sa == sb:
        return sa
    return _opaque_bin(ana, "bitand", sa, sb, dt, ("bit", "bitand", sa, sb))


def _bitop(ana, e):
    sa, sb, dt = _operands(ana, e)
    if sa == sb:
        return {} if e.op == "bitxor" else sa  # x ^ x == 0, x | x == x
    return _opaque_bin(ana, e.op, sa, sb, dt, ("bit", e.op, sa, sb))


def _other_bin(ana, e):
    sa, sb, dt = _operands(ana, e)
    return _opaque_bin(ana, e.op, sa, sb, dt, ("leaf",))


# ---- opaque atoms ------------------------------------------------------------------------------


def _opaque_bin(ana, op, sa, sb, dt, hint) -> dict:
    if is_const(sa) and is_const(sb):
        v = ir._fold_binary(op, const_of(sa), const_of(sb), dt)
        if v is not None:
            return s_const(ir.const(v, dt).value)
    key = ("bin", op, dt.name, A.sum_key(sa), A.sum_key(sb))
    at = A.find(key)
    if at is None:
        ex = Binary(op, render(sa, dt), render(sb, dt), dt)
        at = A.intern("opaque", (ex, hint), dt, key, ex)
    return A.s_atom(at)


def _opaque_any(ana, e) -> dict:
    dt = e.dtype
    t = type(e)
    if t is ir.Select:
        cond = ana.simplify(e.cond)
        if type(cond) is Const:
            return _child(ana, e.true_value if cond.value else e.false_value, dt)
        sa, sb = _child(ana, e.true_value, dt), _child(ana, e.false_value, dt)
        if sa == sb:
            return sa
        key = ("sel", dt.name, A.expr_key(cond), A.sum_key(sa), A.sum_key(sb))
        at = A.find(key)
        if at is None:
            ex = ir.Select(cond, render(sa, dt), render(sb, dt), dt)
            at = A.intern("opaque", (ex, ("sel", sa, sb)), dt, key, ex)
        return A.s_atom(at)
    if t is ir.Cast:
        v = ana.simplify(e.value)
        if type(v) is Const:
            return s_const(ir.const(v.value, dt).value)
        vdt = v.dtype
        if vdt is dt:
            return to_sum(ana, v)
        if type(v) is ir.Cast and v.value.dtype is dt and vdt.is_int and vdt.bits >= dt.bits:
            return to_sum(ana, v.value)  # narrowing back a widened value
        ex = e if v is e.value else ir.Cast(v, dt)
        key = ("op", A.expr_key(ex))
        at = A.find(key)
        if at is None:
            at = A.intern("opaque", (ex, ("cast", v)), dt, key, ex)
        return A.s_atom(at)
    ex = ana.simplify_node(e)
    if type(ex) is Const:
        return s_const(int(ex.value))
    key = ("op", A.expr_key(ex))
    at = A.find(key)
    if at is None:
        at = A.intern("opaque", (ex, ("leaf",)), dt, key, ex)
    return A.s_atom(at)


_RULES = {
    "add": _add, "sub": _sub, "mul": _mul, "floordiv": _floordiv, "floormod": _floormod,
    "truncdiv": _trunc, "truncmod": _trunc, "min": _minmax, "max": _minmax,
    "shl": _shl, "shr": _shr, "bitand": _bitand, "bitor": _bitop, "bitxor": _bitop,
    "pow": _other_bin, "div": _other_bin,
}
