"""Vector values of the reference's TIR: `T.Ramp(base, stride, lanes)` as an index and
`T.Broadcast(value, lanes)`.

    B[t, T.Ramp(0, 1, 4)] = A[T.Ramp(t - 2, 1, 4)]     # four elements at once
    packed[0:32] = T.Broadcast(src[0], 32)             # one value in 32 lanes

Here a vector is a trace-time value: a `Vector` holds one scalar expression per lane, an
index with a `RampIndex` loads or stores lane by lane, and arithmetic on vectors is lane-wise.
`T.alloc_var(T.float16x2)` is a `VectorVar`: one private element per lane, assigned a vector by
name (`packed = T.float16x2(a, b)`) and read lane by lane (`T.extract_lane(packed, 1)`).
The generated code is the same as for the per-element statements (nvcc vectorises what it
can). A lane index that may be negative counts from the end of its dimension, as the
reference's `LegalizeNegativeIndex` does for vector indices: lane `i` becomes
`i < 0 ? i + extent : i` (folded where the sign is known).
"""

from __future__ import annotations

from ..frontend.builder import error
from ..ir import hooks as ir_hooks
from ..ir import nodes as ir
from .packed_x2 import OPS, lane_value


class RampIndex:
    """`T.Ramp(base, stride, lanes)`: the indices base, base + stride, ... (lanes of them)."""

    __slots__ = ("base", "stride", "lanes")

    def __init__(self, base, stride, lanes):
        if isinstance(lanes, ir.Const):
            lanes = lanes.value
        if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1:
            raise error(ValueError, f"T.Ramp lanes must be a positive int, got {lanes!r}")
        self.base, self.stride, self.lanes = ir.as_expr(base), ir.as_expr(stride), lanes
        for what, e in (("base", self.base), ("stride", self.stride)):
            if not e.dtype.is_int:
                raise error(TypeError, f"T.Ramp {what} must be an integer, got {e.dtype}")

    def lane(self, i):
        return ir.binary("add", self.base, ir.binary("mul", self.stride, i))

    def __repr__(self):
        return f"T.Ramp({self.base}, {self.stride}, {self.lanes})"


def _lane_binary(op):
    def fn(self, other):
        return self._zip(other, lambda a, b: getattr(ir.as_expr(a), op)(b))

    def rfn(self, other):
        return self._zip(other, lambda a, b: getattr(ir.as_expr(b), op)(a))
    return fn, rfn


class Vector:
    """A vector value: one scalar expression per lane (see the module docstring)."""

    __slots__ = ("lanes",)
    __tl_vector__ = True  # assigned to a vector T.alloc_var, it is stored (frontend.hooks)

    def __init__(self, lanes):
        self.lanes = tuple(ir.as_expr(x) for x in lanes)

    @property
    def dtype(self):
        return self.lanes[0].dtype

    def __len__(self):
        return len(self.lanes)

    def __getitem__(self, i):
        return self.lanes[i]

    def __iter__(self):
        return iter(self.lanes)

    def _zip(self, other, fn):
        if isinstance(other, VectorVar):
            other = other.value()
        if isinstance(other, Vector):
            if len(other) != len(self):
                raise error(ValueError, f"vectors of {len(self)} and {len(other)} lanes do "
                                        "not combine")
            return Vector(fn(a, b) for a, b in zip(self.lanes, other.lanes))
        return Vector(fn(a, other) for a in self.lanes)

    __add__, __radd__ = _lane_binary("__add__")
    __sub__, __rsub__ = _lane_binary("__sub__")
    __mul__, __rmul__ = _lane_binary("__mul__")
    __truediv__, __rtruediv__ = _lane_binary("__truediv__")
    __floordiv__, __rfloordiv__ = _lane_binary("__floordiv__")
    __mod__, __rmod__ = _lane_binary("__mod__")
    __and__, __rand__ = _lane_binary("__and__")
    __or__, __ror__ = _lane_binary("__or__")
    __xor__, __rxor__ = _lane_binary("__xor__")
    __lshift__, __rlshift__ = _lane_binary("__lshift__")
    __rshift__, __rrshift__ = _lane_binary("__rshift__")

    def __neg__(self):
        return Vector(-x for x in self.lanes)

    def map(self, fn):
        """The vector of fn(lane) for each lane."""
        return Vector(fn(x) for x in self.lanes)

    def is_broadcast(self) -> bool:
        first = self.lanes[0]
        return all(x is first for x in self.lanes)

    def __repr__(self):
        return f"Vector({', '.join(map(str, self.lanes))})"


class VectorVar:
    """`T.alloc_var` of a vector dtype: a thread-private buffer of one element per lane.
    Assigning it by name stores a vector (or one scalar into every lane); reading it gives
    the vector of its lanes."""

    __slots__ = ("buffer", "dtype")
    __tl_ref__ = True  # `name = value` stores (frontend.hooks.is_mutable_scalar)

    def __init__(self, buffer, dtype):
        self.buffer, self.dtype = buffer, dtype

    @property
    def lanes(self) -> int:
        return self.buffer.shape[0]

    def store(self, value):
        from .indexing import store_element

        if not isinstance(value, Vector):
            value = Vector((ir.as_expr(value),) * self.lanes)
        if len(value) != self.lanes:
            raise error(ValueError, f"a vector of {len(value)} lanes assigned to a "
                                    f"{self.dtype} variable")
        for i, x in enumerate(value):
            store_element(self.buffer, (ir.const(i),), x)

    def lane(self, i: int):
        return ir.Load(self.buffer, (ir.const(i),), self.buffer.dtype)

    def value(self) -> Vector:
        return Vector(self.lane(i) for i in range(self.lanes))

    def __repr__(self):
        return f"VectorVar({self.buffer.name}: {self.dtype})"


def _value_op(name):
    return lambda self, *other: getattr(self.value(), name)(*other)


# arithmetic on a vector variable is arithmetic on the vector of its lanes
for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
              "__rmod__", "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__",
              "__lshift__", "__rlshift__", "__rshift__", "__rrshift__", "__neg__"):
    setattr(VectorVar, _name, _value_op(_name))


def extract_lane(vector, lane):
    """Lane `lane` (a compile-time int) of a vector: a `T.alloc_var` of a vector dtype or a
    vector value (`T.float16x2(a, b)`, `T.Broadcast`), as a scalar of the element type."""
    if isinstance(lane, ir.Const) and lane.dtype.is_int:
        lane = lane.value
    if isinstance(vector, VectorVar):
        lanes = vector.lanes
    elif isinstance(vector, Vector):
        lanes = len(vector)
    elif isinstance(vector, ir.Expr):
        lanes = vector.dtype.lanes
        if lanes == 1:
            raise error(ValueError, f"T.extract_lane expects a vector expression, got a scalar "
                                    f"of {vector.dtype}")
    else:
        raise error(TypeError, f"T.extract_lane expects a PrimExpr (a vector), got "
                               f"{type(vector).__name__}")
    if isinstance(lane, bool) or not isinstance(lane, int):
        raise error(TypeError, f"T.extract_lane takes the lane as a compile-time integer, got "
                               f"{lane!r}")
    if not 0 <= lane < lanes:
        raise error(IndexError, f"T.extract_lane: lane {lane} is out of bounds for a vector of "
                                f"{lanes} lanes")
    if isinstance(vector, VectorVar):
        return vector.lane(lane)
    if isinstance(vector, Vector):
        return vector.lanes[lane]
    raise error(NotImplementedError, "T.extract_lane of a vector-typed kernel variable: this "
                                     "compiler keeps vectors as lanes (T.alloc_var of a vector "
                                     "dtype, T.float16x2(a, b)); extract from one of those")


# ---- packed x2 math (the reference's T.add2 ... T.abs2) ---------------------------------------
_PACKED_X2 = ("bfloat16x2", "float16x2", "float32x2")


def _packed_x2(op, args):
    """The operands of a packed x2 operation as Vectors, checked as the reference checks them:
    each a float32x2 / float16x2 / bfloat16x2 vector, all of one dtype."""
    dtypes, vectors = [], []
    for a in args:
        if isinstance(a, VectorVar):
            a = a.value()
        if isinstance(a, Vector):
            dt = str(a.dtype.with_lanes(len(a)))
        elif isinstance(a, ir.Expr):
            dt = str(a.dtype)
        else:
            raise error(TypeError, f"T.{op}: Expected PrimExpr, got {type(a).__name__}: {a!r}")
        if dt not in _PACKED_X2:
            raise error(ValueError, f"T.{op}: Expected dtype in {list(_PACKED_X2)}, got '{dt}'")
        dtypes.append(dt)
        vectors.append(a)
    if len(set(dtypes)) > 1:
        raise error(ValueError, f"T.{op}: Expected all packed x2 arguments to have the same "
                                f"dtype, got {dtypes}")
    if not all(isinstance(v, Vector) for v in vectors):
        raise error(NotImplementedError, f"T.{op} of a vector-typed kernel variable: this "
                                         "compiler keeps vectors as lanes (A[T.Ramp(i, 1, 2)], "
                                         "T.float32x2(a, b), a vector T.alloc_var)")
    return vectors


class PackedPair(Vector):
    """The two-lane value of a packed x2 op: its lanes, and the op and operands it came from
    (a store into a Ramp of global memory may then be one packed instruction:
    language/packed_x2.py)."""

    __slots__ = ("op", "operands")

    def __init__(self, op, operands):
        super().__init__(lane_value(op, *lanes) for lanes in zip(*operands))
        self.op, self.operands = op, tuple(operands)


def _packed(op):
    def packed(*args):
        return PackedPair(op, _packed_x2(op, args))
    packed.__name__ = op
    packed.__doc__ = f"Packed x2 `{op}` of two-lane vectors (float32x2, float16x2, bfloat16x2): " \
                     "lane by lane, or one packed instruction when stored with a T.Ramp into " \
                     "global memory from Ramp loads of global memory (tl::" + op + ")."
    return packed


add2, sub2, mul2, fma2, max2, min2, abs2 = (_packed(op) for op in OPS)


def Ramp(base, stride, lanes):  # noqa: N802 - TIR's name
    """The index vector base, base + stride, ..., base + (lanes - 1) * stride: subscripting a
    buffer with it loads (or stores) `lanes` elements, lane by lane."""
    return RampIndex(base, stride, lanes)


def Broadcast(value, lanes):  # noqa: N802 - TIR's name
    """`value` in each of `lanes` lanes (store it into a region of `lanes` elements, or combine
    it with other vectors lane by lane)."""
    if isinstance(lanes, ir.Const):
        lanes = lanes.value
    if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 1:
        raise error(ValueError, f"T.Broadcast lanes must be a positive int, got {lanes!r}")
    if isinstance(value, Vector):
        raise error(TypeError, "T.Broadcast takes a scalar value, got a vector")
    v = ir.as_expr(value)
    return Vector((v,) * lanes)


def wrap_negative(index, extent):
    """A lane index counted from the end when negative (`extent` the dimension's size)."""
    from ..arith import simplify

    index = simplify(ir.as_expr(index))
    if isinstance(index, ir.Const):
        return simplify(ir.binary("add", index, extent)) if index.value < 0 else index
    return ir.Select(ir.compare("lt", index, 0), ir.binary("add", index, extent), index,
                     index.dtype)


def lane_indices(buffer, key):
    """For a subscript with T.Ramp entries: one index tuple per lane (other entries repeated),
    else None."""
    ramps = [k for k in key if isinstance(k, RampIndex)]
    if not ramps:
        return None
    lanes = ramps[0].lanes
    if any(r.lanes != lanes for r in ramps):
        raise error(ValueError, f"T.Ramp indices of {buffer.name} have different lane counts "
                                f"({', '.join(str(r.lanes) for r in ramps)})")
    if len(key) != buffer.ndim:
        raise error(IndexError, f"buffer {buffer.name} has {buffer.ndim} dimension(s) but is "
                                f"indexed with {len(key)} index(es)")
    out = []
    for i in range(lanes):
        out.append(tuple(wrap_negative(k.lane(i), buffer.shape[d]) if isinstance(k, RampIndex)
                         else k for d, k in enumerate(key)))
    return out


ir_hooks.vector = Vector
