"""`T.reshape` and `T.view`: another shape (and, for `T.view`, another dtype) over the same
storage.

* Global tensors: the same memory read row-major at the new shape (`T.Tensor(shape, dtype,
  X.data)`); another dtype reinterprets the bytes.
* Shared tiles: with the same dtype the view is the tile's elements in row-major order (its
  layout is the tile's, composed with the reshape); with another dtype it is other data in
  the tile's bytes (a reuse of the memory, laid out on its own), at most as many bytes.
* Fragments: the same elements in the same registers, in row-major order at the new shape
  (the same dtype).

The element count (in bits) must not change: a mismatch is an error that is both a ValueError
and an AssertionError (the reference raises one or the other).
"""

from __future__ import annotations

from ..frontend.builder import current_builder, current_loc, error
from ..ir import nodes as ir
from ..ir.dtype import DType

__all__ = ["reshape", "view"]


class ViewShapeError(ValueError, AssertionError):
    """A view whose size differs from its buffer's: the reference raises ValueError from
    T.view and AssertionError from T.reshape (and its tests expect either from both)."""


def _bits(shape, dtype: DType):
    n = dtype.bits
    for s in shape:
        n = ir.binary("mul", ir.as_expr(n), s) if not (isinstance(n, int) and isinstance(s, int)) \
            else n * s
    return n


def _same(a, b) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    from ..arith import Analyzer

    return Analyzer().can_prove_equal(ir.as_expr(a), ir.as_expr(b))


def _make(src, shape, dtype, what, mismatch):
    from .alloc import UNNAMED, _shape
    from .types import make_view

    if not isinstance(src, ir.Buffer):
        raise error(TypeError, f"{what} takes a buffer, got {src!r}")
    shape = _shape(shape if shape is not None else src.shape, what)
    dt = DType(dtype) if dtype is not None else src.dtype
    if not _same(_bits(shape, dt), _bits(src.shape, src.dtype)):
        raise error(mismatch, f"{what} shape check failed: {list(shape)} of {dt} is not the "
                              f"{list(src.shape)} of {src.dtype} of {src.name}")
    root = src.view_of or src
    if root.scope == "global":
        return make_view(shape, dt, root.data)
    if root.scope in ("local.fragment", "local", "local.var") and dt != root.dtype:
        raise error(NotImplementedError, f"{what} of {root.scope} buffer {root.name} as {dt}: "
                                         "registers keep their dtype (reinterpret elements "
                                         "with T.reinterpret)")
    if root.scope not in ("shared", "shared.dyn", "local.fragment"):
        raise error(NotImplementedError, f"{what} of {root.scope} buffer {root.name} is not "
                                         "supported (global tensors, shared tiles and "
                                         "fragments)")
    b = current_builder(what=what)
    if not b.in_kernel():
        raise error(RuntimeError, f"{what} of {root.name} must be inside `with T.Kernel(...)`")
    if any(not isinstance(s, int) for s in shape):
        raise error(ValueError, f"{what} of {root.name} needs a static shape")
    v = ir.Buffer(UNNAMED, shape, dt, root.scope, data=root.data, loc=current_loc())
    b.kernel.data["attrs"].append(("local_view", v))
    return v


def reshape(src, shape):
    """`src` at another shape with the same number of elements (no copy): writes through one
    name are read through the other."""
    return _make(src, shape, None, "T.reshape", ViewShapeError)


def view(src, shape=None, dtype=None, strides=None):
    """`src`'s storage as a buffer of `shape` (default: src's) and `dtype` (default: src's),
    the same number of bits (no copy). Explicit `strides` are not supported."""
    if strides is not None:
        raise error(NotImplementedError, "T.view with explicit strides is not supported")
    return _make(src, shape, dtype, "T.view", ViewShapeError)
