"""Buffer subscripts: element loads and stores, regions, negative indices, and `T.Ref`."""

from __future__ import annotations

from ..frontend.builder import current_builder, current_loc, error
from ..ir import hooks as ir_hooks
from ..ir import nodes as ir
from .vectors import PackedPair, Vector, lane_indices


def _normalize_index(buffer: ir.Buffer, dim: int, index):
    """A constant (or provably) negative index counts from the end of the dimension."""
    if isinstance(index, (int,)) and not isinstance(index, bool) and index < 0:
        extent = buffer.shape[dim]
        return ir.binary("add", index, extent) if not isinstance(extent, int) else index + extent
    if isinstance(index, ir.Const) and index.dtype.is_int and index.value < 0:
        return ir.binary("add", index, buffer.shape[dim])
    if isinstance(index, ir.Unary) and index.op == "neg":
        return ir.binary("add", index, buffer.shape[dim])
    if isinstance(index, ir.Expr) and index.dtype.is_int and _provably_negative(index):
        # `A[-i - 1]` in a loop over i >= 0: negative for every iteration, so it counts from
        # the end as a constant would (the reference's LegalizeNegativeIndex)
        return ir.binary("add", index, buffer.shape[dim])
    return index


# operations whose result is >= 0 when their operands are (mathematically: the analyzer
# reasons without wrap-around too)
_NONNEGATIVE_OPS = frozenset(("add", "mul", "floordiv", "floormod", "min", "max"))


def _surely_nonnegative(index, b) -> bool:
    """Whether `index` is a sum / product / floor division / modulo / min / max of constants
    >= 0, launch variables and variables of enclosing loops that start at 0 or above (most
    subscripts): then nothing negative can be proved of it, and the analyzer is not built."""
    kernel = b.kernel.data["kernel"]
    ok = {id(v) for v in kernel.thread_vars} | {id(v) for v in kernel.block_vars}
    for f in b.frames:
        bounds = f.data.get("bounds") if f.kind == "for" else None
        if bounds is None:
            continue
        start, extent, step = bounds
        if isinstance(start, int) and isinstance(extent, int) and isinstance(step, int) and \
                extent > 0 and min(start, start + (extent - 1) * step) >= 0:
            ok.add(id(f.data["var"]))
    stack = [index]
    while stack:
        e = stack.pop()
        if isinstance(e, ir.Const):
            if not (e.dtype.is_int and e.value >= 0):
                return False
        elif isinstance(e, ir.Var):
            if id(e) not in ok:
                return False
        elif isinstance(e, ir.Binary) and e.op in _NONNEGATIVE_OPS:
            stack += (e.a, e.b)
        else:
            return False
    return True


def _provably_negative(index) -> bool:
    """Whether `index` is negative for every value of the enclosing loop and launch
    variables (bounds known where the subscript is written)."""
    b = current_builder(required=False)
    if b is None or not b.in_kernel():
        return False
    if _surely_nonnegative(index, b):
        return False
    from ..arith import Analyzer

    analyzer = Analyzer()
    kernel = b.kernel.data["kernel"]
    for var, extent in list(zip(kernel.thread_vars, kernel.threads)) + \
            list(zip(kernel.block_vars, kernel.grid)):
        analyzer.bind(var, 0, extent)
    for f in b.frames:
        bounds = f.data.get("bounds") if f.kind == "for" else None
        if bounds is None:
            continue
        start, extent, step = bounds
        var = f.data["var"]
        if isinstance(start, int) and isinstance(extent, int):
            if extent > 0:  # the bounds in the variable's type (an int64 loop past 2^31)
                last = start + (extent - 1) * step
                analyzer.bind_range(var, ir.const(min(start, last), var.dtype),
                                    ir.const(max(start, last), var.dtype))
        elif step == 1:
            analyzer.bind(var, start, extent)
    return analyzer.prove(ir.compare("lt", index, ir.const(0, index.dtype)))


def _index_expr(value):
    if isinstance(value, ir.Buffer) and value.scope != "local.var":
        raise error(TypeError, f"buffer {value.name} cannot be used as an index")
    e = ir.as_expr(value)
    if not (e.dtype.is_int or e.dtype.is_bool):
        raise error(TypeError, f"index must be an integer, got {e.dtype} ({e})")
    return e


def _as_key_tuple(key):
    if not isinstance(key, tuple):
        key = (key,)
    out = []
    for k in key:
        if isinstance(k, (list,)) and not isinstance(k, str):
            out.extend(k)
        else:
            out.append(k)
    return tuple(out)


def parse_subscript(buffer: ir.Buffer, key):
    """Return ('point', indices) or ('region', ((start, extent), ...))."""
    key = _as_key_tuple(key)
    if any(k is Ellipsis for k in key):
        pos = key.index(Ellipsis)
        fill = buffer.ndim - (len(key) - 1)
        key = key[:pos] + (slice(None),) * fill + key[pos + 1:]
    has_slice = any(isinstance(k, slice) for k in key)
    if not has_slice:
        if len(key) != buffer.ndim and not (buffer.ndim == 0 and key in ((0,), ())):
            raise error(IndexError, f"buffer {buffer.name} has {buffer.ndim} dimension(s) "
                                    f"but is indexed with {len(key)} index(es)")
        return "point", tuple(_index_expr(_normalize_index(buffer, d, k))
                              for d, k in enumerate(key))
    if len(key) != buffer.ndim:
        raise error(IndexError, f"buffer {buffer.name} has {buffer.ndim} dimension(s) but the "
                                f"region has {len(key)}")
    region = []
    for d, k in enumerate(key):
        extent_full = buffer.shape[d]
        if isinstance(k, slice):
            if k.step not in (None, 1):
                raise error(NotImplementedError, "slices with a step are not supported in "
                                                 "buffer regions")
            start = 0 if k.start is None else _normalize_slice_bound(buffer, d, k.start)
            stop = extent_full if k.stop is None else _normalize_slice_bound(buffer, d, k.stop)
            extent = ir.binary("sub", stop, start) if not (
                isinstance(stop, int) and isinstance(start, int)) else stop - start
            region.append((_simplify_start(start), _simplify_extent(extent)))
        else:
            region.append((_index_expr(_normalize_index(buffer, d, k)), 1))
    return "region", tuple(region)


def _normalize_slice_bound(buffer: ir.Buffer, dim: int, bound):
    """A slice bound counts from the end of the dimension only when it is a negative constant
    (`A[-4:, :]`). A computed bound that is negative (`X[by * 2 - 3:by * 2 - 1, :]` in block
    0) is a window starting before the tensor, whose elements outside it read as zeros
    (SEMANTICS: T.copy out of bounds): wrapping a provably negative start but not its stop, as
    an element index would be, gave the region a negative extent."""
    if (isinstance(bound, int) and not isinstance(bound, bool)) or \
            (isinstance(bound, ir.Const) and bound.dtype.is_int):
        return _normalize_index(buffer, dim, bound)
    return bound


def _simplify_start(v):
    if isinstance(v, ir.Const) and v.dtype.is_int:
        return v.value
    return v


def _simplify_extent(v):
    if isinstance(v, ir.Expr):
        from ..arith import simplify

        v = simplify(v)
        if isinstance(v, ir.Const):
            return v.value
    return v


def buffer_getitem(buffer: ir.Buffer, key):
    lanes = lane_indices(buffer, _as_key_tuple(key))
    if lanes is not None:  # T.Ramp: a vector of element loads
        return Vector(ir.Load(buffer, tuple(_index_expr(i) for i in idx), buffer.dtype)
                      for idx in lanes)
    kind, payload = parse_subscript(buffer, key)
    if kind == "point":
        load = ir.Load(buffer, payload, buffer.dtype)
        # indices that count from the end as element indices: negative constants, and
        # computed ones `_normalize_index` found negative in every iteration (it returned a
        # new expression for them)
        negative = [(d, k) for d, k in enumerate(_as_key_tuple(key))
                    if (isinstance(_index_value(k), int) and _index_value(k) < 0) or
                    (isinstance(k, ir.Expr) and payload[d] is not k)]
        b = current_builder(required=False)
        if negative and b is not None:
            # an element index counts from the end, but the same subscript as the start of a
            # tile (T.copy(A[-16, 0], S)) must not: tile_ops asks here what was written
            b.negative_points[id(load)] = (load, negative)
        return load
    return ir.BufferRegion(buffer, payload)


def _index_value(k):
    if isinstance(k, ir.Const) and k.dtype.is_int:
        return k.value
    return k if isinstance(k, int) and not isinstance(k, bool) else None


def written_negative(load) -> list:
    """[(dim, index as written)] of the indices of a start point that count from the end as
    element indices: negative constants, and computed indices negative in every iteration."""
    b = current_builder(required=False)
    entry = b.negative_points.get(id(load)) if b is not None else None
    return entry[1] if entry is not None and entry[0] is load else []


def store_element(buffer: ir.Buffer, indices, value):
    from ..frontend.builder import emit

    b = current_builder(what=f"storing into {buffer.name}")
    if not b.in_kernel() and buffer.scope != "global":
        raise error(RuntimeError, f"store into {buffer.name} outside a kernel")
    if isinstance(value, ir.Buffer) and value.scope != "local.var":
        raise error(TypeError, f"cannot store buffer {value.name} into an element of "
                               f"{buffer.name}; use T.copy for tiles")
    if buffer.scope == "shared.dyn":
        from .reducer import reducer_store

        if reducer_store(buffer, indices, value):
            return
    value = ir.cast_to(value, buffer.dtype)
    emit(ir.Store, buffer, tuple(indices), value)


def buffer_setitem(buffer: ir.Buffer, key, value):
    lanes = lane_indices(buffer, _as_key_tuple(key))
    if lanes is not None:  # T.Ramp: one element store per lane (or one packed x2 store)
        from .packed_x2 import store_packed

        if isinstance(value, PackedPair) and store_packed(buffer, lanes, value):
            return
        values = _vector_values(value, len(lanes), f"{buffer.name}[{len(lanes)} lanes]")
        for idx, v in zip(lanes, values):
            store_element(buffer, tuple(_index_expr(i) for i in idx), v)
        return
    kind, payload = parse_subscript(buffer, key)
    if kind == "point":
        if isinstance(value, Vector):
            raise error(TypeError, f"a vector of {len(value)} lanes cannot be stored into one "
                                   f"element of {buffer.name}; store it into a region or with "
                                   "a T.Ramp index")
        store_element(buffer, payload, value)
        return
    if isinstance(value, Vector):
        _store_vector_region(buffer, payload, value)
        return
    if isinstance(value, (ir.BufferRegion, ir.Buffer)) and not (
            isinstance(value, ir.Buffer) and value.scope == "local.var"):
        from .tile_ops import copy

        copy(value, ir.BufferRegion(buffer, payload))
        return
    from .tile_ops import fill

    fill(ir.BufferRegion(buffer, payload), value)


ir_hooks.getitem, ir_hooks.setitem = buffer_getitem, buffer_setitem


def _vector_values(value, n, where):
    if isinstance(value, Vector):
        if len(value) != n:
            raise error(ValueError, f"a vector of {len(value)} lanes is stored into {where}")
        return value.lanes
    return (value,) * n


def _store_vector_region(buffer, region, value: Vector):
    """`buf[a:b] = vector`: lane i into the region's i-th element (one dimension of extent
    `lanes`; a broadcast fills the region)."""
    wide = [d for d, (_, ext) in enumerate(region) if not (isinstance(ext, int) and ext == 1)]
    if len(wide) != 1 or region[wide[0]][1] != len(value):
        extents = [ext for _, ext in region]
        raise error(ValueError, f"a vector of {len(value)} lanes is stored into a region of "
                                f"{buffer.name} with extents {extents}; it needs one "
                                f"dimension of {len(value)} elements")
    if value.is_broadcast():
        from .tile_ops import fill

        fill(ir.BufferRegion(buffer, region), value.lanes[0])
        return
    d = wide[0]
    for i, v in enumerate(value.lanes):
        idx = [ir.as_expr(start) for start, _ in region]
        idx[d] = ir.binary("add", idx[d], i)
        store_element(buffer, tuple(idx), v)


class Ref(ir.ExprOps):
    """A reference to one buffer element or `T.alloc_var` (macro parameters annotated
    `T.Ref`): reading gives the element, assigning to the parameter name stores into it."""

    __slots__ = ("buffer", "indices")
    __tl_ref__ = True

    def __init__(self, buffer: ir.Buffer, indices):
        self.buffer = buffer
        self.indices = tuple(indices)

    def __tl_expr__(self):
        return ir.Load(self.buffer, self.indices, self.buffer.dtype)

    def store(self, value):
        store_element(self.buffer, self.indices, value)

    def __repr__(self):
        return f"Ref({self.buffer.name}{list(self.indices)})"

    @staticmethod
    def make(value, param_name="argument") -> "Ref":
        if isinstance(value, Ref):
            return value
        if isinstance(value, ir.Buffer) and value.scope == "local.var":
            return Ref(value, (ir.const(0),))
        if isinstance(value, ir.Load):
            b = current_builder()
            # the index is evaluated now, as at a C++ reference binding
            indices = []
            for idx in value.indices:
                if isinstance(idx, (ir.Const, ir.Var)) or not b.in_kernel():
                    indices.append(idx)
                else:
                    indices.append(b.let("_tmp", idx))
            return Ref(value.buffer, indices)
        raise error(ValueError, f"{param_name} is a T.Ref parameter and needs a variable "
                                f"(T.alloc_var) or a buffer element, got {value!r}")


_ = current_loc
