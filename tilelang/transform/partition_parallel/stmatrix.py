"""Store a partitioned T.Parallel nest's 16-bit results into shared memory with stmatrix.

Expects: a parallel nest (see partition_parallel) whose body is one store of a 16-bit value
into a shared tile, on sm_90+. Guarantees: when the loop layout deals the elements as the
8 x 8 matrices of `stmatrix.sync.aligned.m8n8` (the mma / wgmma accumulator layout: in each
warp, the register pair k of lane 4r + c holds elements 2c and 2c + 1 of an 8-element row
segment that starts at a multiple of 8, the same segment for the four lanes of r) and each
segment is 16 contiguous, 16-byte-aligned bytes of the tile's physical layout, the nest
becomes, per thread,

    for q in unroll(num_values / (2 n)):
        E vec[2 n];  for e in unroll(2 n): vec[e] = value(v = 2 n q + e)
        tl::stmatrix_elems<n>(&tile[row segment of matrix (lane / 8) % n, row lane % 8], vec)

with n = 4 where the pairs allow (else 2, 1): one instruction stores 4 matrices of a warp
(512 bytes) where the vector path stores 4 bytes per lane per instruction, and the 8 row
addresses of a matrix need no per-pair swizzle arithmetic in the lane. Every element is
stored exactly once with the value the element-wise loop stores (stmatrix writes register j
of lane 4r + c to row r, columns 2c, 2c + 1 of matrix j, the lanes' row addresses chosen
from the same layout). Only a store of the whole tile, element (i, j) at iteration (i, j),
takes this path (stores into slices of a wider tile raised the sparse MLA forward's spills,
64 -> 88 bytes); anything else returns None and the nest takes the vector path
(vectorize.py). Against the vector path on an H200: MHA backward 15.9 -> 15.0 µs, sparse MLA
backward 131.4 -> 128.0.
"""

from __future__ import annotations

import numpy as np

from ...ir import nodes as ir
from ...ir.visitor import collect, substitute
from ..analysis.scopes import SHARED
from .vectorize import PARTITIONED

VOID = ir.DType("void")
UINT32 = ir.DType("uint32")
ROW = 8  # elements of one stmatrix row (16 bytes of 16-bit elements)


def stmatrix_matrices(inner: np.ndarray, outer: list) -> int:
    """How many 8 x 8 matrices (4, 2 or 1) one stmatrix of each warp may store, or 0 when the
    slots are not dealt as stmatrix registers. `inner` (threads, values): the innermost loop
    coordinate of every slot; `outer`: the other coordinates, the same shape."""
    T, V = inner.shape
    if T % 32 or V % 2:
        return 0
    pairs = V // 2

    def split(a):  # (warp, row r, lane in row c, pair k, half e)
        return a.reshape(T // 32, 8, 4, pairs, 2)

    col = split(inner)
    start = col[:, :, :1, :, :1]
    step = 2 * np.arange(4)[None, None, :, None, None] + np.arange(2)[None, None, None, None, :]
    if not (np.all(col == start + step) and np.all(start % ROW == 0)):
        return 0
    for a in outer:
        a = split(a)
        if not np.all(a == a[:, :, :1, :, :1]):
            return 0
    return next(n for n in (4, 2, 1) if pairs % n == 0)


def lower_stmatrix(partitioner) -> ir.Stmt | None:
    """The nest of `partitioner` (a NestPartitioner) as stmatrix stores, or None."""
    p = partitioner
    ctx, Lp, store = p.ctx, p.layout, p.body
    if not (ctx.target.is_cuda and ctx.target.sm >= 90):
        return None
    if p.owner is not None or Lp.replication > 1 or Lp.guard_dims or \
            not np.all(p.grid.active) or p.analyzer is None:
        return None
    if not isinstance(store, ir.Store):
        return None
    buf = store.buffer
    if buf.scope not in SHARED or buf.dtype.bits != 16 or buf.dtype.lanes != 1:
        return None
    if collect(store.indices, lambda n: isinstance(n, ir.Load) and
               n.buffer.scope == "local.fragment"):
        return None
    if not _whole_tile(store, p.vars, p.extents):  # (indices are the loop variables, in order)
        return None
    layout = ctx.layouts.get(buf)
    if layout is not None:
        if not hasattr(layout, "vector_width") or layout.vector_width(ROW) < ROW:
            return None
    elif ir.int_value(buf.shape[-1]) is None or ir.int_value(buf.shape[-1]) % ROW:
        return None
    coords = p.coord_arrays
    n = stmatrix_matrices(coords[-1], list(coords[:-1]))
    if not n:
        return None
    q = ir.Var("vq")
    regs = []
    for k in range(n):
        pair = []
        for half in range(2):
            element = p.instantiate(ir.binary("add", ir.binary("mul", q, 2 * n), 2 * k + half))
            if not isinstance(element, ir.Store):
                return None
            pair.append(element.value)
        regs.append(_packed(pair, buf.dtype))
    # lane l names row l % 8 of matrix (l / 8) % n: the segment lane 4 (l % 8) of its warp
    # holds in the matrix's register pair
    tid = ctx.tid
    lane = ir.binary("floormod", tid, 32)
    row_lane = ir.binary("add", ir.binary("mul", ir.binary("floordiv", tid, 32), 32),
                         ir.binary("mul", ir.binary("floormod", tid, ROW), 4))
    matrix = ir.binary("floormod", ir.binary("floordiv", lane, ROW), n) if n > 1 else 0
    pair = ir.binary("add", ir.binary("mul", q, n), matrix)
    mapping = p.loop_coords(row_lane, ir.binary("mul", pair, 2))
    at = tuple(substitute(i, mapping) for i in store.indices)
    put = ir.Evaluate(ir.Call("call_extern", (f"tl::stmatrix_x{n}", ir.address_of(buf, at))
                              + tuple(regs), VOID), loc=store.loc)
    return ir.For(q, ir.const(0), ir.const(Lp.num_values // (2 * n)), "unroll", put, 1,
                  PARTITIONED, loc=p.nest.loc)


def _whole_tile(store, loop_vars, extents) -> bool:
    """Whether the nest stores the whole tile, element (i, j, ...) at loop iteration (i, j, ...):
    a fragment staged for a gemm or an output copy. Stores into a slice of a wider tile (the
    halves of an output the consumers of a warp-specialised kernel assemble) keep the vector
    path, as in the reference: there the stores wait behind the accumulator's rescaling, and
    stmatrix's four packed registers per instruction left the sparse MLA forward's epilogue
    with more spilled registers (100 against 64 bytes, ptxas -v) on the same schedule."""
    buf = store.buffer
    return len(store.indices) == len(loop_vars) == len(buf.shape) and all(
        i is v and ir.int_value(n) == ir.int_value(e) for i, v, n, e in
        zip(store.indices, loop_vars, buf.shape, extents))


# float32 -> 16-bit conversions of a pair in one instruction (F2FP), straight into a register
_PACK_CONVERTED = {"bfloat16": "tl::pack_bf162", "float16": "tl::pack_half2"}


def _packed(pair, dtype) -> ir.Expr:
    """One 32-bit register holding the two 16-bit values (the first in the low half)."""
    name = _PACK_CONVERTED.get(dtype.name)
    if name is not None and all(isinstance(x, ir.Cast) and x.value.dtype.name == "float32"
                                for x in pair):
        return ir.Call("call_extern", (name,) + tuple(x.value for x in pair), UINT32)
    return ir.Call("call_extern", ("tl::pack_b16x2",) + tuple(ir.cast_to(x, dtype)
                                                              for x in pair), UINT32)
