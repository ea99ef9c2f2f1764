"""Whether and how TMA copies a global tile into shared memory (sm_90a, HARDWARE §7).

`tma_plan(copy, layout, deps)` checks a global->shared `T.copy` against what one
cp.async.bulk.tensor load per swizzle-width column block can do: the same element type, whole
bytes, a static global shape with 16-byte row strides, the whole destination tile, boxes of at
most 256 elements per dimension, whole swizzle atoms. It returns the plan (box, swizzle,
bytes per load) or, for the note of the cp.async fallback, the constraint the copy breaks.
`TmaDescriptor` (codegen/launch.py) is the CUtensorMap kernel parameter the host encodes per
call.
"""

from __future__ import annotations

from ...codegen.launch import TmaDescriptor
from ...ir import nodes as ir


class TmaPlan:
    """A global->shared copy the producer performs with TMA: `stmt` (the copy) leaves the
    consumers' loop, `dst` is the shared tile it fills from the global tensor `src`."""

    def __init__(self, copy: ir.Copy, deps, swizzle, block_elems, n_blocks, box):
        self.copy = self.stmt = copy
        self.dst, self.src = copy.dst.buffer, copy.src.buffer
        self.deps = deps
        self.swizzle = swizzle
        self.block_elems = block_elems
        self.n_blocks = n_blocks
        self.box = box
        self.bytes = n_blocks * copy.src.buffer.dtype.bytes * _prod(box)
        # (dimension of the box split across the cluster, blocks in the cluster): each block
        # loads one slice and multicasts it to all (see WarpSpecializer._multicast)
        self.multicast = None


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def rows_16_byte_aligned(g: ir.Buffer) -> bool:
    """Every row stride of global tensor `g` (the product of the extents inside each
    dimension) is provably a multiple of 16 bytes, as TMA requires. A symbolic extent is
    provably so when the function was specialised on aligned sizes (align_sizes.py: the
    extent reads `8 * k_div8`)."""
    from ...arith import Analyzer

    inner = ir.const(g.dtype.bytes)
    ana = Analyzer()
    for dim in reversed(g.shape[1:]):
        inner = ir.binary("mul", inner, ir.as_expr(dim))
        if not ana.is_divisible(inner, 16):
            return False
    return True


def tma_plan(copy: ir.Copy, layout, deps, oob_value=None):
    """How TMA performs `copy`: (a TmaPlan, None), or (None, the constraint it breaks).
    `oob_value`: what the source reads outside its tensor when not 0 (copy_oob_value)."""
    src, dst = copy.src, copy.dst
    g, s = src.buffer, dst.buffer
    if oob_value is not None:
        return None, (f"{g.name} reads its T.annotate_safe_value value outside the tensor "
                      "(TMA fills zeros)")
    if g.dtype is not s.dtype:
        return None, f"it converts {g.dtype} to {s.dtype}"
    if g.computed_address:
        return None, f"{g.name} is at an address computed in the kernel (no tensor map)"
    if g.dtype.bits < 8:
        return None, f"{g.dtype} elements are narrower than a byte"
    if g.strides is not None:
        return None, f"{g.name} has explicit strides"
    esize = g.dtype.bytes
    if not rows_16_byte_aligned(g):
        row = g.shape[-1]
        if isinstance(row, int):
            return None, (f"the rows of {g.name} are {row * esize} bytes apart, not a "
                          "multiple of 16")
        return None, (f"the rows of {g.name} are {row} x {esize} bytes apart, not provably "
                      "a multiple of 16")
    # the destination must be the whole tile of one stage
    if any(ir.int_value(st) != 0 for st in dst.starts) or \
            [ir.int_value(e) for e in dst.extents] != list(s.shape) or len(s.shape) < 1:
        return None, f"it fills part of {s.name}, not the whole tile"
    swz = getattr(layout, "swizzle_bytes", None) or 0
    if not swz and not layout.is_row_major():
        return None, f"{s.name}'s layout is neither swizzled nor row-major"
    cols = s.shape[-1]
    if swz:
        block_elems = swz // esize
        if cols % block_elems or (len(s.shape) >= 2 and s.shape[-2] % 8):
            return None, (f"{s.name} ({'x'.join(map(str, s.shape))}) is not whole {swz}-byte "
                          "swizzle atoms")
    else:
        block_elems = cols
        if (cols * esize) % 16:
            return None, f"the rows of {s.name} are not a multiple of 16 bytes"
    n_blocks = cols // block_elems
    ext = [ir.int_value(e) for e in src.extents]
    if any(e is None for e in ext) or ext[-1] != cols:
        return None, "the copied region's extents are not static, whole rows of the tile"
    box = list(ext)
    box[-1] = block_elems
    if any(b > 256 or b < 1 for b in box):
        return None, f"a box of {tuple(box)} elements exceeds TMA's 256 per dimension"
    if _prod(box) * n_blocks != _prod(s.shape):
        return None, "the copied region does not map onto the tile's shape"
    return TmaPlan(copy, deps, swz, block_elems, n_blocks, tuple(box)), None


def tma_tile_stores(ctx, op, name, G, S, row_dim, rows, cols, blk, swizzle, starts,
                    visible=False):
    """One thread writes shared tile S (rows x cols, in column blocks of `blk`) to global G
    at `starts` with TMA instruction `op` (a store or a reduction), after every thread's
    writes of S reach the async proxy; it waits until S has been read, or with `visible`
    until the writes are done and visible to its generic loads (the kernel reads G later).
    Registers the tensor map (box: `rows` along G's dim `row_dim`, `blk` along its innermost
    dim)."""
    box = [1] * len(G.shape)
    box[row_dim] = rows
    box[-1] = blk
    desc = TmaDescriptor(name, G, tuple(box), swizzle)
    desc.param = ir.Var(name, ir.DType("handle"))
    ctx.tma_descriptors.append(desc)
    issue = []
    for b in range(cols // blk):
        coords = list(starts)
        coords[-1] = ir.binary("add", coords[-1], b * blk)
        tensor_map = ir.Call("address_of_param", (desc.param,), ir.DType("handle"))
        issue.append(ir.extern_stmt(op, tensor_map, ir.address_of(S, (0, b * blk)),
                                    *reversed(coords)))
    issue.append(ir.extern_stmt("tl::tma_store_arrive"))
    if visible:
        issue += [ir.extern_stmt("tl::tma_store_wait_complete<0>"), ir.extern_stmt("tl::fence_proxy_async")]
    else:
        issue.append(ir.extern_stmt("tl::tma_store_wait<0>"))
    # generic writes of S -> async-proxy reads by TMA: fence in every writer, then barrier
    return (ir.extern_stmt("tl::fence_proxy_async"), ir.extern_stmt("__syncthreads"),
            ir.If(ir.compare("eq", ctx.tid, 0), ir.Seq(tuple(issue)), None))


def _strides(buf: ir.Buffer):
    if buf.strides is not None:
        return [ir.as_expr(x) for x in buf.strides]
    out, acc = [], ir.const(1)
    for n in reversed(buf.shape):
        out.append(acc)
        acc = ir.binary("mul", acc, ir.as_expr(n))
    return list(reversed(out))


def contiguous_offset(region: ir.BufferRegion, analyzer):
    """The element offset of a region that is one contiguous run of its buffer (every
    dimension inside the first partial one spans the whole buffer; the ones outside it have
    extent 1), else None."""
    buf = region.buffer
    strides = _strides(buf)
    expected = ir.const(1)
    partial = False
    for d in range(len(buf.shape) - 1, -1, -1):
        start, extent = region.region[d]
        unit = analyzer.prove(ir.compare("eq", extent, 1))
        if partial:
            if not unit:
                return None
            continue
        if not unit and not analyzer.prove(ir.compare("eq", strides[d], expected)):
            return None
        whole = analyzer.prove(ir.logical_and(ir.compare("eq", start, 0),
                                              ir.compare("eq", extent, buf.shape[d])))
        if whole:
            expected = ir.binary("mul", expected, ir.as_expr(buf.shape[d]))
        else:
            partial = True
    offset = ir.const(0)
    for (start, _), st in zip(region.region, strides):
        offset = ir.binary("add", offset, ir.binary("mul", start, st))
    return analyzer.simplify(offset)
