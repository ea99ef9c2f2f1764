"""Scalar math on kernel values (and on plain Python numbers, folded at trace time)."""

from __future__ import annotations

import math as _pymath

from ..frontend.builder import defer_error, error
from ..ir import nodes as ir
from ..ir.dtype import DType

# unary float functions: integer arguments are converted to float32 first
_FLOAT_UNARY = ("exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "expm1", "tanh", "sin",
                "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "erf", "sigmoid", "rsqrt",
                "floor", "ceil", "round", "trunc", "nearbyint", "rcp")


def _float_unary(op, doc=None):
    def fn(x):
        e = ir.as_expr(x)
        if not e.dtype.is_float:
            e = ir.cast_to(e, "float32")
        return ir.Call(op, (e,), e.dtype)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc or f"Element-wise {op} (integers are converted to float32)."
    return fn


exp, exp2, exp10, log, log2, log10, log1p, expm1, tanh, sin, cos, tan, asin, acos, atan, sinh, \
    cosh, erf, sigmoid, rsqrt, floor, ceil, _round_away, trunc, nearbyint, rcp = \
    (_float_unary(op) for op in _FLOAT_UNARY)

_ROUNDING = {"ties-to-even": nearbyint, "ties-away-from-zero": _round_away}


def round(x, rounding_mode="ties-to-even"):  # noqa: A001 - the T.round name
    """Round to the nearest integer (integers are converted to float32). Ties go to the even
    neighbour (`rounding_mode="ties-to-even"`, the default: CUDA `nearbyint`, numpy `rint`)
    or away from zero (`rounding_mode="ties-away-from-zero"`: C `round`)."""
    if rounding_mode is None:
        rounding_mode = "ties-to-even"
    fn = _ROUNDING.get(rounding_mode) if isinstance(rounding_mode, str) else None
    if fn is None:
        raise error(ValueError, f"Unsupported T.round rounding_mode {rounding_mode!r}; expected "
                                "'ties-to-even' or 'ties-away-from-zero'")
    return fn(x)


def sqrt(x):
    """Square root (an integer argument keeps its type, as in the reference)."""
    e = ir.as_expr(x)
    return ir.Call("sqrt", (e,), e.dtype)


def abs(x):  # noqa: A001 - the T.abs name
    """Absolute value."""
    e = ir.as_expr(x)
    if isinstance(e, ir.Const):
        return ir.const(-e.value if e.value < 0 else e.value, e.dtype)
    return ir.Call("abs", (e,), e.dtype)


fabs = abs


def max(a, b, *rest):  # noqa: A001
    """Largest of two or more values."""
    if rest:
        raise error(TypeError, "T.max takes exactly two arguments")
    return ir.binary("max", a, b)


def min(a, b, *rest):  # noqa: A001
    """Smallest of two or more values."""
    if rest:
        raise error(TypeError, "T.min takes exactly two arguments")
    return ir.binary("min", a, b)


def pow(a, b):  # noqa: A001
    """`a` raised to `b`."""
    ea, eb = ir.as_expr(a), ir.as_expr(b)
    dt = ir.promote(ea.dtype, eb.dtype)
    if not dt.is_float:
        dt = DType("float32")
    return ir.Call("pow", (ir.cast_to(ea, dt), ir.cast_to(eb, dt)), dt)


def fmod(a, b):
    """Floating-point remainder with the sign of `a` (C fmod)."""
    ea, eb = ir.as_expr(a), ir.as_expr(b)
    dt = ir.promote(ea.dtype, eb.dtype)
    return ir.Call("fmod", (ir.cast_to(ea, dt), ir.cast_to(eb, dt)), dt)


def atan2(a, b):
    """Arc tangent of a/b using both signs for the quadrant."""
    ea, eb = ir.as_expr(a), ir.as_expr(b)
    dt = ir.promote(ea.dtype, eb.dtype)
    return ir.Call("atan2", (ir.cast_to(ea, dt), ir.cast_to(eb, dt)), dt)


def isnan(x):
    """True where `x` is NaN."""
    return ir.Call("isnan", (ir.as_expr(x),), DType("bool"))


def isinf(x):
    """True where `x` is +inf or -inf."""
    return ir.Call("isinf", (ir.as_expr(x),), DType("bool"))


def isfinite(x):
    """True where `x` is neither infinite nor NaN."""
    return ir.Call("isfinite", (ir.as_expr(x),), DType("bool"))


def if_then_else(cond, a, b):
    """`a` where `cond` holds, else `b` (both evaluated; common type of a and b)."""
    return ir.select(cond, a, b)


def Select(cond, a, b):  # noqa: N802
    """`a` where `cond` holds, else `b`; both are evaluated (T.if_then_else)."""
    return ir.select(cond, a, b)


def infinity(dtype="float32"):
    """Positive infinity of a floating dtype."""
    dt = DType(dtype)
    return ir.const(_pymath.inf, dt)


def max_value(dtype):
    """The largest finite value of `dtype`."""
    dt = DType(dtype)
    return ir.const(dt.max_value(), dt)


def min_value(dtype):
    """The lowest finite value of `dtype`."""
    dt = DType(dtype)
    return ir.const(dt.min_value(), dt)


def ceildiv(a, b):
    """`(a + b - 1) // b` for integers (folded for Python ints)."""
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return ir.binary("floordiv", ir.binary("add", a, ir.binary("sub", b, 1)), b)


def align_up(a, b):
    """`a` rounded up to a multiple of `b`: `T.ceildiv(a, b) * b`."""
    c = ceildiv(a, b)
    return c * b if isinstance(c, int) and isinstance(b, int) else ir.binary("mul", c, b)


def floordiv(a, b):
    """Division rounding towards negative infinity (Python's `//`)."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return ir.binary("floordiv", a, b)


def floormod(a, b):
    """Remainder with the sign of the divisor (Python's `%`)."""
    if isinstance(a, int) and isinstance(b, int):
        return a % b
    return ir.binary("floormod", a, b)


def truncdiv(a, b):
    """Division rounding towards zero (C's `/`); T.div is the same."""
    return ir.binary("truncdiv", a, b)


def truncmod(a, b):
    """Remainder with the sign of the dividend (C's `%`)."""
    return ir.binary("truncmod", a, b)


div = truncdiv
indexdiv, indexmod = floordiv, floormod


# the reference's PTX-style rounding modifiers of T.cast ("" is the conversion's default)
_VALID_CAST_ROUNDING_MODES = {"", "rn", "rz", "rp", "rm", "rs"}
# the targets of stochastic rounding, as its error messages name them
_RS_TARGETS = {"float16": "FP16", "bfloat16": "BF16", "float8_e4m3": "FP8",
               "float8_e5m2": "FP8", "float4_e2m1fn": "FP4"}


def cast(value, dtype, round: str = "", sat: bool = True, rbits=None):  # noqa: A002
    """Convert to `dtype` (C conversion: float to int truncates; to a narrower float: round to
    nearest even, float8 saturating to its largest finite value).

    `round`, `sat` and `rbits` are the reference's PTX-style rounding options, checked as it
    checks them. As in the reference, "rn", "rz", "rp" and "rm" are reserved (the conversion
    rounds as it always does) and `sat` matters only with "rs". `round="rs"` (stochastic
    rounding with the random bits `rbits`, PTX `cvt.rs`) needs sm_100a, which this TileLang
    does not target: a located error when the function is compiled."""
    if round not in _VALID_CAST_ROUNDING_MODES:
        raise error(ValueError, f"Invalid round '{round}'. Must be one of: "
                                f"{sorted(_VALID_CAST_ROUNDING_MODES)}")
    if not isinstance(sat, bool):
        raise error(ValueError, f"Invalid sat '{sat}'. Must be a bool (True for satfinite, "
                                "False for no saturation)")
    if round == "rs" and rbits is None:
        raise error(ValueError, "rbits is required when round='rs' (stochastic rounding)")
    if round != "rs" and rbits is not None:
        raise error(ValueError, "rbits is only valid with round='rs' (stochastic rounding)")
    if round == "rs":
        dst = DType(dtype)
        src = ir.as_expr(value).dtype
        tag = _RS_TARGETS.get(dst.name)
        if src.name != "float32" or tag is None:
            raise error(ValueError, f"T.cast(round='rs'): stochastic rounding converts float32 "
                                    f"to float16, bfloat16, float8 or float4_e2m1fn, not {src} "
                                    f"to {dst}")
        # raised when the function is compiled, as the reference's lowering raises them (the
        # target decides there)
        if not sat:
            defer_error(ValueError, f"T.cast(round='rs', sat=False): sat=false is not "
                                    f"supported for stochastic rounding f32 -> {tag.lower()}")
        else:
            defer_error(NotImplementedError, f"T.cast(round='rs'): Stochastic rounding "
                                             f"f32-to-{tag} requires sm_100a (PTX cvt.rs), a "
                                             "target this TileLang does not have (sm_80 / sm_90 "
                                             "and the CPU interpreter)")
    return ir.cast_to(value, dtype)


def Cast(dtype, value):  # noqa: N802 - the reference's (TVM's) name and argument order
    """`T.Cast(dtype, value)`: `value` converted to `dtype` (TVM's argument order; the
    `T.cast(value, dtype)` order is accepted too)."""
    from ..ir.dtype import is_dtype_like

    if is_dtype_like(value) and not is_dtype_like(dtype):  # T.cast's order
        dtype, value = value, dtype
    return ir.cast_to(value, dtype)


def clamp(x, min_val=None, max_val=None):
    """`min(max(x, min_val), max_val)` (either bound may be omitted; the reference's keyword
    names)."""
    if min_val is not None:
        x = ir.binary("max", x, min_val)
    if max_val is not None:
        x = ir.binary("min", x, max_val)
    return ir.as_expr(x)


def bitwise_and(a, b):
    """Bitwise AND of integers (`a & b`)."""
    return ir.binary("bitand", a, b)


def bitwise_or(a, b):
    """Bitwise OR of integers (`a | b`)."""
    return ir.binary("bitor", a, b)


def bitwise_xor(a, b):
    """Bitwise XOR of integers (`a ^ b`)."""
    return ir.binary("bitxor", a, b)


def bitwise_not(a):
    """Bitwise NOT of an integer (`~a`)."""
    return ir.unary("bitnot", a)


def shift_left(a, b):
    """`a << b` on integers."""
    return ir.binary("shl", a, b)


def shift_right(a, b):
    """`a >> b` on integers (arithmetic for signed types)."""
    return ir.binary("shr", a, b)


def reinterpret(value, dtype=None):
    """Reinterpret the bits of a value as another type of the same width."""
    if isinstance(value, (str, DType)) and dtype is not None and not isinstance(dtype, (str,
                                                                                        DType)):
        value, dtype = dtype, value  # reference order: T.reinterpret(dtype, value)
    dt = DType(dtype)
    from .vectors import Vector, VectorVar

    if isinstance(value, (Vector, VectorVar)) or dt.lanes > 1:
        return _reinterpret_lanes(value, dt)
    e = ir.as_expr(value)
    if dt.bits * dt.lanes != e.dtype.bits * e.dtype.lanes:
        raise error(ValueError, f"T.reinterpret: {e.dtype} and {dt} differ in width")
    return ir.Call("reinterpret", (e,), dt)


def _reinterpret_lanes(value, dt: DType):
    """The bits of a vector (`T.ldg64(...)`, `T.float16x2(a, b)`) or scalar as `dt`: a vector
    of dt's lanes (a scalar for one lane). Lanes of one width are reinterpreted one by one;
    otherwise the bits are regrouped in memory order (two float16 lanes make one 32-bit lane,
    the first in the low half)."""
    from ..ir import bits as ir_bits
    from .vectors import Vector, VectorVar

    if isinstance(value, VectorVar):
        value = value.value()
    lanes = value.lanes if isinstance(value, Vector) else (ir.as_expr(value),)
    if any(x.dtype.lanes != 1 for x in lanes):
        raise error(NotImplementedError, "T.reinterpret of a vector-typed expression: give "
                                         "its lanes as a vector (T.ldg64(...), T.float32x2(a, b))")
    src_bits = sum(x.dtype.bits for x in lanes)
    base = DType(dt.base) if dt.lanes > 1 else dt
    if src_bits != base.bits * dt.lanes:
        raise error(ValueError, f"T.reinterpret: {len(lanes)} x {lanes[0].dtype} "
                                f"({src_bits} bits) and {dt} differ in width")
    if all(x.dtype.bits == base.bits for x in lanes):
        out = tuple(x if x.dtype is base else ir.Call("reinterpret", (x,), base) for x in lanes)
    else:
        try:
            out = ir_bits.unpack_words(ir_bits.pack_words(lanes), base)
        except (TypeError, ValueError) as e:
            raise error(TypeError, f"T.reinterpret: {e}") from None
    return out[0] if len(out) == 1 else Vector(out)


def fast_exp(x):
    """`e**x` with the fast hardware approximation (float32; other types are converted)."""
    e = ir.as_expr(x)
    return ir.Call("fast_exp", (ir.cast_to(e, "float32"),), DType("float32"))


def fast_rcp(x):
    """`1/x` with the fast hardware approximation on float32 (`rcp.approx`, about 1 ulp; other
    float types: the exact reciprocal; integers are converted to float32). The CPU interpreter
    computes the exact reciprocal."""
    e = ir.as_expr(x)
    if not e.dtype.is_float:
        e = ir.cast_to(e, "float32")
    return ir.Call("fast_rcp", (e,), e.dtype)


# ---- IEEE operations with an explicit rounding mode (the reference's T.ieee_*) -------------------
# One correctly rounded operation whose result is rounded as `rounding_mode` says: "rn" to
# nearest (ties to even), "rz" toward zero, "ru" toward +inf, "rd" toward -inf. float32 and
# float64 take all four (CUDA __fadd_rz, __dmul_ru, ...); float16 and bfloat16 only "rn".
# They are never contracted or approximated, with or without fast math.

IEEE_ROUNDING_MODES = ("rn", "rz", "ru", "rd")


def _ieee(op, args, rounding_mode):
    if not (isinstance(rounding_mode, str) and rounding_mode in IEEE_ROUNDING_MODES):
        raise error(ValueError, f"Invalid rounding mode {rounding_mode!r}. Must be one of: "
                                f"{set(IEEE_ROUNDING_MODES)}")
    exprs = [ir.as_expr(a) for a in args]
    dt = exprs[0].dtype
    for e in exprs[1:]:
        dt = ir.promote(dt, e.dtype)
    if not dt.is_float:
        dt = DType("float32")
    if dt.name not in ("float16", "bfloat16", "float32", "float64"):
        raise error(TypeError, f"T.{op} takes float16, bfloat16, float32 or float64 operands, "
                               f"got {dt}")
    if dt.bits == 16 and rounding_mode != "rn":
        raise error(ValueError, f"T.{op}: Only rounding mode 'rn' is available for half "
                                f"precision ({dt}), got {rounding_mode!r}")
    if op == "ieee_frsqrt" and dt.name == "float64":
        raise error(TypeError, "T.ieee_frsqrt: frsqrt is not supported for float64 (CUDA has no "
                               "correctly rounded double-precision reciprocal square root)")
    return ir.Call(op, tuple(ir.cast_to(e, dt) for e in exprs), dt,
                   (("rounding_mode", rounding_mode),))


def ieee_add(x, y, rounding_mode="rn"):
    """`x + y` rounded as `rounding_mode` says ("rn", "rz", "ru", "rd")."""
    return _ieee("ieee_add", (x, y), rounding_mode)


def ieee_sub(x, y, rounding_mode="rn"):
    """`x - y` rounded as `rounding_mode` says ("rn", "rz", "ru", "rd")."""
    return _ieee("ieee_sub", (x, y), rounding_mode)


def ieee_mul(x, y, rounding_mode="rn"):
    """`x * y` rounded as `rounding_mode` says ("rn", "rz", "ru", "rd")."""
    return _ieee("ieee_mul", (x, y), rounding_mode)


def ieee_fmaf(x, y, z, rounding_mode="rn"):
    """`x * y + z` with one rounding, as `rounding_mode` says ("rn", "rz", "ru", "rd")."""
    return _ieee("ieee_fmaf", (x, y, z), rounding_mode)


def ieee_frcp(x, rounding_mode="rn"):
    """`1 / x` rounded as `rounding_mode` says ("rn", "rz", "ru", "rd")."""
    return _ieee("ieee_frcp", (x,), rounding_mode)


def ieee_fsqrt(x, rounding_mode="rn"):
    """`sqrt(x)` rounded as `rounding_mode` says ("rn", "rz", "ru", "rd")."""
    return _ieee("ieee_fsqrt", (x,), rounding_mode)


def ieee_frsqrt(x):
    """`1 / sqrt(x)` rounded to nearest (float32, float16, bfloat16; not float64)."""
    return _ieee("ieee_frsqrt", (x,), "rn")


def ieee_fdiv(x, y, rounding_mode="rn"):
    """`x / y` rounded as `rounding_mode` says ("rn", "rz", "ru", "rd")."""
    return _ieee("ieee_fdiv", (x, y), rounding_mode)


def __exp2(x):  # noqa: N802
    return exp2(x)


# ---- fast-math intrinsics (the reference's T.__exp, T.__log, ...) --------------------------------
# On float32 they lower to CUDA's approximate intrinsics (__expf, __logf, __sinf, ...: a few ulp
# of error, larger for big |x| in the trigonometric ones); other float types use the accurate
# functions. The interpreter computes them accurately.

def _fast_unary(op, cuda_name, what):
    def fn(x):
        e = ir.as_expr(x)
        # the reference rejects what has no fast-math form (integers, bool, float8)
        if not e.dtype.is_float or e.dtype.is_float8 or e.dtype.is_float4():
            raise error(TypeError, f"T.{op} only supports floating-point inputs, but got "
                                   f"{e.dtype}")
        return ir.Call(op, (e,), e.dtype)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = (f"{what} with CUDA's fast approximate `{cuda_name}` on float32 (float16, "
                  "bfloat16, float64: the accurate function). Other types are a TypeError.")
    return fn


__exp = _fast_unary("__exp", "__expf", "`e**x`")
__exp10 = _fast_unary("__exp10", "__exp10f", "`10**x`")
__log = _fast_unary("__log", "__logf", "Natural logarithm")
__log2 = _fast_unary("__log2", "__log2f", "Base-2 logarithm")
__log10 = _fast_unary("__log10", "__log10f", "Base-10 logarithm")
__sin = _fast_unary("__sin", "__sinf", "Sine")
__cos = _fast_unary("__cos", "__cosf", "Cosine")
__tan = _fast_unary("__tan", "__tanf", "Tangent")


# ---- branch hints and bit counting ---------------------------------------------------------------

def likely(cond):
    """Branch hint: `cond` is expected to hold. Returns `cond` unchanged (the generated code is
    the same with or without the hint)."""
    return cond


def _int_operand(x, what):
    e = ir.as_expr(x)
    if not e.dtype.is_int or e.dtype.lanes != 1:
        raise error(TypeError, f"T.{what} needs a scalar integer, got {e.dtype}")
    return e


def popcount(x):
    """Number of set bits in the integer `x` (its two's-complement bits, in the width of its
    type; the result has the type of `x`). CUDA `__popc` / `__popcll`."""
    e = _int_operand(x, "popcount")
    if isinstance(e, ir.Const):
        return ir.const(bin(int(e.value) & ((1 << e.dtype.bits) - 1)).count("1"), e.dtype)
    return ir.Call("popcount", (e,), e.dtype)


def clz(x):
    """Number of leading zero bits of the integer `x` in the width of its type (`clz(0)` is the
    width), as int32. CUDA `__clz` / `__clzll`."""
    e = _int_operand(x, "clz")
    if isinstance(e, ir.Const):
        bits = e.dtype.bits
        return ir.const(bits - (int(e.value) & ((1 << bits) - 1)).bit_length(), "int32")
    return ir.Call("clz", (e,), DType("int32"))
