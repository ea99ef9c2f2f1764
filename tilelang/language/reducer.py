"""Reducers: `T.alloc_reducer`, updated from many threads or `T.Parallel` iterations at once,
then `T.finalize_reducer`.

    r = T.alloc_reducer(block_M, "float32", replication="all")      # the reference's v1 form
    T.clear(r)
    for i, j in T.Parallel(block_M, block_N):
        r[i] += a[i, j] * x[j]          # every (i, j) contributes to r[i]
    T.finalize_reducer(r)
    T.copy(r, out[...])

    acc = T.alloc_reducer(shape, dtype, op="sum")                    # v2
    T.reducer_init(acc)                 # or T.reducer_init(acc, start)
    T.reducer_update(acc[i], contribution)
    T.finalize_reducer(acc, dst)        # dst: an ordinary fragment / shared tile

The logical result is the reference's: the start value combined with every contribution once
(the order of a float sum is unspecified, as on the reference); after `T.finalize_reducer`
every element holds it. As traced (and as the interpreter runs it), a reducer is a shared
buffer, every contribution an atomic update of its element (`atomic_add` / `atomic_max` /
`atomic_min`) and the finalize a marker (`Attr("reducer_finalize")`). On CUDA,
transform/reducer_fragments.py turns the common form (contributions from T.Parallel loops)
into register partials per thread combined across threads at the finalize, as the reference
does; other uses keep the shared-memory atomics.
"""

from __future__ import annotations

from ..frontend.builder import current_builder, emit, error
from ..ir import nodes as ir
from ..ir.dtype import DType

_OPS = {"sum": "add", "max": "max", "min": "min"}
FINALIZE = "reducer_finalize"
_COMBINE = {"add": "add", "max": "max", "min": "min"}


def _reducers(b=None) -> dict:
    b = b or current_builder(what="a reducer")
    return b.kernel.data.setdefault("reducers", {})


def alloc_reducer(shape, dtype, op="sum", replication=None):
    """A reducer of `shape` combining contributions with `op` ("sum", "max" or "min"):
    `r[i] += x` (sum), `r[i] = T.max(r[i], x)` (max) or `T.reducer_update(r[i], x)` from any
    number of threads or T.Parallel iterations. `replication` (the reference's v1 knob)
    does not change the result."""
    from .alloc import _block_buffer

    if op not in _OPS:
        raise error(NotImplementedError, f"T.alloc_reducer op {op!r} is not supported (sum, max "
                                         "or min)")
    if replication not in (None, "all", "none"):
        raise error(ValueError, f"T.alloc_reducer replication must be 'all' or 'none', got "
                                f"{replication!r}")
    buf = _block_buffer(shape, dtype, "shared.dyn", "T.alloc_reducer")
    _reducers()[buf] = _OPS[op]
    # the CUDA passes know reducers by this attribute (transform/reducer_fragments.py)
    current_builder().kernel.data["attrs"].append(("reducer", (buf, _OPS[op])))
    return buf


def _identity(dt: DType, op: str):
    if op == "add":
        return ir.const(0, dt)
    from .math import infinity, max_value, min_value

    if dt.is_float:
        return infinity(dt) if op == "min" else -infinity(dt)
    return max_value(dt) if op == "min" else min_value(dt)


def reducer_init(reducer, value=None):
    """Start a reducer at `value` (default: the identity of its op: 0, -inf or +inf)."""
    from .tile_ops import fill

    op = _op_of(reducer, "T.reducer_init")
    fill(reducer, _identity(reducer.dtype, op) if value is None else value)


def _op_of(buf, what):
    if not isinstance(buf, ir.Buffer) or buf not in _reducers():
        raise error(TypeError, f"{what} needs a reducer from T.alloc_reducer, got {buf!r}")
    return _reducers()[buf]


def reducer_update(target, contribution):
    """Combine `contribution` into the reducer element `target` (`acc[i]`)."""
    if not isinstance(target, ir.Load):
        raise error(TypeError, f"T.reducer_update takes a reducer element such as acc[i], got "
                               f"{target!r}")
    op = _op_of(target.buffer, "T.reducer_update")
    _atomic_update(target.buffer, target.indices, op, contribution)


def _atomic_update(buf, indices, op, value):
    elem = ir.Load(buf, tuple(indices), buf.dtype)
    emit(ir.Evaluate, ir.Call(f"atomic_{op}", (elem, ir.cast_to(value, buf.dtype)), buf.dtype,
                              (("memory_order", "relaxed"),)))


def reducer_store(buffer, indices, value) -> bool:
    """A store into a reducer element: `r[i] = r[i] + x` (or T.max / T.min with r[i]) becomes
    the atomic update; any other store is an error. False if `buffer` is no reducer."""
    b = current_builder(what="a store")
    if not b.in_kernel() or buffer not in _reducers(b):
        return False
    op = _reducers(b)[buffer]
    v = ir.as_expr(value)
    if isinstance(v, ir.Cast):
        v = v.value
    same = (lambda e: isinstance(e, ir.Load) and e.buffer is buffer and len(e.indices) == len(
        indices) and all(ir.structural_equal(ir.as_expr(a), ir.as_expr(c))
                         for a, c in zip(e.indices, indices)))
    if isinstance(v, ir.Binary) and v.op == _COMBINE[op]:
        for mine, other in ((v.a, v.b), (v.b, v.a)):
            if same(mine):
                _atomic_update(buffer, indices, op, other)
                return True
    raise error(ValueError, f"{buffer.name} is a reducer ({op}): update it with "
                            f"{buffer.name}[i] = {buffer.name}[i] {'+' if op == 'add' else op} x"
                            " (or T.reducer_update), not an arbitrary store")


def finalize_reducer(reducer, dst=None, batch: int = 1, annotations=None):
    """End the reducer's updates: its elements hold the combined result from here on (the
    barrier that orders the updates before later reads is inserted as usual). With `dst`
    (the reference's v2 form), the result is also copied into `dst`."""
    _op_of(reducer, "T.finalize_reducer")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise error(ValueError, f"T.finalize_reducer: batch must be >= 1 (an int), got "
                                f"{batch!r}")
    # `batch` groups the reference's cross-thread combines; it must split the outputs evenly
    total = 1
    for n in reducer.shape:
        total = total * n if isinstance(n, int) else None
        if total is None:
            break
    if total is not None and batch > 1:
        if batch > total:
            raise error(ValueError, f"T.finalize_reducer: batch {batch} exceeds total output "
                                    f"elements ({total}) of {reducer.name}")
        if total % batch:
            raise error(ValueError, f"T.finalize_reducer: batch {batch} must evenly divide the "
                                    f"{total} output elements of {reducer.name}")
    # a marker with nothing inside: a no-op for the shared form (and the interpreter); where
    # the reducer became register partials, the cross-thread combine
    emit(ir.Attr, FINALIZE, reducer, ir.Seq(()))
    if dst is not None:
        from .tile_ops import copy

        copy(reducer, dst)
