"""Trace-time pieces of the lazy JIT (`lazy.py`): the builder hooks that `T.const`, annotation
statements, `T.empty` and `T.match_buffer` call, the buffers built for body-annotated tensor
parameters (checked against the caller's tensors), and small helpers.

Errors raised here name the kernel, the parameter, what the annotation requires and what was
given; those raised while the body runs carry the user's line (`frontend.builder.error`).
"""

from __future__ import annotations

import ast
import inspect
import textwrap

from ..frontend.builder import error
from ..frontend.hooks import UNSET
from ..ir import nodes as ir
from ..ir.dtype import DType
from ..language.types import DynSpec, TensorSpec
from . import annot as A
from .annot import MISSING


class _Phase1Done(BaseException):
    """Raised from the annotate hook once phase 1 has seen every tensor annotation (a
    BaseException so that the tracer's located-error wrapping lets it through)."""


class _Pending:
    """An unannotated tensor parameter whose `A: T.Tensor(...)` statement has not run yet."""

    __slots__ = ("pname",)

    def __init__(self, pname):
        self.pname = pname

    def __getattr__(self, attr):
        raise AttributeError(f"parameter {self.pname!r} is used before its annotation statement "
                        f"`{self.pname}: T.Tensor[shape, dtype]`")

    def __repr__(self):
        return f"<parameter {self.pname} (not annotated yet)>"


class _Hooks:
    """The builder hooks of one trace: T.const, annotation statements, T.empty,
    T.match_buffer; records the buffers/vars that become the PrimFunc's parameters."""

    def __init__(self, jit, values, const_hook, annotate_hook):
        self.jit = jit
        self.values = values
        self.const_hook = const_hook
        self.annotate_hook = annotate_hook
        self.param_values: dict = {}  # param index -> Buffer / Var
        self.dyn_vars: dict = {}

    def install(self, b):
        b.attrs["const_hook"] = self.const_hook
        b.attrs["annotate_hook"] = self.annotate_hook
        b.attrs["empty_hook"] = self.empty_hook
        b.attrs["match_buffer_hook"] = self.match_buffer_hook
        self.builder = b

    def empty_hook(self, shape, dtype):
        b = self.builder
        if b.in_kernel():
            raise error(RuntimeError, "T.empty allocates a kernel output and must be called "
                                      "outside `with T.Kernel(...)`")
        buf = ir.Buffer("__unnamed", _norm_shape(shape, "T.empty"), dtype, "global")
        b.outputs.append(buf)
        return buf

    def match_buffer_hook(self, handle, shape, dtype, strides):
        for i, v in self.param_values.items():
            if v is handle and isinstance(v, ir.Var) and v.dtype.is_handle:
                if isinstance(shape, (int, ir.Expr)):
                    shape = (shape,)
                st = None if strides is None else _norm_shape(strides, "strides", allow_zero=True)
                buf = ir.Buffer(v.name, _norm_shape(shape, "T.match_buffer"), DType(dtype),
                                "global", st)
                self.param_values[i] = buf
                return buf
        raise error(TypeError, "T.match_buffer in a lazy-JIT kernel needs a T.ptr parameter "
                               f"(got {handle!r})")

    def plan_dyn_checks(self):
        """Runtime checks of named sizes shared by several parameters, from the final
        parameter buffers (covers signature and body annotations alike)."""
        groups: dict = {}
        params = self.jit._params
        for i, v in sorted(self.param_values.items()):
            if not isinstance(v, ir.Buffer) or params[i].kind == "ptr":
                continue
            for what, dims in (("shape", v.shape), ("stride", v.strides or ())):
                for d, s in enumerate(dims):
                    if isinstance(s, ir.Var):
                        groups.setdefault(s.name, []).append((i, what, d, params[i].name,
                                                              v.dtype))
        return [(n, pos) for n, pos in groups.items() if len(pos) > 1]


# ---- helpers ------------------------------------------------------------------------------------


def _norm_shape(shape, what, allow_zero=False):
    out = []
    for s in shape:
        if isinstance(s, ir.Const):
            s = s.value
        if isinstance(s, bool) or not isinstance(s, (int, ir.Expr)):
            raise error(TypeError, f"{what} entries must be ints or size expressions, got {s!r}")
        out.append(s)
    return tuple(out)


def _const_int(value, name, fname):
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{fname}: T.const {name!r} must be an int, got {A.describe(value)}")
    return int(value)


def _tensor_spec(annotation, pname, fname):
    if isinstance(annotation, TensorSpec):
        return annotation
    raise error(TypeError, f"{fname}: the annotation statement of parameter {pname!r} must be "
                           f"T.Tensor[shape, dtype] or T.StridedTensor[shape, strides, dtype], "
                           f"got {annotation!r}")


def _annotate_other(fname, name, prev, annotation):
    """An annotation statement on something that is not a pending tensor parameter."""
    if isinstance(prev, ir.Buffer) and isinstance(annotation, TensorSpec):
        if len(annotation.shape) != prev.ndim or (
                isinstance(annotation.dtype, DType) and annotation.dtype is not prev.dtype):
            raise error(TypeError, f"{fname}: `{name}: {annotation!r}` contradicts the "
                                   f"parameter's type (a {prev.ndim}-D {prev.dtype} tensor)")
        return prev
    if prev is UNSET:
        raise error(TypeError, f"`{name}: ...` without a value declares a parameter of the "
                               f"kernel, but {fname} has no parameter {name!r}")
    raise error(TypeError, f"`{name}: {annotation!r}` declares a tensor parameter; {name} is "
                           f"{A.describe(prev)}")


def _phase1_dim(e, v, d, dyn_vars, pname):
    if e is int:
        return int(v.shape[d]) if v is not MISSING else ir.Var(f"{pname}_shape_{d}")
    if isinstance(e, DynSpec):
        return dyn_vars.setdefault(e.name or f"{pname}_shape_{d}",
                                   ir.Var(e.name or f"{pname}_shape_{d}", e.dtype))
    if isinstance(e, ir.Const):
        return e.value
    return e


def _annotated_buffer(fname, pname, annotation, value, plan_annot, const_sources, params,
                      dyn_vars):
    """Phase 2: the buffer of a body-annotated tensor parameter, checked against its tensor."""
    spec = _tensor_spec(annotation, pname, fname)
    spelling = plan_annot.spelling if plan_annot is not None else repr(spec)
    given = value is not MISSING
    if given and not A.is_tensor_like(value):
        raise error(TypeError, f"{fname}: parameter {pname!r} expects a tensor ({spelling}), got "
                               f"{A.describe(value)}")
    fixed = spec.dtype if isinstance(spec.dtype, DType) else None
    # in elements of the annotated type (a byte tensor carries sub-byte ones: jit/packed.py)
    actual_shape = A.arg_shape(value, fixed) if given else None
    if given and len(actual_shape) != len(spec.shape):
        raise error(ValueError, f"{fname}: parameter {pname!r} expects a {len(spec.shape)}-D "
                                f"tensor ({spelling}), got {A.describe(value)}")
    if fixed is not None:
        dt = fixed
        if given and not A.is_packed_arg(value, dt) and A.as_dtype(value.dtype) is not dt \
                and type(value) is not TensorSpec:
            raise error(ValueError, f"{fname}: parameter {pname!r} expects dtype {dt.name} "
                                    f"({spelling}), got {A.describe(value)}")
    elif given:
        dt = A.as_dtype(value.dtype)
    else:
        raise error(TypeError, f"{fname}: parameter {pname!r} has an open dtype and needs a "
                               "tensor or placeholder")
    dims = plan_annot.shape if plan_annot is not None and plan_annot.shape is not None else None

    def entry(e, d, actual, what):
        if e is int:
            if actual is None:
                raise error(TypeError, f"{fname}: {pname}.{what}[{d}] is `int` (taken from the "
                                       "argument), but no tensor was given")
            return actual[d]
        if isinstance(e, DynSpec):
            n = e.name or f"{pname}_{what}_{d}"
            return dyn_vars.setdefault(n, ir.Var(n, e.dtype))
        if isinstance(e, ir.Var):
            return dyn_vars.setdefault(e.name, e)
        if isinstance(e, ir.Expr) and not isinstance(e, ir.Const):
            from ..arith import simplify

            e = simplify(e)
        if isinstance(e, ir.Const):
            e = int(e.value)
        if isinstance(e, int) and not isinstance(e, bool):
            if actual is not None and actual[d] != e:
                why = ""
                if what == "shape" and dims is not None and dims[d].kind == "const":
                    src = const_sources.get(dims[d].name)
                    why = f" = {dims[d].name}"
                    if src is not None:
                        why += f", taken from {params[src[0]].name}.shape[{src[1]}]"
                raise error(ValueError, f"{fname}: parameter {pname!r} has {what}[{d}] = "
                                        f"{actual[d]}, but its annotation {spelling} requires "
                                        f"{e}{why}")
            return e
        if isinstance(e, ir.Expr):
            return e
        raise error(TypeError, f"{fname}: {pname}.{what}[{d}] = {e!r} is not a size")

    shape = [entry(e, d, actual_shape, "shape") for d, e in enumerate(spec.shape)]
    strides = None
    if spec.strides is not None:
        actual_st = A.arg_strides(value, fixed) if given else None
        strides = [entry(e, d, actual_st, "stride") for d, e in enumerate(spec.strides)]
    return ir.Buffer(pname, shape, dt, "global", strides)


def _return_struct(fname, ret, out_pos, input_pos):
    if ret is None:
        return None

    def one(r):
        if isinstance(r, ir.Buffer):
            if id(r) in out_pos:
                return ("out", out_pos[id(r)])
            if id(r) in input_pos:
                return ("in", input_pos[id(r)])
        if isinstance(r, (tuple, list)):
            return ("tuple" if isinstance(r, tuple) else "list", [one(x) for x in r])
        raise TypeError(f"{fname}: the kernel body returns {r!r}; a lazy-JIT kernel returns "
                        "T.empty outputs (or tensor parameters), a tuple/list of them, or "
                        "nothing")
    return one(ret)


def _scan_body(func, param_names) -> tuple[bool, bool]:
    """(has annotation statements on parameters or T.const calls, calls T.const)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return False, False
    fn = tree.body[0]
    ann = const = False
    for node in ast.walk(fn):
        if isinstance(node, ast.AnnAssign) and node.value is None and \
                isinstance(node.target, ast.Name) and node.target.id in param_names:
            ann = True
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "const":
            const = True
    return ann or const, const
