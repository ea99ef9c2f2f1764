"""Convert register values two at a time where CUDA has a packed conversion.

Expects: thread IR (after simplify), CUDA only. Guarantees: an unrolled loop whose body is
exactly `D[..., a + v] = T.cast(S[..., b + v], dst)` (v the loop variable, its trip count even,
the other indices and a, b not depending on v, D's last stride 1) becomes

    for p in T.unroll(n / 2):
        tl::store_pair(&D[..., a + 2p], PACKED(S[..., b + 2p], S[..., b + 2p + 1]))

where PACKED is CUDA's two-lane conversion for the pair of types (`__float22half2_rn`,
`__half22float2`, `__float22bfloat162_rn`, `__bfloat1622float2`, `__nv_cvt_float2_to_fp8x2`),
one instruction (F2FP / HADD2.F32 / ...) for two values. Each rounds exactly as the scalar
conversion it replaces (nearest even; fp8 saturating to the largest finite value, as the fp8
constructors do), so the values stored are bit for bit those of the loop it replaces; other
loops are unchanged. This is what T.copy and T.Parallel casts between these types compile to
(the reference also emits these packed conversions).
"""

from __future__ import annotations

from ..arith import Analyzer
from ..ir import nodes as ir
from ..ir.visitor import Mutator, free_vars

VOID = ir.DType("void")

# (source, destination) -> (packed conversion, how the two sources form its operand)
_PACKED = {
    ("float32", "float16"): (("__float22half2_rn",), "make_float2"),
    ("float16", "float32"): (("__half22float2",), "__halves2half2"),
    ("float32", "bfloat16"): (("__float22bfloat162_rn",), "make_float2"),
    ("bfloat16", "float32"): (("__bfloat1622float2",), "__halves2bfloat162"),
    ("float32", "float8_e4m3"): (("__nv_cvt_float2_to_fp8x2", "__NV_SATFINITE", "__NV_E4M3"),
                                 "make_float2"),
    ("float32", "float8_e5m2"): (("__nv_cvt_float2_to_fp8x2", "__NV_SATFINITE", "__NV_E5M2"),
                                 "make_float2"),
}

_MEMORY = ("local", "local.fragment", "shared", "shared.dyn", "global")


def pair_conversions(stmt):
    return _Pair(Analyzer()).visit(stmt)


class _Pair(Mutator):
    def __init__(self, analyzer: Analyzer):
        self.analyzer = analyzer

    def visit_For(self, s):
        body = self.visit(s.body)
        paired = _paired(s, body, self.analyzer)
        if paired is not None:
            return paired
        return s if body is s.body else ir.with_fields(s, body=body)


def _paired(loop: ir.For, body, analyzer):
    n = ir.int_value(loop.extent)
    if loop.kind != "unroll" or n is None or n < 2 or n % 2 or loop.step != 1 or \
            ir.int_value(loop.start) != 0:
        return None
    if not (isinstance(body, ir.Store) and isinstance(body.value, ir.Cast)
            and isinstance(body.value.value, ir.Load)):
        return None
    load = body.value.value
    dst, src = body.buffer, load.buffer
    packed = _PACKED.get((src.dtype.name, body.buffer.dtype.name))
    if packed is None or body.value.dtype is not dst.dtype or load.dtype is not src.dtype:
        return None
    strides = dst.strides
    if dst.scope not in _MEMORY or (strides is not None and strides[-1] != 1):
        return None  # store_pair writes two neighbouring elements
    v = loop.var
    offsets = []
    for indices in (body.indices, load.indices):
        linear = analyzer.detect_linear(indices[-1], v)
        if linear is None or linear[0] != 1 or any(any(x is v for x in free_vars(i)) for i in indices[:-1]):
            return None
        offsets.append(linear[1])
    p = ir.Var("vp", v.dtype)
    even = ir.binary("mul", p, 2)
    a, b = (ir.binary("add", off, even) for off in offsets)
    lanes = [ir.Load(src, load.indices[:-1] + (ir.binary("add", b, r),), src.dtype)
             for r in (0, 1)]
    name_and_flags, operand = packed
    two = ir.Call("call_extern", (operand,) + tuple(lanes), src.dtype.with_lanes(2))
    converted = ir.Call("call_extern", (name_and_flags[0], two) + name_and_flags[1:],
                        dst.dtype.with_lanes(2))
    store = ir.Evaluate(ir.Call("call_extern", (
        "tl::store_pair", ir.Call("address_of", (ir.Load(dst, body.indices[:-1] + (a,), dst.dtype),),
                                 ir.DType("handle")),
        converted), VOID))
    return ir.For(p, ir.const(0), ir.const(n // 2), "unroll", store, 1, loop.annotations,
                  loc=loop.loc)
