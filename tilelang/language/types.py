"""Types users write in kernel signatures and bodies: dtypes, tensor annotations, symbolic sizes.

`T.Tensor((M, K), "float16")` and its type-checker-friendly spelling `T.Tensor[(M, K),
T.float16]` both produce a `TensorSpec`. In a `@T.prim_func` signature every size must be known
(ints or `T.dynamic` symbols); the lazy JIT also accepts placeholders: `int` (a compile-time
constant taken from the argument), `T.dyn` / `T.dyn["K"]` (a run-time size) and `Any`/`None`
dtypes.
"""

from __future__ import annotations

import re
from typing import Any

from ..frontend.builder import Builder, current_builder, error
from ..ir import nodes as ir
from ..ir.dtype import DType

# ---- dtypes -----------------------------------------------------------------------------------
dtype = DType
bool_ = DType("bool")
int8, int16, int32, int64 = (DType(f"int{b}") for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (DType(f"uint{b}") for b in (8, 16, 32, 64))
float16, bfloat16, float32, float64 = (DType(n) for n in
                                       ("float16", "bfloat16", "float32", "float64"))
float8_e4m3 = float8_e4m3fn = DType("float8_e4m3")
float8_e5m2 = DType("float8_e5m2")
half, double, long, short = float16, float64, int64, int16
float_ = float32
int_ = int32


class _Placeholder:
    """A size or dtype left open in a lazy-JIT annotation."""


class DynSpec(_Placeholder):
    """`T.dyn` (anonymous) or `T.dyn["K"]` (named; equal names must have equal values)."""

    def __init__(self, name=None, dtype="int32"):
        self.name = name
        self.dtype = DType(dtype)

    def __getitem__(self, key):
        if isinstance(key, tuple):
            return DynSpec(key[0], key[1])
        if isinstance(key, DType):
            return DynSpec(None, key)
        return DynSpec(key)

    def __call__(self, name=None, dtype="int32"):
        return DynSpec(name, dtype)

    def __repr__(self):
        return f"T.dyn[{self.name!r}]" if self.name else "T.dyn"


dyn = DynSpec()


class TensorSpec:
    """A global tensor parameter's type: shape, dtype, optional strides."""

    __slots__ = ("shape", "dtype", "strides", "scope", "kind")

    def __init__(self, shape, dtype="float32", strides=None, scope="global", kind="tensor"):
        if isinstance(shape, (int, ir.Expr, DynSpec)) or shape is int:
            shape = (shape,)
        self.shape = tuple(shape)
        if isinstance(dtype, HandleType):
            # `T.Tensor([n], T.ptr)`: a table of device addresses, stored as int64 (the
            # reference's ABI); `T.make_tensor(table[i], shape, dtype)` views one of them
            dtype = "int64"
        self.dtype = dtype if dtype is None or dtype is Any or isinstance(dtype, _Placeholder) \
            else DType(dtype)
        self.strides = tuple(strides) if strides is not None else None
        self.scope = scope
        self.kind = kind

    def is_concrete(self) -> bool:
        def ok(v):
            return isinstance(v, (int, ir.Expr)) and not isinstance(v, bool)
        return (isinstance(self.dtype, DType) and all(ok(s) for s in self.shape)
                and (self.strides is None or all(ok(s) for s in self.strides)))

    def to_buffer(self, name: str) -> ir.Buffer:
        if not self.is_concrete():
            raise error(TypeError, f"parameter {name}: {self!r} has open sizes or dtype; such "
                                   "annotations need @tilelang.jit / @tilelang.lazy_jit")
        shape = tuple(s.value if isinstance(s, ir.Const) else s for s in self.shape)
        return ir.Buffer(name, shape, self.dtype, self.scope, self.strides)

    def __repr__(self):
        def fmt(v):
            return "int" if v is int else str(v) if isinstance(v, ir.Node) else repr(v)
        dt = self.dtype.name if isinstance(self.dtype, DType) else \
            "Any" if self.dtype is Any else repr(self.dtype)
        shape = "[" + ", ".join(fmt(s) for s in self.shape) + "]"
        if self.kind == "strided":
            strides = "[" + ", ".join(fmt(s) for s in self.strides or ()) + "]"
            return f"T.StridedTensor[{shape}, {strides}, {dt}]"
        return f"T.Tensor[{shape}, {dt}]"


def _spec_from_subscript(params, kind="tensor", scope="global"):
    if not isinstance(params, tuple):
        params = (params,)
    if kind == "strided":
        if len(params) != 3:
            raise TypeError("T.StridedTensor[shape, strides, dtype]")
        return TensorSpec(params[0], params[2], strides=params[1], kind="strided")
    if len(params) == 1:
        return TensorSpec(params[0], "float32", scope=scope)
    if len(params) == 2 and isinstance(params[0], (tuple, list)):
        return TensorSpec(params[0], params[1], scope=scope)
    # T.Tensor[M, K, dtype]: trailing dtype
    return TensorSpec(params[:-1], params[-1], scope=scope)


def _inside_kernel() -> bool:
    b = Builder.current(required=False)
    return b is not None and b.in_kernel()


class Tensor:
    """`T.Tensor(shape, dtype)` / `T.Tensor[shape, dtype]`: a global tensor parameter."""

    def __new__(cls, shape, dtype="float32", *args, strides=None, **kwargs):
        # The reference's third parameter is `data`: T.Tensor(shape, dtype, X.data) inside a
        # kernel re-views another buffer's memory at another shape (see make_view).
        data_given = bool(args) or "data" in kwargs
        data = args[0] if args else kwargs.get("data")
        if data_given and (data is not None or _inside_kernel()):
            if args and len(args) > 1 and strides is None:
                strides = args[1]
            return make_view(shape, dtype, data, strides)
        if args and strides is None and len(args) > 1:
            strides = args[1]
        return TensorSpec(shape, dtype, strides)

    def __class_getitem__(cls, params):
        return _spec_from_subscript(params)


def make_view(shape, dtype, data, strides=None):
    """`T.Tensor(shape, dtype, X.data)` in a kernel: a buffer over X's memory, row-major at
    `shape`. The same bytes are read and written through either name (another dtype
    reinterprets them). Supported for global tensors (no more bytes than X); the view is
    registered on the kernel (attr "buffer_view") so the interpreter and codegen bind it to
    X's storage."""
    from .alloc import UNNAMED, _shape

    b = current_builder(what="T.Tensor(shape, dtype, buf.data)")
    if not b.in_kernel():
        raise error(RuntimeError, "T.Tensor(shape, dtype, buf.data) (a view of another "
                                  "buffer) must be inside `with T.Kernel(...)`")
    if not isinstance(data, ir.BufferData):
        raise error(TypeError, f"T.Tensor's third argument must be a buffer's .data (the "
                               f"storage to view), got {data!r}")
    root = data.buffer
    what = f"T.Tensor(shape, dtype, {root.name}.data)"
    if strides is not None:
        raise error(NotImplementedError, f"{what} with strides is not supported; views are "
                                         "row-major")
    if root.scope != "global":
        raise error(NotImplementedError, f"{what}: views of {root.scope} buffers are not "
                                         "supported (only global tensors); allocate the other "
                                         "shape and T.copy")
    dt = DType(dtype)
    if dt.bits % 8 or root.dtype.bits % 8:
        raise error(NotImplementedError, f"{what}: views of sub-byte elements are not "
                                         "supported")
    if root.strides is not None:
        raise error(NotImplementedError, f"{what}: {root.name} is strided; views need a "
                                         "contiguous tensor")
    shape = _shape(shape, what)
    n, total = dt.bytes, root.dtype.bytes
    for d in shape:
        n = n * d
    for d in root.shape:
        total = total * d
    if isinstance(n, int) and isinstance(total, int) and n > total:
        raise error(ValueError, f"{what}: the view has {n} bytes but {root.name} has only "
                                f"{total}")
    from ..frontend.builder import current_loc

    view = ir.Buffer(UNNAMED, shape, dt, "global", data=data, loc=current_loc())
    b.kernel.data["attrs"].append(("buffer_view", view))
    return view


class Buffer(Tensor):
    """`T.Buffer(shape, dtype, strides=...)`: the older spelling of `T.Tensor`."""

    def __new__(cls, shape, dtype="float32", strides=None, scope="global", **_ignored):
        return TensorSpec(shape, dtype, strides, scope=scope)


class StridedTensor(Tensor):
    """`T.StridedTensor[shape, strides, dtype]`: a tensor view with explicit strides."""

    def __new__(cls, shape, strides, dtype="float32"):
        return TensorSpec(shape, dtype, strides, kind="strided")

    def __class_getitem__(cls, params):
        return _spec_from_subscript(params, kind="strided")


def _scoped(scope, doc):
    class _Scoped(Tensor):
        __doc__ = doc

        def __new__(cls, shape, dtype="float32", **_):
            return TensorSpec(shape, dtype, scope=scope)

        def __class_getitem__(cls, params):
            return _spec_from_subscript(params, scope=scope)
    return _Scoped


SharedBuffer = _scoped("shared.dyn", "Annotation of a macro parameter that takes a shared tile.")
FragmentBuffer = _scoped("local.fragment",
                         "Annotation of a macro parameter that takes a register fragment.")
LocalBuffer = _scoped("local", "Annotation of a macro parameter that takes a per-thread array.")


class HandleType:
    """`T.handle` / `T.ptr`: an untyped pointer parameter, shaped later by `T.match_buffer`."""

    def __call__(self, *args, **kwargs):
        return self

    def __repr__(self):
        return "T.handle"


handle = ptr = HandleType()


# ---- symbolic sizes -------------------------------------------------------------------------
def _split_names(names) -> list:
    if isinstance(names, (list, tuple)):
        return [str(n) for n in names]
    return [n for n in re.split(r"[,\s]+", names.strip()) if n]


def dynamic(names, dtype="int32"):
    """`T.dynamic("m, n")`: symbolic sizes bound from the arguments at every call."""
    vars_ = [ir.Var(n, DType(dtype)) for n in _split_names(names)]
    return vars_[0] if len(vars_) == 1 else tuple(vars_)


symbolic = dynamic


def const(names, dtype="int32"):
    """`M, N, K = T.const("M, N, K")`: compile-time sizes taken from the arguments of a
    @tilelang.jit kernel (or given by name to `.compile(M=...)`)."""
    b = current_builder(what="T.const")
    hook = b.attrs.get("const_hook")
    if hook is None:
        raise error(TypeError, "T.const declares compile-time sizes of a @tilelang.jit kernel "
                               "and cannot be used in a @T.prim_func")
    values = [hook(n, DType(dtype)) for n in _split_names(names)]
    return values[0] if len(values) == 1 else tuple(values)


def empty(shape, *more, dtype=None):
    """`C = T.empty((M, N), dtype)`: an output tensor allocated per call and returned (also
    `T.empty(M, N, dtype=...)`, the sizes as separate arguments)."""
    if more:
        if isinstance(more[-1], (str, DType)) and dtype is None:  # T.empty((M, N), "float16")
            more, dtype = more[:-1], more[-1]
        if more:
            shape = (shape,) + tuple(more)
    if dtype is None:
        dtype = "float32"
    b = current_builder(what="T.empty")
    hook = b.attrs.get("empty_hook")
    if hook is None:
        raise error(TypeError, "T.empty allocates outputs of a @tilelang.jit / lazy_jit "
                               "kernel; in a @T.prim_func declare the output as a parameter")
    if isinstance(shape, (int, ir.Expr)):
        shape = (shape,)
    return hook(tuple(shape), DType(dtype))


def match_buffer(handle_value, shape, dtype="float32", strides=None, **_ignored):
    """Give a `T.handle`/`T.ptr` parameter a shape and dtype."""
    b = current_builder(what="T.match_buffer")
    hook = b.attrs.get("match_buffer_hook")
    if hook is not None:
        return hook(handle_value, shape, dtype, strides)
    if not (isinstance(handle_value, ir.Var) and handle_value.dtype.is_handle):
        raise error(TypeError, "T.match_buffer needs a T.handle parameter")
    if isinstance(shape, (int, ir.Expr)):
        shape = (shape,)
    buf = ir.Buffer(handle_value.name, shape, DType(dtype), "global", strides)
    for i, p in enumerate(b.params):
        if p is handle_value:
            b.params[i] = buf
            # the caller may pass the address itself (`t.data_ptr()`), as to the reference
            b.attrs.setdefault("address_params", []).append(buf.name)
            return buf
    raise error(TypeError, f"{handle_value.name} is not a parameter of this function")


def make_tensor(ptr, shape, dtype="float32", strides=None):
    """A tensor view of a `T.ptr` / `T.handle` parameter with the given shape, dtype and
    (optional) strides; the same as `T.match_buffer(ptr, shape, dtype, strides)`. Inside a
    kernel `ptr` may also be an address computed there, e.g. read from a `T.Tensor([n],
    T.ptr)` table (`T.make_tensor(A_ptrs[g], (M, K), T.float16)`): a global tensor at that
    address for the rest of the enclosing block of statements."""
    if isinstance(ptr, (ir.Expr, ir.Buffer)) and not (isinstance(ptr, ir.Var)
                                                      and ptr.dtype.is_handle):
        return _tensor_at_address(ptr, shape, dtype, strides)
    return match_buffer(ptr, shape, dtype, strides)


def _tensor_at_address(address, shape, dtype, strides):
    from .alloc import UNNAMED, _shape

    b = current_builder(what="T.make_tensor")
    if not b.in_kernel():
        raise error(RuntimeError, "T.make_tensor of a computed address must be inside "
                                  "`with T.Kernel(...)`")
    addr = ir.as_expr(address)
    if not (addr.dtype.is_handle or (addr.dtype.is_int and addr.dtype.bits == 64)):
        raise error(TypeError, f"T.make_tensor: an address is a 64-bit integer (an element of "
                               f"a T.Tensor([n], T.ptr) table) or a handle, got {addr.dtype}")
    if strides is not None:
        raise error(NotImplementedError, "T.make_tensor of a computed address with strides is "
                                         "not supported; the tensor is row-major")
    from ..frontend.builder import current_loc

    buf = ir.Buffer(UNNAMED, _shape(shape, "T.make_tensor"), DType(dtype), "global",
                    loc=current_loc(), computed_address=True)
    b.scope_attr("tensor_address", (buf, addr))
    return buf


def is_placeholder(value) -> bool:
    return value is int or value is Any or value is None or isinstance(value, _Placeholder)


_ = Builder
