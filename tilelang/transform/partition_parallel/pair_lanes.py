"""Compute a vector of 16-bit floats two lanes at a time, as f16x2/bf16x2 values.

Expects: the lane loop that vectorize.py builds for one vector group (`for vi in [0, vec)`:
pure lets, then one store `reg[base + vi] = value` into a register array of float16 or
bfloat16). Guarantees: when the value of lanes 2p and 2p+1 pairs up (below), the loop becomes
`for p in [0, vec/2): reg[base + 2p : base + 2p + 2] = pair`, which computes exactly the same
bits; otherwise the loop is returned unchanged.

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

HALVES = ("float16", "bfloat16")
FLOAT_OPS = ("add", "sub", "mul")


def pair_lanes(loop: ir.For, reg: ir.Buffer, base, analyzer):
    """`loop` (the lane loop over vi storing reg[base + vi]) computing two lanes per
    iteration, or None when its lanes do not pair up."""
    vi, vec = loop.var, ir.int_value(loop.extent)
    if reg.dtype.name not in HALVES or vec is None or vec % 2:
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
    pair = _pair(*lanes)
    if pair is None:
        return None
    store = ir.Store(reg, (ir.binary("add", base, ir.binary("mul", p, 2)),), pair, loc=s.loc)
    return ir.For(p, ir.const(0), ir.const(vec // 2), "unroll", store, 1, loop.annotations,
                  loc=loop.loc)


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
