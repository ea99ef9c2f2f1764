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

from ..frontend.builder import current_builder, current_loc, emit, error
from ..ir import nodes as ir
from ..ir.dtype import DType
from ..ir.visitor import LocatedVisitor

_OPS = {"sum": "add", "max": "max", "min": "min", "bitand": "bitand", "bitor": "bitor",
        "bitxor": "bitxor"}
_BITWISE = ("bitand", "bitor", "bitxor")
FINALIZE = "reducer_finalize"
_COMBINE = {"add": "add", "max": "max", "min": "min", "bitand": "bitand", "bitor": "bitor",
            "bitxor": "bitxor"}


def _reducers(b=None) -> dict:
    b = b or current_builder(what="a reducer")
    return b.kernel.data.setdefault("reducers", {})


class _Epoch:
    """What the trace has done with one reducer: the reference's v2 lifecycle (an epoch opened
    by T.reducer_init, contributions by T.reducer_update inside T.Parallel, closed by
    T.finalize_reducer(acc, dst) in the init's scope) or the legacy form (T.clear / T.fill,
    `r[i] += x`, the in-place finalize and direct reads), never both on one reducer."""

    def __init__(self, legacy: bool):
        self.legacy = legacy  # allocated with `replication=`: the legacy form, unchecked
        self.v2 = False       # touched by T.reducer_init / T.reducer_update / finalize to dst
        self.legacy_use = None  # (what, line) of the first legacy-form use
        self.init_scope = None  # the frames enclosing T.reducer_init (inside the kernel)
        self.init_loc = None
        self.finalized = False
        self.own = set()      # ids of the statements the v2 operations emitted


def _epochs(b=None) -> dict:
    b = b or current_builder(what="a reducer")
    return b.kernel.data.setdefault("reducer_epochs", {})


def _scope(b) -> tuple:
    frames = b.frames
    start = next(i for i, f in enumerate(frames) if f is b.kernel)
    return tuple(frames[start + 1:])


def _emit_own(epoch, stmt_cls, *args, **kwargs):
    stmt = emit(stmt_cls, *args, **kwargs)
    epoch.own.add(id(stmt))
    return stmt


def _open_v2(buf, what):
    """The epoch of `buf` for a v2 operation (None for a legacy reducer, which is unchecked);
    a reducer already used in the legacy form cannot take one."""
    epoch = _epochs().get(buf)
    if epoch is None or epoch.legacy:
        return None
    if epoch.legacy_use is not None:
        used, line = epoch.legacy_use
        raise error(ValueError, f"illegal {what} on reducer {buf.name}: it is used in the "
                                f"legacy form ({used} at line {line}); a reducer opened with "
                                "T.reducer_init is only updated with T.reducer_update and read "
                                "through T.finalize_reducer(acc, dst)")
    epoch.v2 = True
    return epoch


def note_legacy_use(buffer, what) -> None:
    """`what` (T.fill / T.clear, a store, the in-place finalize) uses `buffer` in the legacy
    form: an error if it is a reducer in a v2 epoch, else remembered (a later v2 operation on
    it is the error)."""
    b = current_builder(required=False)
    if b is None or not b.in_kernel():
        return
    epoch = _epochs(b).get(buffer)
    if epoch is None or epoch.legacy:
        return
    if epoch.v2:
        raise error(ValueError, f"illegal {what} reducer {buffer.name}: a reducer opened with "
                                "T.reducer_init is only updated with T.reducer_update and read "
                                "through T.finalize_reducer(acc, dst)")
    if epoch.legacy_use is None:
        loc = current_loc()
        epoch.legacy_use = (what.rsplit(" ", 1)[0], loc.lineno if loc else "?")


def alloc_reducer(shape, dtype, op="sum", replication=None):
    """A reducer of `shape` combining contributions with `op` ("sum", "max", "min", or for
    integer dtypes "bitand", "bitor", "bitxor"). The reference's v2 form: T.reducer_init(acc),
    T.reducer_update(acc[i], x) inside T.Parallel, T.finalize_reducer(acc, dst) in the scope of
    the init, results read from dst. The legacy form (`replication=` given, or a reducer no v2
    operation touches): T.clear, `r[i] += x` (sum), `r[i] = T.max(r[i], x)` (max) from any
    number of threads or T.Parallel iterations, T.finalize_reducer(r), then reads of r.
    `replication` does not change the result."""
    from .alloc import _block_buffer

    if op not in _OPS:
        raise error(NotImplementedError, f"T.alloc_reducer op {op!r} is not supported (sum, "
                                         "max, min, bitand, bitor or bitxor)")
    if op in _BITWISE:
        dt = DType(dtype)
        if not (dt.is_int or dt.is_bool):
            raise error(AssertionError, f"bitwise reducer op {op!r} requires an integer dtype, "
                                        f"got {dt.name}")
        if replication is not None:
            raise error(AssertionError, "the legacy reducer (replication=...) only supports "
                                        "sum, max and min")
    if replication not in (None, "all", "none"):
        raise error(ValueError, f"T.alloc_reducer replication must be 'all' or 'none', got "
                                f"{replication!r}")
    buf = _block_buffer(shape, dtype, "shared.dyn", "T.alloc_reducer")
    _reducers()[buf] = _OPS[op]
    _epochs()[buf] = _Epoch(legacy=replication is not None)
    # the CUDA passes know reducers by this attribute (transform/reducer_fragments.py)
    current_builder().kernel.data["attrs"].append(("reducer", (buf, _OPS[op])))
    return buf


def _identity(dt: DType, op: str):
    if op in ("add", "bitor", "bitxor"):
        return ir.const(0, dt)
    if op == "bitand":
        return ir.const(-1 if dt.is_signed_int else dt.max_value(), dt)
    from .math import infinity, max_value, min_value

    if dt.is_float:
        return infinity(dt) if op == "min" else -infinity(dt)
    return max_value(dt) if op == "min" else min_value(dt)


def reducer_init(reducer, value=None):
    """Start a reducer at `value` (default: the identity of its op: 0, -inf, +inf, all ones
    for bitand). Once per reducer, before its T.reducer_update; the value is taken here."""
    op = _op_of(reducer, "T.reducer_init")
    epoch = _open_v2(reducer, "T.reducer_init")
    if epoch is not None:
        if epoch.init_scope is not None:
            raise error(ValueError, f"double T.reducer_init of reducer {reducer.name} (the "
                                    f"first at line {epoch.init_loc.lineno}): a reducer is "
                                    "opened once")
        if isinstance(value, ir.Expr) and value.dtype != reducer.dtype:
            raise error(TypeError, f"T.reducer_init value of dtype {value.dtype.name} does not "
                                   f"match reducer {reducer.name} ({reducer.dtype.name}); cast "
                                   "it first")
        b = current_builder()
        epoch.init_scope, epoch.init_loc = _scope(b), current_loc()
    start = _identity(reducer.dtype, op) if value is None else value
    fill = ir.Fill(ir.BufferRegion.full(reducer), ir.cast_to(start, reducer.dtype),
                   loc=current_loc())
    current_builder().emit(fill)
    if epoch is not None:
        epoch.own.add(id(fill))


def _op_of(buf, what):
    if not isinstance(buf, ir.Buffer) or buf not in _reducers():
        raise error(TypeError, f"{what} needs a reducer from T.alloc_reducer, got {buf!r}")
    return _reducers()[buf]


def reducer_update(target, contribution):
    """Combine `contribution` into the reducer element `target` (`acc[i]`)."""
    if not isinstance(target, ir.Load):
        raise error(TypeError, f"T.reducer_update takes a reducer element such as acc[i], got "
                               f"{target!r}")
    buf = target.buffer
    op = _op_of(buf, "T.reducer_update")
    epoch = _open_v2(buf, "T.reducer_update")
    if epoch is not None:
        b = current_builder()
        if epoch.init_scope is None:
            raise error(ValueError, f"T.reducer_update of reducer {buf.name} before "
                                    "T.reducer_init")
        if epoch.finalized:
            raise error(ValueError, f"T.reducer_update of reducer {buf.name} after its "
                                    "T.finalize_reducer")
        if not any(f.kind == "for" and f.data.get("loop_kind") == "parallel"
                   for f in _scope(b)):
            raise error(ValueError, f"T.reducer_update of reducer {buf.name} outside any "
                                    "T.Parallel loop: which iterations contribute would be "
                                    "ambiguous (every thread runs it)")
        if isinstance(contribution, ir.Node) and _mentions(contribution, buf):
            raise error(ValueError, f"illegal read of reducer {buf.name} in its own "
                                    "contribution: its value is only known after "
                                    "T.finalize_reducer")
    stmt = _atomic_update(buf, target.indices, op, contribution)
    if epoch is not None:
        epoch.own.add(id(stmt))


_ATOMIC = {"add": "atomic_add", "max": "atomic_max", "min": "atomic_min",
           "bitand": "atomic_and", "bitor": "atomic_or", "bitxor": "atomic_xor"}
REDUCER_ATOMICS = frozenset(_ATOMIC.values())  # the traced form of a contribution


def _mentions(node, buf) -> bool:
    from ..ir.visitor import any_node

    return any_node(node, lambda n: n is buf)


def _atomic_update(buf, indices, op, value):
    elem = ir.Load(buf, tuple(indices), buf.dtype)
    return emit(ir.Evaluate, ir.Call(_ATOMIC[op], (elem, ir.cast_to(value, buf.dtype)),
                                     buf.dtype, (("memory_order", "relaxed"),)))


def reducer_store(buffer, indices, value) -> bool:
    """A store into a reducer element: `r[i] = r[i] + x` (or T.max / T.min with r[i]) becomes
    the atomic update; any other store is an error. False if `buffer` is no reducer."""
    b = current_builder(what="a store")
    if not b.in_kernel() or buffer not in _reducers(b):
        return False
    op = _reducers(b)[buffer]
    note_legacy_use(buffer, "store to")
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
    epoch = None
    if dst is None:
        note_legacy_use(reducer, "in-place T.finalize_reducer of")
    else:
        epoch = _open_v2(reducer, "T.finalize_reducer")
    if epoch is not None:
        _check_finalize_scope(reducer, epoch)
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
    marker = emit(ir.Attr, FINALIZE, reducer, ir.Seq(()))
    if dst is not None:
        from .tile_ops import copy

        b = current_builder()
        before = len(b.frame.items)
        copy(reducer, dst)
        if epoch is not None:
            epoch.own.add(id(marker))
            epoch.own.update(id(s) for s in b.frame.items[before:])
            epoch.finalized = True


def _check_finalize_scope(reducer, epoch):
    if epoch.init_scope is None:
        raise error(ValueError, f"T.finalize_reducer of reducer {reducer.name} before "
                                "T.reducer_init")
    if epoch.finalized:
        raise error(ValueError, f"reducer {reducer.name} is finalized twice")
    scope, init = _scope(current_builder()), epoch.init_scope
    # the init's own scope, or a branch inside it (the finalize then runs 0 or 1 times per
    # init); a loop the init is not in would combine already-combined partials again
    inside = len(scope) >= len(init) and all(a is b for a, b in zip(scope, init)) and all(
        f.kind in ("then", "else") for f in scope[len(init):])
    if not inside:
        raise error(ValueError, f"T.finalize_reducer of reducer {reducer.name} is not in the "
                                f"scope of its T.reducer_init (line {epoch.init_loc.lineno}): "
                                "both must sit in the same loops (the finalize may be inside "
                                "a branch there)")


class _ReducerReads(LocatedVisitor):
    """Finds a use of a v2 reducer other than its own operations (a read, a copy, a fill)."""

    def __init__(self, epochs):
        self.epochs = epochs
        self.own = set().union(*(e.own for e in epochs.values()))

    def visit(self, node):
        if id(node) in self.own:
            return None
        return super().visit(node)

    def visit_Buffer(self, buf):
        if buf in self.epochs:
            raise error(ValueError, f"illegal read of reducer {buf.name}: a reducer's value is "
                                    "only read through T.finalize_reducer(acc, dst), from dst",
                        self.loc)


def check_epochs(kernel_data, body) -> None:
    """At the end of a kernel's trace: every opened v2 epoch is finalized, and nothing else
    reads its reducer (a partial, or the dead handle after the finalize)."""
    epochs = {buf: e for buf, e in kernel_data.get("reducer_epochs", {}).items() if e.v2}
    for buf, e in epochs.items():
        if e.init_scope is not None and not e.finalized:
            raise error(ValueError, f"reducer {buf.name} is opened by T.reducer_init but never "
                                    "finalized (T.finalize_reducer(acc, dst))", e.init_loc)
    if epochs:
        _ReducerReads(epochs).visit(body)
