"""Parameter annotations of lazy-JIT kernels (`@tilelang.lazy_jit`, kernel-style `@tilelang.jit`).

Each parameter gets one annotation object that knows three things about its argument:
  * `key(value)`: the part of the specialisation key it contributes (compile-time facts only:
    `int` dims, open dtypes, compile-time scalars); runtime facts (`T.dyn` dims, `T.int32`
    scalars) contribute nothing, so one compiled kernel serves every value;
  * `check(value)`: a rank/dtype/size contradiction with the annotation, as an error naming the
    parameter, the expected and the actual type;
  * the trace value: an `ir.Buffer` for tensors, an `ir.Var` for runtime scalars and handles,
    the (normalised) Python value for compile-time parameters.

Shape and stride entries (`Dim`) print like the reference: `A_shape_0$` is a compile-time value
taken from the argument, `K$dyn` a runtime value, `128` a fixed size.
"""

from __future__ import annotations

from typing import Any, Optional

from ..ir import nodes as ir
from ..ir.dtype import DType
from ..language.types import DynSpec, HandleType, Tensor, TensorSpec
from . import packed

MISSING = type("MISSING", (), {"__repr__": lambda self: "<missing>"})()


# ---- argument inspection (hot path: keep cheap) ----------------------------------------------

_DTYPES: dict = {}  # torch/numpy/str dtype object -> DType
_TENSOR_TYPES: dict = {}  # type -> bool


def as_dtype(value) -> DType:
    """A DType for any dtype spelling (cached: torch dtypes are looked up once)."""
    if type(value) is DType:
        return value
    try:
        return _DTYPES[value]
    except KeyError:
        dt = _DTYPES[value] = DType(value)
        return dt
    except TypeError:  # unhashable spelling
        return DType(value)


def is_tensor_like(value) -> bool:
    """torch tensors, `T.Tensor(shape, dtype)` placeholders, or objects with shape and dtype."""
    t = type(value)
    known = _TENSOR_TYPES.get(t)
    if known is None:
        import numpy as np

        known = t is TensorSpec or (
            hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, (
                np.generic, DType, ir.Node, ir.Buffer)) and not isinstance(value, type))
        _TENSOR_TYPES[t] = known
    return known


def strides_of(value) -> tuple:
    stride = getattr(value, "stride", None)
    if callable(stride):
        return tuple(stride())
    if isinstance(value, TensorSpec) and value.strides is not None:
        return tuple(value.strides)
    out, acc = [], 1
    for s in reversed(tuple(value.shape)):
        out.append(acc)
        acc *= int(s)
    return tuple(reversed(out))


def is_packed_arg(value, dtype) -> bool:
    """Whether `value` is a byte tensor carrying packed sub-byte `dtype` elements."""
    return dtype is not None and type(value) is not TensorSpec and \
        packed.holds_packed(getattr(value, "dtype", None), dtype)


def arg_shape(value, dtype) -> tuple:
    """The argument's shape in elements of the parameter's `dtype` (see jit/packed.py)."""
    if is_packed_arg(value, dtype):
        return packed.logical_shape(value.shape, dtype)
    return tuple(value.shape)


def arg_strides(value, dtype) -> tuple:
    """The argument's strides in elements of the parameter's `dtype`."""
    if is_packed_arg(value, dtype):
        return packed.logical_strides(strides_of(value), dtype)
    return strides_of(value)


def describe(value) -> str:
    """How an argument reads in an error message."""
    if is_tensor_like(value):
        try:
            dt = as_dtype(value.dtype).name
        except (ValueError, TypeError):
            dt = str(value.dtype)
        shape = tuple(int(s) if isinstance(s, int) else s for s in value.shape)
        return f"a {len(shape)}-D {dt} tensor of shape {shape}"
    if value is MISSING:
        return "nothing"
    return f"{type(value).__name__} {value!r}"


# ---- shape entries ---------------------------------------------------------------------------


class Dim:
    """One shape or stride entry: `static` (a fixed int), `const` (compile-time, taken from the
    argument or from a `T.const` name), `dyn` (runtime) or `expr` (computed from other sizes,
    checked but not keyed)."""

    __slots__ = ("kind", "name", "value", "dtype")

    def __init__(self, kind, name=None, value=None, dtype=ir.INT32):
        self.kind = kind
        self.name = name
        self.value = value
        self.dtype = dtype

    def __repr__(self):
        if self.kind == "const":
            return f"{self.name}$"
        if self.kind == "dyn":
            return f"{self.name}$dyn"
        return str(self.value)


def parse_dims(entries, pname: str, what: str, const_vars=None) -> list:
    """Classify the entries of an annotation's shape (what="shape") or strides."""
    out = []
    for i, e in enumerate(entries):
        default_name = f"{pname}_{what}_{i}"
        if e is int:
            out.append(Dim("const", default_name))
        elif isinstance(e, DynSpec):
            out.append(Dim("dyn", e.name or default_name, dtype=e.dtype))
        elif isinstance(e, bool):
            raise TypeError(f"parameter {pname!r}: {what}[{i}] is {e!r}, not a size")
        elif isinstance(e, int):
            out.append(Dim("static", value=e))
        elif isinstance(e, ir.Const):
            out.append(Dim("static", value=int(e.value)))
        elif isinstance(e, ir.Var):
            if const_vars is not None and id(e) in const_vars:
                out.append(Dim("const", e.name))
            else:
                out.append(Dim("dyn", e.name, value=e, dtype=e.dtype))
        elif isinstance(e, ir.Expr):
            out.append(Dim("expr", value=e))
        else:
            raise TypeError(f"parameter {pname!r}: {what}[{i}] = {e!r} is not a size; write an "
                            "int, `int` (compile-time, from the argument), T.dyn or T.dyn['K'] "
                            "(runtime)")
    return out


# ---- annotations -----------------------------------------------------------------------------


class TensorAnnot:
    """A tensor parameter: shape (None: any rank, every dim compile-time), strides (None:
    row-major contiguous) and dtype (None: taken from the argument)."""

    kind = "tensor"

    def __init__(self, pname: str, shape: Optional[list], strides: Optional[list],
                 dtype: Optional[DType], spelling: str = ""):
        self.pname = pname
        self.shape = shape
        self.strides = strides
        self.dtype = dtype
        self.spelling = spelling
        self._const_shape = [i for i, d in enumerate(shape or ()) if d.kind == "const"]
        self._const_strides = [i for i, d in enumerate(strides or ()) if d.kind == "const"]
        self.key = self._make_key()

    @classmethod
    def from_spec(cls, pname: str, spec: TensorSpec, const_vars=None) -> "TensorAnnot":
        shape = parse_dims(spec.shape, pname, "shape", const_vars)
        strides = None
        if spec.strides is not None:
            strides = parse_dims(spec.strides, pname, "stride", const_vars)
            if len(strides) != len(shape):
                raise TypeError(f"parameter {pname!r}: {len(shape)} shape entries but "
                                f"{len(strides)} strides")
        dtype = spec.dtype if isinstance(spec.dtype, DType) else None
        return cls(pname, shape, strides, dtype, repr(spec))

    @classmethod
    def any_tensor(cls, pname: str) -> "TensorAnnot":
        """An unannotated tensor (or bare `T.Tensor`): every dim and the dtype are
        compile-time values taken from the argument."""
        return cls(pname, None, None, None, "a tensor")

    def _make_key(self):
        # specialised closures: the key runs on every call
        fixed_dtype = self.dtype
        if self.shape is None:
            def key(v):
                try:
                    return (as_dtype(v.dtype), tuple(v.shape))
                except (AttributeError, TypeError, ValueError):
                    return ("not a tensor", type(v))  # specialisation reports it
            return key
        n = len(self.shape)
        cs, cst = self._const_shape, self._const_strides
        if fixed_dtype is not None and packed.pack_factor(fixed_dtype) > 1:
            def packed_key(v):
                # byte tensors carry the sub-byte elements: the key holds the logical sizes
                if not is_packed_arg(v, fixed_dtype):
                    return key(v)
                shape = arg_shape(v, fixed_dtype)
                if len(shape) != n:
                    return ("mismatch", fixed_dtype, shape)
                st = arg_strides(v, fixed_dtype) if cst else ()
                return (fixed_dtype,) + tuple(shape[i] for i in cs) + tuple(st[i] for i in cst)

        def key(v):
            try:
                shape = v.shape
                dt = as_dtype(v.dtype)
            except (AttributeError, TypeError, ValueError):
                return ("not a tensor", type(v))
            if fixed_dtype is not None and dt is not fixed_dtype:
                if type(v) is not TensorSpec:
                    return ("mismatch", dt, tuple(shape))  # specialisation reports it
                dt = fixed_dtype  # placeholders only stand for the shape (see check)
            if len(shape) != n:
                return ("mismatch", dt, tuple(shape))
            parts = [dt]
            for i in cs:
                parts.append(shape[i])
            if cst:
                st = strides_of(v)
                for i in cst:
                    parts.append(st[i])
            return tuple(parts)
        if fixed_dtype is not None and packed.pack_factor(fixed_dtype) > 1:
            return packed_key
        return key

    @property
    def ndim(self):
        return None if self.shape is None else len(self.shape)

    def dyn_positions(self):
        """(name, 'shape'|'stride', dim) of every runtime entry."""
        for what, dims in (("shape", self.shape or ()), ("stride", self.strides or ())):
            for i, d in enumerate(dims):
                if d.kind == "dyn":
                    yield d.name, what, i

    def __repr__(self):
        shape = "None" if self.shape is None else repr(self.shape)
        strides = "None" if self.strides is None else repr(self.strides)
        dtype = repr(self.dtype) if self.dtype is not None else "Any"
        return f"TensorAnnot(shape={shape}, strides={strides}, dtype={dtype})"

    # ---- checks and trace values --------------------------------------------------------------
    def check(self, value, fname: str):
        p = self.pname
        if not is_tensor_like(value):
            raise TypeError(f"{fname}: parameter {p!r} expects a tensor ({self.spelling}), got "
                            f"{describe(value)}")
        shape = arg_shape(value, self.dtype)
        if self.shape is not None and len(shape) != len(self.shape):
            raise ValueError(f"{fname}: parameter {p!r} expects a {len(self.shape)}-D tensor "
                             f"({self.spelling}), got {describe(value)}")
        # A `T.Tensor(shape, dtype)` placeholder given to compile()/par_compile() stands for
        # the shape; a fixed annotation dtype wins over its dtype (the reference accepts
        # float32 placeholders for a float16 annotation). Real tensors must match; byte
        # tensors carry sub-byte elements (jit/packed.py).
        dt = self.dtype if is_packed_arg(value, self.dtype) else as_dtype(value.dtype)
        if self.dtype is not None and dt is not self.dtype and type(value) is not TensorSpec:
            raise ValueError(f"{fname}: parameter {p!r} expects dtype {self.dtype.name} "
                             f"({self.spelling}), got {describe(value)}")
        for i, d in enumerate(self.shape or ()):
            if d.kind == "static" and int(shape[i]) != d.value:
                raise ValueError(f"{fname}: parameter {p!r} expects shape[{i}] == {d.value} "
                                 f"({self.spelling}), got {describe(value)}")
        if self.strides is not None:
            st = arg_strides(value, self.dtype)
            for i, d in enumerate(self.strides):
                if d.kind == "static" and int(st[i]) != d.value:
                    raise ValueError(f"{fname}: parameter {p!r} expects stride[{i}] == "
                                     f"{d.value} ({self.spelling}), got strides {st}")

    def make_buffer(self, value, fname: str, dyn_vars: dict) -> ir.Buffer:
        """The parameter's buffer for a trace specialised on `value` (MISSING: only fixed and
        runtime sizes are allowed)."""
        if value is MISSING:
            if self.shape is None or self.dtype is None or self._const_shape or \
                    self._const_strides:
                raise TypeError(f"{fname}: parameter {self.pname!r} ({self.spelling}) needs a "
                                "tensor or a T.Tensor(shape, dtype) placeholder to fix its "
                                "compile-time sizes/dtype")
            shape_v, stride_v, dt = None, None, self.dtype
        else:
            self.check(value, fname)
            shape_v = arg_shape(value, self.dtype)
            stride_v = arg_strides(value, self.dtype) if self.strides is not None else None
            dt = self.dtype if self.dtype is not None else as_dtype(value.dtype)
        if self.shape is None:
            return ir.Buffer(self.pname, shape_v, dt, "global")
        shape = [_dim_value(d, shape_v, i, dyn_vars) for i, d in enumerate(self.shape)]
        strides = None
        if self.strides is not None:
            strides = [_dim_value(d, stride_v, i, dyn_vars) for i, d in enumerate(self.strides)]
        return ir.Buffer(self.pname, shape, dt, "global", strides)


def _dim_value(d: Dim, actual, i, dyn_vars):
    if d.kind == "static":
        return d.value
    if d.kind == "const":
        return actual[i]
    if d.kind == "dyn":
        var = dyn_vars.get(d.name)
        if var is None:
            var = dyn_vars[d.name] = d.value if isinstance(d.value, ir.Var) else \
                ir.Var(d.name, d.dtype)
        return var
    return d.value


class ScalarAnnot:
    """`n: T.int32`: a runtime scalar (one kernel for every value)."""

    kind = "scalar"

    def __init__(self, pname, dtype: DType):
        self.pname = pname
        self.dtype = dtype

    def __repr__(self):
        return f"{self.pname}$dyn: {self.dtype.name}"


class PtrAnnot:
    """`A: T.ptr`: a tensor passed as a raw pointer, shaped in the body by T.match_buffer."""

    kind = "ptr"

    def __init__(self, pname):
        self.pname = pname

    def __repr__(self):
        return "T.ptr"


_CONST_KINDS = {int: "int", float: "float", bool: "bool", str: "str"}


class ConstAnnot:
    """A compile-time parameter (`block_M: int = 128`, `out_dtype: T.dtype`, or an
    unannotated non-tensor value such as a macro): part of the key; a change recompiles."""

    kind = "const"

    def __init__(self, pname, ctype: str, default=MISSING):
        self.pname = pname
        self.ctype = ctype  # int float bool str dtype any
        self.default = default

    def normalize(self, value, fname: str):
        t = self.ctype
        if t == "any" or value is MISSING:
            return value
        try:
            if is_tensor_like(value):
                raise TypeError
            if t == "dtype":
                return as_dtype(value)
            if t == "int":
                if isinstance(value, bool) or not hasattr(value, "__index__") or \
                        isinstance(value, ir.Expr):
                    raise TypeError
                return int(value)
            if t == "float":
                if isinstance(value, ir.Expr):
                    raise TypeError
                return float(value)
            if t == "bool":
                return bool(value)
            if t == "str":
                if not isinstance(value, str):
                    raise TypeError
                return value
        except (TypeError, ValueError):
            raise TypeError(f"{fname}: parameter {self.pname!r} is a compile-time {t}, got "
                            f"{describe(value)}") from None
        return value

    def __repr__(self):
        d = "" if self.default is MISSING else f" = {self.default!r}"
        return f"{self.pname}$: {self.ctype}{d}"


def freeze(value):
    """A hashable key for a compile-time value (callables and macros by identity)."""
    t = type(value)
    if t in (int, float, str, bool, DType) or value is None:
        return value
    if t in (list, tuple):
        return (t.__name__,) + tuple(freeze(v) for v in value)
    if t is dict:
        return ("dict",) + tuple(sorted((k, freeze(v)) for k, v in value.items()))
    try:
        hash(value)
        return value
    except TypeError:
        return ("id", id(value))


def annotation_of(pname: str, ann, default=MISSING, empty=None):
    """The annotation object for a signature annotation (None: decided per call)."""
    if isinstance(ann, TensorSpec):
        return TensorAnnot.from_spec(pname, ann)
    if ann is Tensor or getattr(ann, "__module__", "").startswith("torch") and \
            getattr(ann, "__name__", "") == "Tensor":
        return TensorAnnot.any_tensor(pname)
    if isinstance(ann, HandleType):
        return PtrAnnot(pname)
    if isinstance(ann, DType):
        return ScalarAnnot(pname, ann)
    if ann is DType:
        return ConstAnnot(pname, "dtype", default)
    if ann in _CONST_KINDS:
        return ConstAnnot(pname, _CONST_KINDS[ann], default)
    if ann is empty or ann is Any or ann is None:
        return None
    if isinstance(ann, str):
        try:
            return ScalarAnnot(pname, DType(ann))
        except ValueError:
            pass
    # any other annotation (typing constructs, classes): a compile-time Python value
    return ConstAnnot(pname, "any", default)
