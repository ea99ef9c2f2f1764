"""Compute a vector of 16-bit floats two lanes at a time, as f16x2/bf16x2 values.

Expects: the lane loop that vectorize.py builds for one vector group (`for vi in [0, vec)`:
pure lets, then one store `reg[base + vi] = value` into a register array of float16 or
bfloat16). Guarantees: when the value of lanes 2p and 2p+1 pairs up (below), the loop becomes
`for p in [0, vec/2): reg[base + 2p : base + 2p + 2] = pair`, which computes exactly the same
bits. Failing that, on a CUDA target, a value that is +, -, * (a product plus a value: fma)
of staged registers `R[off + vi]` (off even) of float16 / bfloat16, or float32 on sm_100,
becomes one packed statement per pair, `tl::store_packed2<P>(&reg[base + 2p], tl::add2(...))`
(the op on P = __half2 / __nv_bfloat162 / float2 pairs, language/packed_x2.py; the fma rounds
once, as the CUDA compiler's contraction of the scalar form does). Otherwise the loop is
returned unchanged.

Lanes pair up through their expressions, lane 2p's and lane 2p+1's side by side:
- the same expression in both (it does not depend on vi % 2): one value broadcast;
- the same float operation (+, -, *) on operands that pair up: that operation on pairs;
- `reinterpret(uint16(X))` and `reinterpret(uint16(X >> 16))` of one 32-bit word X: X is
  the pair (the low half is the even lane).

The last rule is why this exists: a dequantisation written element by element (a 4-bit code
ORed into the bits of 1024.0 and reinterpreted, then shifted and scaled) gives two weights per
32-bit AND/OR when the user extracts lane j % 2 of a word, but the CUDA compiler narrows each
lane to 16-bit operations of its own again. With the pair as one 32-bit value the expansion
is a shift, a LOP3 and two f16x2 operations per two weights instead of about nine
instructions (examples/dequantize_gemm).
"""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.visitor import substitute
from ...language.packed_x2 import LOAD, PACKED_TYPES, STORE

HALVES = ("float16", "bfloat16")
FLOAT_OPS = ("add", "sub", "mul")
PACKED_FLOAT32_SM = 100  # float32 pairs (add/sub/mul/fma .f32x2) from Blackwell on


def pair_lanes(loop: ir.For, reg: ir.Buffer, base, analyzer, sm: int = 0):
    """`loop` (the lane loop over vi storing reg[base + vi]) computing two lanes per
    iteration, or None when its lanes do not pair up. On a CUDA target (`sm`), arithmetic
    over staged registers becomes packed x2 instructions (`_packed_arith`)."""
    vi, vec = loop.var, ir.int_value(loop.extent)
    packed_ok = reg.dtype.name in HALVES or (reg.dtype.name == "float32" and
                                             sm >= PACKED_FLOAT32_SM)
    if not (reg.dtype.name in HALVES or packed_ok) or vec is None or vec % 2:
        return None
    lets, s = {}, loop.body
    while isinstance(s, ir.LetStmt):
        lets[s.var] = substitute(s.value, lets)
        s = s.body
    if not (isinstance(s, ir.Store) and s.buffer is reg and len(s.indices) == 1
            and ir.structural_equal(s.indices[0], ir.binary("add", base, vi))):
        return None
    value = substitute(s.value, lets)
    p = ir.Var("vp", vi.dtype)
    with analyzer.scope():
        analyzer.bind(p, 0, vec // 2)
        lanes = [analyzer.simplify(substitute(value, {vi: 2 * p + r})) for r in (0, 1)]
        even_base = analyzer.is_divisible(ir.as_expr(base), 2)
    start = ir.binary("add", base, ir.binary("mul", p, 2))
    pair = _pair(*lanes) if reg.dtype.name in HALVES else None
    if pair is not None:
        store = ir.Store(reg, (start,), pair, loc=s.loc)
    else:
        ctype = PACKED_TYPES[reg.dtype.name]
        packed = _packed_arith(value, vi, reg.dtype, ctype, analyzer, p) \
            if sm and packed_ok and even_base and isinstance(value, ir.Binary) else None
        if packed is None:
            return None
        store = ir.Evaluate(ir.Call("call_extern", (f"{STORE}{ctype}>",
                                                    ir.address_of(reg, (start,)), packed),
                                    ir.DType("void")), loc=s.loc)
    return ir.For(p, ir.const(0), ir.const(vec // 2), "unroll", store, 1, loop.annotations,
                  loc=loop.loc)


def _packed_arith(e, vi, dt, ctype, analyzer, p):
    """The lane-`vi` expression `e` as packed x2 calls over lanes 2p, 2p+1 (tl::add2, sub2,
    mul2, and fma2 for a product plus a value, as the CUDA compiler contracts them anyway),
    its leaves staged registers `R[off + vi]` (off even) of dtype `dt`; None otherwise."""
    def call(name, *args):
        return ir.Call("call_extern", (name,) + args, ir.DType("handle"))

    if isinstance(e, ir.Load):
        if e.dtype is not dt or e.buffer.scope != "local" or len(e.indices) != 1:
            return None
        off = analyzer.simplify(ir.binary("sub", e.indices[0], vi))
        if any(v is vi for v in _vars(off)) or not analyzer.is_divisible(off, 2):
            return None
        return call(f"{LOAD}{ctype}>", ir.address_of(e.buffer, (ir.binary(
            "add", off, ir.binary("mul", p, 2)),)))
    if not (isinstance(e, ir.Binary) and e.dtype is dt and e.op in FLOAT_OPS):
        return None
    if e.op == "add":
        for prod, other in ((e.a, e.b), (e.b, e.a)):
            if isinstance(prod, ir.Binary) and prod.op == "mul" and prod.dtype is dt:
                args = [_packed_arith(x, vi, dt, ctype, analyzer, p)
                        for x in (prod.a, prod.b, other)]
                if all(a is not None for a in args):
                    return call("tl::fma2", *args)
    a = _packed_arith(e.a, vi, dt, ctype, analyzer, p)
    b = _packed_arith(e.b, vi, dt, ctype, analyzer, p)
    return None if a is None or b is None else call(f"tl::{e.op}2", a, b)


def _vars(e):
    from ...ir.visitor import collect

    return collect(e, lambda n: isinstance(n, ir.Var))


def _pair(even, odd):
    """The two-lane value whose lanes are `even` and `odd`, or None."""
    dt = even.dtype
    if dt.name not in HALVES or odd.dtype is not dt:
        return None
    two = dt.with_lanes(2)
    if ir.structural_equal(even, odd):
        return ir.Call("broadcast", (even,), two)
    if isinstance(even, ir.Binary) and isinstance(odd, ir.Binary) and even.op == odd.op and \
            even.op in FLOAT_OPS:
        a, b = _pair(even.a, odd.a), _pair(even.b, odd.b)
        return None if a is None or b is None else ir.Binary(even.op, a, b, two)
    low, high = _half_of(even), _half_of(odd)
    if low is not None and high is not None and low[1] == 0 and high[1] == 16 and \
            ir.structural_equal(low[0], high[0]):
        return ir.Call("reinterpret", (low[0],), two)
    return None


def _half_of(e):
    """(X, shift) when `e` is reinterpret(uint16(X >> shift)) of a 32-bit unsigned X."""
    if not (isinstance(e, ir.Call) and e.op == "reinterpret"):
        return None
    c = e.args[0]
    if not (isinstance(c, ir.Cast) and c.dtype.name == "uint16"):
        return None
    x, shift = c.value, 0
    if isinstance(x, ir.Binary) and x.op == "shr" and ir.int_value(x.b) is not None:
        x, shift = x.a, ir.int_value(x.b)
    if x.dtype.name != "uint32":
        return None
    return x, shift
