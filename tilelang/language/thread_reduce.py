"""The reference's TVM-style thread all-reduction: `T.comm_reducer`, `T.attr(...,
"reduce_scope", ...)` and `T.tvm_thread_allreduce`.

    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, "float32")]), "reduce_scope",
                T.reinterpret(T.uint64(0), dtype="handle")):
        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, out[0], tk,
                                          dtype="handle"))

combines `acc[0]` of every thread that differs from this one only in the listed thread
indices (here `tk`, threadIdx.y) and stores the result in `out[0]` of each of them. It is
expanded where it is written: over threadIdx.x alone when its extent divides the warp (the
group is consecutive lanes of one warp), a butterfly of warp shuffles (`T.shfl_xor`);
otherwise each thread stores its value in a shared scratch array, then combines its group's
entries in the order of the reference's warp-shuffle tree (a power-of-two group; others fold
in index order), so that rounding comes out the same; the barriers between are inserted like
any other, and the CPU interpreter runs the same statements.
"""

from __future__ import annotations

import math

from ..frontend.builder import current_builder, emit, error
from ..ir import nodes as ir

from ..ir.visitor import substitute


class CommReducer:
    """A commutative reducer: `combine(x, y)` (an expression of the Vars x and y) and its
    identity element."""

    def __init__(self, x, y, combined, identity):
        self.x, self.y, self.combined, self.identity = x, y, combined, identity

    def combine(self, a, b):
        return substitute(self.combined, {self.x: a, self.y: b})

    def __repr__(self):
        return f"T.comm_reducer({self.combined}, [{self.identity}])"


def comm_reducer(combiner, identity):
    """A reducer from a two-argument function and its identity element(s), for
    `T.attr(reducer, "reduce_scope", ...)` around `T.tvm_thread_allreduce`. One value per
    reduction (a one-element identity list)."""
    ids = list(identity) if isinstance(identity, (list, tuple)) else [identity]
    if len(ids) != 1:
        raise error(NotImplementedError, f"T.comm_reducer with {len(ids)} values (a tuple "
                                         "reduction) is not supported; reduce one value")
    ident = ir.as_expr(ids[0])
    x, y = ir.Var("x", ident.dtype), ir.Var("y", ident.dtype)
    combined = ir.as_expr(combiner(x, y))
    return CommReducer(x, y, combined, ident)


class attr:  # noqa: N801 - the reference spells it T.attr
    """`T.attr(node, key, value)`: an attribute of the statements that follow, as a `with`
    block or up to the end of the enclosing block. Supported: `T.attr(T.comm_reducer(...),
    "reduce_scope", ...)`, the reducer `T.tvm_thread_allreduce` uses."""

    def __init__(self, node, attr_key, value=None):
        if attr_key != "reduce_scope" or not isinstance(node, CommReducer):
            raise error(NotImplementedError,
                        f"T.attr({node!r}, {attr_key!r}, ...) is not supported: only a "
                        "T.comm_reducer with the key 'reduce_scope' (T.tvm_thread_allreduce)")
        frame = current_builder(what="T.attr").frame
        self.frame = frame
        self.saved = frame.data.get("reduce_scope")
        frame.data["reduce_scope"] = node

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.frame.data["reduce_scope"] = self.saved
        return False


class _Emitted:
    """What `T.tvm_thread_allreduce` returns: its statements are already in the kernel, so
    `T.evaluate` of it adds nothing."""

    def __repr__(self):
        return "<T.tvm_thread_allreduce (emitted)>"


EMITTED = _Emitted()


def _reducer():
    b = current_builder(what="T.tvm_thread_allreduce")
    for f in reversed(b.frames):
        r = f.data.get("reduce_scope")
        if r is not None:
            return r
    raise error(ValueError, "T.tvm_thread_allreduce needs a reducer: put it inside `with "
                            "T.attr(T.comm_reducer(...), 'reduce_scope', ...)`")


def tvm_thread_allreduce(size, value, cond, dst, *thread_vars, dtype=None):
    """Combine `value` (where `cond` holds; the identity elsewhere) over every thread that
    differs from this one only in `thread_vars` (thread indices from T.get_thread_binding),
    with the reducer of the enclosing `T.attr(..., "reduce_scope", ...)`; every one of them
    stores the result in `dst` (a buffer element). All threads of the block must reach it."""
    from .kernel import _kernel_obj

    red = _reducer()
    n = ir.int_value(ir.as_expr(size))
    if n != 1:
        raise error(NotImplementedError, f"T.tvm_thread_allreduce of {size} values at once is "
                                         "not supported; reduce one value")
    if not isinstance(dst, ir.Load):
        raise error(TypeError, f"T.tvm_thread_allreduce stores into a buffer element such as "
                               f"out[0], got {dst!r}")
    k = _kernel_obj()
    tvars, extents = list(k.thread_vars), list(k.threads)
    reduced = []
    for v in thread_vars:
        if not any(v is t for t in tvars):
            raise error(ValueError, f"T.tvm_thread_allreduce reduces over thread indices "
                                    f"(T.get_thread_binding(d)), got {v!r}")
        reduced.append(next(d for d, t in enumerate(tvars) if t is v))
    if not reduced:
        raise error(ValueError, "T.tvm_thread_allreduce needs the thread indices to reduce over")
    strides = [math.prod(extents[:d]) for d in range(len(extents))]
    tid = ir.const(0)
    for t, s in zip(tvars, strides):
        tid = ir.binary("add", tid, ir.binary("mul", t, s))
    base = tid
    for d in reduced:
        base = ir.binary("sub", base, ir.binary("mul", tvars[d], strides[d]))
    dt = red.identity.dtype
    v = ir.select(ir.as_expr(cond), ir.cast_to(value, dt), red.identity)
    b = current_builder()
    lanes = extents[0]
    if reduced == [0] and lanes <= 32 and 32 % lanes == 0:
        # the group is `lanes` consecutive lanes of one warp (threadIdx.x): a butterfly of
        # warp shuffles leaves the combined value in every lane, no shared memory
        acc = ir.Buffer("allreduce_acc", (1,), dt, "local")
        b.declare_local(acc)
        emit(ir.Store, acc, (ir.const(0),), v)
        offset = lanes // 2
        while offset >= 1:
            mine = ir.Load(acc, (ir.const(0),), dt)
            other = ir.Call("shfl_xor", (mine, ir.const(offset), ir.const(lanes)), dt)
            emit(ir.Store, acc, (ir.const(0),), red.combine(mine, other))
            offset //= 2
        emit(ir.Store, dst.buffer, dst.indices,
             ir.cast_to(ir.Load(acc, (ir.const(0),), dt), dst.buffer.dtype))
        return EMITTED
    scratch = ir.Buffer("allreduce_scratch", (math.prod(extents),), dt, "shared.dyn")
    b.declare_block_buffer(scratch)
    emit(ir.Store, scratch, (tid,), v)
    # thread r of the group (r over the reduced indices, the first fastest) sits at
    # base + sum(coordinate * stride)
    total = math.prod(extents[d] for d in reduced)

    def member(r):
        off, rest = ir.const(0), r
        for d in reduced:
            coord = ir.binary("floormod", rest, extents[d]) if d != reduced[-1] else rest
            rest = ir.binary("floordiv", rest, extents[d])
            off = ir.binary("add", off, ir.binary("mul", coord, strides[d]))
        return ir.Load(scratch, (ir.binary("add", base, off),), dt)

    acc = ir.Buffer("allreduce_acc", (1,), dt, "local")
    b.declare_local(acc)
    if total & (total - 1) == 0:
        emit(ir.Store, acc, (ir.const(0),), _shuffle_tree(red, member, total))
    else:
        emit(ir.Store, acc, (ir.const(0),), member(ir.const(0)))
        r = ir.Var("r")
        body = ir.Store(acc, (ir.const(0),), red.combine(ir.Load(acc, (ir.const(0),), dt),
                                                          member(ir.binary("add", r, 1))))
        emit(ir.For, r, ir.const(0), ir.const(total - 1), "serial", body)
    emit(ir.Store, dst.buffer, dst.indices,
         ir.cast_to(ir.Load(acc, (ir.const(0),), dt), dst.buffer.dtype))
    return EMITTED


def _shuffle_tree(red: CommReducer, member, total: int):
    """The group's values combined in the order of the reference's warp-shuffle reduction
    (a power-of-two group): within each warp of 32 ranks, rank i takes rank i + 16, then
    i + 8, ... i + 1; then the warps' results the same way. Rounding (bfloat16 products, float
    sums) then comes out as there, and as torch's tree reductions on the GPU, not as a
    left-to-right fold would."""
    lanes = min(total, 32)

    def tree(leaf, first, stride, n):
        # the values leaf(first), leaf(first + stride), ... (n of them) after the shuffle
        # steps of offsets n/2 * stride, ..., stride: rank j ends up combined with j + n/2
        # * stride first, so the two interleaved halves reduce separately
        if n == 1:
            return leaf(first)
        return red.combine(tree(leaf, first, 2 * stride, n // 2),
                           tree(leaf, first + stride, 2 * stride, n // 2))

    def warp(w):
        return tree(lambda r: member(ir.const(w * lanes + r)), 0, 1, lanes)

    return tree(warp, 0, 1, total // lanes)


__all__ = ["CommReducer", "comm_reducer", "attr", "tvm_thread_allreduce", "EMITTED"]

