"""Printing, annotations, warp primitives and escape hatches to hand-written CUDA."""

from __future__ import annotations

import math

from ..frontend.builder import current_builder, current_loc, emit, error
from ..ir import hooks as ir_hooks
from ..ir import nodes as ir
from ..ir.dtype import DType


def print(obj=None, msg: str = "", warp_group_id: int = 0, warp_id: int = 0):  # noqa: A001
    """Print a value or a whole buffer from the device (on the CPU interpreter: to stdout)."""
    b = current_builder(what="T.print")
    if not b.in_kernel():
        raise error(RuntimeError, "T.print must be inside `with T.Kernel(...)`")
    if obj is None:
        emit(ir.Print, None, str(msg))
    elif isinstance(obj, ir.Buffer) and obj.scope != "local.var":
        emit(ir.Print, ir.BufferRegion.full(obj), str(msg))
    elif isinstance(obj, ir.BufferRegion):
        emit(ir.Print, obj, str(msg))
    elif isinstance(obj, str) and not msg:
        emit(ir.Print, None, obj)
    else:
        emit(ir.Print, ir.as_expr(obj), str(msg))


def _kernel_attrs():
    return current_builder(what="this annotation").kernel.data["attrs"]


def use_swizzle(panel_size: int = 8, order: str = "row", enable: bool = True):
    """Renumber blocks in panels of `panel_size` for L2 locality (results are unchanged).
    Without it, a GEMM-like kernel of 512 or more blocks is launched in panels of 8 rows
    anyway (transform/rasterize.py); `enable=False` or `panel_size=0` keeps launch order."""
    if not enable or panel_size is None or panel_size <= 0:
        _kernel_attrs().append(("use_swizzle", None))  # explicitly off
        return
    if order not in ("row", "column", "col"):
        raise error(ValueError, f"T.use_swizzle order must be 'row' or 'column', got {order!r}")
    _kernel_attrs().append(("use_swizzle", (int(panel_size), "row" if order == "row" else
                                            "column")))


def annotate_pass_configs(configs: dict):
    """Pass configs of this function (`{PassConfigKey.TL_ENABLE_FAST_MATH: True}`), merged
    under those `tilelang.compile` / `@tilelang.jit` are given (theirs win). Anywhere in the
    function body, before or after the tensor annotations."""
    b = current_builder(what="T.annotate_pass_configs")
    if not isinstance(configs, dict):
        raise error(TypeError, f"T.annotate_pass_configs takes a dict of pass configs, got "
                               f"{type(configs).__name__}")
    b.attrs["tilelang_pass_configs"] = dict(configs)


def annotate_compile_flags(flags):
    """Extra CUDA compiler flags of this function (a string or a list of strings), added after
    those `tilelang.compile` / `@tilelang.jit` are given."""
    b = current_builder(what="T.annotate_compile_flags")
    if isinstance(flags, str):
        flags = [flags]
    if not isinstance(flags, (list, tuple)) or not all(isinstance(f, str) for f in flags):
        raise error(TypeError, f"T.annotate_compile_flags takes a string or a list of strings, "
                               f"got {flags!r}")
    b.attrs["tilelang_compile_flags"] = list(flags)


def annotate_layout(layout_map: dict):
    """Fix the physical layout of shared buffers / fragments (results are unchanged).

    A shared tile's layout given as an index map (`Layout(shape, fn)`) that stores every
    element where one of the 32/64/128-byte TMA swizzles does is that swizzle: TMA copies
    use the tensor map's swizzle and gemms read the tile as a swizzled operand."""
    if not isinstance(layout_map, dict):
        raise error(TypeError, "T.annotate_layout takes a dict {buffer: layout}")
    for buf, layout in layout_map.items():
        if not isinstance(buf, ir.Buffer):
            raise error(TypeError, f"T.annotate_layout keys must be buffers, got {buf!r}")
        if callable(layout) and not hasattr(layout, "forward_index") and not hasattr(
                layout, "map_indices"):
            from ..layout import Layout

            layout = Layout.from_function(buf.shape, layout)
        from ..layout.fragment_map import FragmentMap

        if isinstance(layout, FragmentMap):
            raise error(ValueError, f"T.annotate_layout: the fragment given for {buf.name} "
                                    f"cannot be a register layout here ({layout.reason}); "
                                    "this compiler lays out fragments whose map is a thread "
                                    "part plus a local part, each a mixed-radix sum of strides")
        if buf.scope in ("shared", "shared.dyn"):
            _check_injective(buf, layout)
            # a hand-written map equal to a TMA swizzle is that swizzle: TMA copies and
            # wgmma descriptors then use it as they use make_swizzled_layout's
            from ..layout.swizzle import recognised_swizzle

            layout = recognised_swizzle(layout, buf.dtype.bits) or layout
        _check_fits_block(buf, layout)
        _kernel_attrs().append(("layout", (buf, layout)))


def _check_fits_block(buf, layout):
    """A fragment held by part of the block must fit it (layout inference places it from
    thread 0, the others holding copies). Checked here, for both targets, where the block's
    thread count decides: a fragment of whole warps may belong to a role of the block instead
    (warp specialization), which layout inference checks."""
    from ..layout import Fragment

    if not isinstance(layout, Fragment):
        return
    threads = math.prod(current_builder(what="T.annotate_layout").kernel.data["kernel"].threads)
    if layout.num_threads % 32 == 0 and layout.thread_base + layout.num_threads <= threads:
        return
    try:
        layout.fit_to_block(threads)
    except ValueError as e:
        raise error(ValueError, f"T.annotate_layout of {buf.name}: {e}") from None


_ENUMERATION_LIMIT = 1 << 22  # elements of a shared tile checked one by one


def _check_injective(buf, layout):
    """Two elements of a shared tile at one address would silently alias: a layout must give
    every logical element of the buffer its own physical position."""
    from ..layout import Fragment, Layout

    if not isinstance(layout, Layout) or isinstance(layout, Fragment):
        return
    shape = [s for s in buf.shape]
    if not all(isinstance(s, int) for s in shape) or math.prod(shape) > _ENUMERATION_LIMIT \
            or tuple(layout.shape) != tuple(shape):
        return
    try:
        off = layout.offsets().ravel()
    except (TypeError, ValueError):
        return  # a function only the code generator can evaluate: checked there
    if off.size == 0:
        return
    if off.min() < 0:
        k = int(off.argmin())
        raise error(ValueError, f"the layout of shared buffer `{buf.name}` maps element "
                                f"{_coords(k, shape)} to a negative position {int(off[k])}")
    order = off.argsort(kind="stable")
    same = (off[order][1:] == off[order][:-1]).nonzero()[0]
    if same.size:
        a, b = int(order[same[0]]), int(order[same[0] + 1])
        raise error(ValueError, f"the layout of shared buffer `{buf.name}` must be injective: "
                                f"logical elements {_coords(a, shape)} and {_coords(b, shape)} "
                                f"both map to physical coordinates "
                                f"{_physical(layout, _coords(a, shape))}")


def _coords(flat, shape):
    out = []
    for n in reversed(shape):
        out.append(flat % n)
        flat //= n
    return tuple(reversed(out))


def _physical(layout, coords):
    r = layout._fn(*coords)
    return tuple(int(x) for x in r) if isinstance(r, (list, tuple)) else (int(r),)


def annotate_min_blocks_per_sm(min_blocks: int):
    """Ask for at least `min_blocks` resident blocks per SM: the kernel is compiled with
    `__launch_bounds__(threads, min_blocks)`, so ptxas limits registers to fit them. Only
    speed changes (the interpreter ignores it)."""
    if isinstance(min_blocks, ir.Const):
        min_blocks = min_blocks.value
    if isinstance(min_blocks, bool) or not isinstance(min_blocks, int) or min_blocks < 1:
        raise error(ValueError, f"T.annotate_min_blocks_per_sm takes a positive int, got "
                                f"{min_blocks!r}")
    _kernel_attrs().append(("min_blocks_per_sm", min_blocks))


def annotate_safe_value(safe_value_map: dict):
    """Values returned by out-of-bounds global loads (default 0), in the whole kernel, or
    inside a `with T.sblock(...)` in that block only (language/sblock.py)."""
    from .sblock import scoped_safe_values

    scope = scoped_safe_values()
    for buf, value in safe_value_map.items():
        if scope is not None:
            scope[buf] = ir.cast_to(value, buf.dtype)
        else:
            _kernel_attrs().append(("safe_value", (buf, ir.cast_to(value, buf.dtype))))


def annotate_padding(padding_map: dict):
    """The reference's older name of T.annotate_safe_value: the value out-of-bounds global
    loads of each buffer read instead of 0."""
    annotate_safe_value(padding_map)


def annotate_l2_hit_ratio(*args, **kwargs):
    """Accepted for compatibility; a performance hint with no effect here."""


def annotate_restrict_buffers(*args, **kwargs):
    """Accepted for compatibility; pointers are already `__restrict__`."""


def no_set_max_nreg():
    """Keep the automatic warp-specialised pipeline from rebalancing registers (setmaxnreg)."""
    _kernel_attrs().append(("no_set_max_nreg", True))


def disable_warp_group_reg_alloc():
    """Alias of T.no_set_max_nreg."""
    no_set_max_nreg()


def set_max_nreg(reg_count: int, is_inc: int):
    """sm_90 `setmaxnreg`: raise (`is_inc=1`) or lower (0) this warpgroup's register limit to
    `reg_count` (a multiple of 8 in [24, 256]). A no-op on the CPU interpreter."""
    emit(ir.Evaluate, ir.Call("set_max_nreg", (ir.const(reg_count), ir.const(is_inc)),
                              DType("int32")))


def inc_max_nreg(reg_count: int):
    """`T.set_max_nreg(reg_count, 1)`."""
    set_max_nreg(reg_count, 1)


def dec_max_nreg(reg_count: int):
    """`T.set_max_nreg(reg_count, 0)`."""
    set_max_nreg(reg_count, 0)


def annotate_producer_reg_dealloc(reg_count: int = 24):
    """sm_90 register hint for a producer warpgroup: lower its register limit to `reg_count`
    (`setmaxnreg.dec`, the same as `T.dec_max_nreg`). A no-op on the CPU interpreter."""
    dec_max_nreg(reg_count)


def annotate_consumer_reg_alloc(reg_count: int = 240):
    """sm_90 register hint for a consumer warpgroup: raise its register limit to `reg_count`
    (`setmaxnreg.inc`, the same as `T.inc_max_nreg`). A no-op on the CPU interpreter."""
    inc_max_nreg(reg_count)


# ---- synchronisation and warp primitives ---------------------------------------------------------


def _barrier_operand(value, what, name):
    """A named barrier's id or thread count: an int, or an integer expression (checked on the
    GPU, as in the reference: the id a thread computes, e.g. from its warpgroup)."""
    if isinstance(value, ir.Const):
        value = value.value
    if isinstance(value, bool) or not isinstance(value, (int, ir.Expr)) or (
            isinstance(value, ir.Expr) and not value.dtype.is_int):
        raise error(TypeError, f"{what} {name} must be an int or an integer expression, got "
                               f"{value!r}")
    return value


def _named_barrier_args(what, barrier_id, arrive_count):
    barrier_id = _barrier_operand(barrier_id, what, "barrier_id")
    if isinstance(barrier_id, int) and not 0 <= barrier_id < 16:
        raise error(ValueError, f"{what} barrier_id must be in [0, 16) (the hardware's 16 named "
                                f"barriers), got {barrier_id}")
    if arrive_count is None:
        from .kernel import get_thread_extents

        arrive_count = math.prod(get_thread_extents())
    arrive_count = _barrier_operand(arrive_count, what, "arrive_count")
    if isinstance(arrive_count, int) and (arrive_count <= 0 or arrive_count % 32):
        raise error(ValueError, f"{what} arrive_count must be a positive multiple of 32 (whole "
                                f"warps), got {arrive_count!r}")
    return ir.as_expr(barrier_id), ir.as_expr(arrive_count)


def sync_threads(barrier_id=None, arrive_count=None):
    """Block-wide barrier (`__syncthreads()`). With `barrier_id` (0-15, an int or an integer
    expression): the named barrier `bar.sync id, n` for `arrive_count` threads (default: the
    whole block), e.g. one warpgroup inside a T.ws role."""
    if barrier_id is None:
        emit(ir.Evaluate, ir.Call("sync_threads", (), DType("int32")))
        return
    emit(ir.Evaluate, ir.Call("sync_threads",
                              _named_barrier_args("T.sync_threads", barrier_id, arrive_count),
                              DType("int32")))


def named_barrier_arrive(barrier_id, thread_count):
    """Arrive at named barrier `barrier_id` (0-15) of `thread_count` threads without waiting
    (`bar.arrive`): the other side waits with `T.sync_threads(barrier_id, thread_count)`. On
    the CPU interpreter, where thread-dependent branches run one after the other in program
    order, barriers order nothing and this does nothing."""
    emit(ir.Evaluate, ir.Call("named_barrier_arrive",
                              _named_barrier_args("T.named_barrier_arrive", barrier_id,
                                                  thread_count), DType("int32")))


def sync_warp(mask=None):
    """Barrier of the threads of one warp (`__syncwarp()`)."""
    emit(ir.Evaluate, ir.Call("sync_warp", (), DType("int32")))


def pdl_trigger():
    """Programmatic dependent launch: let the next kernel of the program (or of the stream)
    start before this one finishes (`griddepcontrol.launch_dependents`, sm_90+). The kernel
    that depends on this one's results calls `T.pdl_sync()` before reading them. Elsewhere
    (older GPUs, the CPU interpreter) kernels run one after the other and this does nothing."""
    emit(ir.Evaluate, ir.Call("pdl_trigger", (), DType("int32")))


def pdl_sync():
    """Programmatic dependent launch: wait until the previous kernel has finished and its
    writes are visible (`griddepcontrol.wait`, sm_90+); see `T.pdl_trigger`."""
    emit(ir.Evaluate, ir.Call("pdl_sync", (), DType("int32")))


def sync_global():
    """Grid-wide barrier (not supported: raises a located error; see T.sync_grid)."""
    raise error(NotImplementedError, "T.sync_global is not supported; T.sync_grid() is the "
                                     "grid-wide barrier")


def sync_grid():
    """Grid-wide barrier: every thread of every block of the kernel waits here until all have
    arrived, and their earlier global-memory writes are visible after it
    (`cooperative_groups::this_grid().sync()`). The kernel is launched cooperatively (all
    blocks resident at once: a grid larger than the GPU holds is a launch error). Every thread
    of the block must reach it. On the CPU interpreter the blocks of such a kernel run side by
    side."""
    b = current_builder(what="T.sync_grid")
    if not b.in_kernel():
        raise error(RuntimeError, "T.sync_grid must be inside `with T.Kernel(...)`")
    if ("cooperative", True) not in b.kernel.data["attrs"]:
        b.kernel.data["attrs"].append(("cooperative", True))
    _sync_call(ir.GRID_SYNC)


def _shfl(op, value, delta, width):
    v = ir.as_expr(value)
    return ir.Call(op, (v, ir.as_expr(delta), ir.as_expr(width)), v.dtype)


def shfl_xor(value, offset, width=32, mask=None):
    """The value held by lane `lane ^ offset` of the warp."""
    return _shfl("shfl_xor", value, offset, width)


def shfl_down(value, offset, width=32, mask=None):
    """The value held by lane `lane + offset` (own value past the end)."""
    return _shfl("shfl_down", value, offset, width)


def shfl_up(value, offset, width=32, mask=None):
    """The value held by lane `lane - offset` (own value before the start)."""
    return _shfl("shfl_up", value, offset, width)


def shfl_sync(value, src_lane, width=32, mask=None):
    """The value held by lane `src_lane` of the warp (broadcast)."""
    return _shfl("shfl_sync", value, src_lane, width)


def tvm_warp_shuffle(mask, value, src_lane, width, warp_size=32):
    """TVM's `__shfl_sync(mask, value, src_lane, width)`: the value held by lane `src_lane`
    of this lane's `width`-lane segment (`T.shfl_sync`); every lane of the warp takes part."""
    return shfl_sync(value, src_lane, width)


def index_to_coordinates(index, shape):
    """The coordinates (row-major) of the flat `index` in a tile of `shape`."""
    coords = []
    for extent in reversed(list(shape)):
        coords.append(index % extent)
        index = index // extent
    return list(reversed(coords))


def _dp4a_operand(x, what):
    if isinstance(x, ir.Buffer):
        return x, (ir.const(0),) * len(x.shape)
    if isinstance(x, ir.BufferRegion):
        return x.buffer, tuple(ir.as_expr(s) for s in x.starts)
    if isinstance(x, ir.Load):
        return x.buffer, x.indices
    raise error(TypeError, f"T.dp4a {what} must be a buffer or a buffer element, got {x!r}")


def dp4a(A, B, C):
    """`C += A[0]*B[0] + ... + A[3]*B[3]`: four signed int8 products accumulated into the
    int32 element C (A, B: buffers or elements, the four consecutive elements from there)."""
    (a, ai), (b, bi), (c, ci) = (_dp4a_operand(x, w) for x, w in ((A, "A"), (B, "B"),
                                                                  (C, "C")))
    for buf, name in ((a, "A"), (b, "B")):
        if buf.dtype.name != "int8":
            raise error(ValueError, f"dp4a requires int8 inputs, got {name}.dtype="
                                    f"'{buf.dtype.name}'")
    if c.dtype.name != "int32":
        raise error(ValueError, f"dp4a requires an int32 accumulator, got C.dtype="
                                f"'{c.dtype.name}'")
    i32 = DType("int32")
    total = ir.Load(c, tuple(ci), i32)
    for k in range(4):
        ak = tuple(ai[:-1]) + (ir.binary("add", ai[-1], k),)
        bk = tuple(bi[:-1]) + (ir.binary("add", bi[-1], k),)
        total = ir.binary("add", total, ir.binary(
            "mul", ir.cast_to(ir.Load(a, ak, a.dtype), i32), ir.cast_to(ir.Load(b, bk, b.dtype),
                                                                        i32)))
    emit(ir.Store, c, tuple(ci), total)


# ---- warp votes and block votes -----------------------------------------------------------------

_FULL_WARP = 0xFFFFFFFF


def _predicate(pred, what):
    p = ir.as_expr(pred)
    if not (p.dtype.is_int or p.dtype.is_bool) or p.dtype.lanes != 1:
        raise error(TypeError, f"T.{what} requires an integer or boolean predicate, got "
                               f"{p.dtype}")
    return ir.cast_to(p, DType("int32"))


def _vote(op, pred, mask, dtype, what):
    m = ir.cast_to(mask, DType("uint32"))
    return ir.Call(op, (m, _predicate(pred, what)), DType(dtype))


def any_sync(predicate, mask=_FULL_WARP):
    """Non-zero (int32) if `predicate` is non-zero in any lane of `mask` of this warp
    (`__any_sync`). Every lane of `mask` must execute it."""
    return _vote("any_sync", predicate, mask, "int32", "any_sync")


def all_sync(predicate, mask=_FULL_WARP):
    """Non-zero (int32) if `predicate` is non-zero in every lane of `mask` of this warp
    (`__all_sync`)."""
    return _vote("all_sync", predicate, mask, "int32", "all_sync")


def ballot_sync(predicate, mask=_FULL_WARP):
    """uint64 whose bit n is set if lane n of `mask` has a non-zero `predicate`
    (`__ballot_sync`, zero-extended)."""
    return _vote("ballot_sync", predicate, mask, "uint64", "ballot_sync")


def ballot(predicate):
    """`T.ballot_sync(predicate)` over the whole warp."""
    return _vote("ballot_sync", predicate, _FULL_WARP, "uint64", "ballot")


def activemask():
    """uint64 with a bit set for each lane of this warp that executes it (`__activemask`)."""
    return ir.Call("activemask", (), DType("uint64"))


def syncthreads_count(predicate):
    """Block barrier returning (int32) how many threads had a non-zero `predicate`
    (`__syncthreads_count`). Every thread of the block must reach it."""
    return ir.Call("syncthreads_count", (_predicate(predicate, "syncthreads_count"),),
                   DType("int32"))


def syncthreads_and(predicate):
    """Block barrier returning non-zero if every thread's `predicate` is non-zero."""
    return ir.Call("syncthreads_and", (_predicate(predicate, "syncthreads_and"),),
                   DType("int32"))


def syncthreads_or(predicate):
    """Block barrier returning non-zero if any thread's `predicate` is non-zero."""
    return ir.Call("syncthreads_or", (_predicate(predicate, "syncthreads_or"),),
                   DType("int32"))


def match_any_sync(value, mask=_FULL_WARP):
    """uint32 mask of the lanes of `mask` whose `value` equals this lane's
    (`__match_any_sync`)."""
    v = ir.as_expr(value)
    if v.dtype.lanes != 1 or not (v.dtype.is_int or v.dtype.is_float or v.dtype.is_bool):
        raise error(TypeError, f"T.match_any_sync compares scalars, got {v.dtype}")
    return ir.Call("match_any_sync", (ir.cast_to(mask, DType("uint32")), v), DType("uint32"))


def match_all_sync(value, mask=_FULL_WARP):
    """`mask` (uint32) if every lane of it holds the same `value`, else 0
    (`__match_all_sync`)."""
    v = ir.as_expr(value)
    if v.dtype.lanes != 1 or not (v.dtype.is_int or v.dtype.is_float or v.dtype.is_bool):
        raise error(TypeError, f"T.match_all_sync compares scalars, got {v.dtype}")
    return ir.Call("match_all_sync", (ir.cast_to(mask, DType("uint32")), v), DType("uint32"))


def __ffs(value):  # noqa: N802 - the reference's (and CUDA's) name
    """One-based position of the least significant set bit of an integer (int32), 0 for 0
    (`__ffs` / `__ffsll`)."""
    v = ir.as_expr(value)
    if not v.dtype.is_int or v.dtype.lanes != 1:
        raise error(TypeError, f"T.__ffs takes an integer, got {v.dtype}")
    return ir.Call("ffs", (v,), DType("int32"))


def __fns(mask, base, offset):  # noqa: N802
    """Zero-based position (uint32) of the `offset`-th set bit of the 32-bit `mask` counting
    from bit `base` upwards (offset > 0, base included), downwards (offset < 0), or `base`
    itself if set (offset 0); 0xFFFFFFFF when there is none (`__fns`)."""
    args = (ir.cast_to(mask, DType("uint32")), ir.cast_to(base, DType("uint32")),
            ir.cast_to(offset, DType("int32")))
    return ir.Call("fns", args, DType("uint32"))


# ---- warp all-reductions ----------------------------------------------------------------------

def _warp_reduce(kind, value):
    v = ir.as_expr(value)
    dt = v.dtype
    ok = dt.lanes == 1 and (dt.is_int or (kind in ("sum", "max", "min") and dt.is_float
                                          and not dt.is_float8))
    if not ok:
        kinds = "an integer" if kind in ("bitand", "bitor") else "an integer or float"
        raise error(TypeError, f"T.warp_reduce_{kind} needs {kinds} scalar, got {dt}")
    return ir.Call(f"warp_reduce_{kind}", (v,), dt)


def warp_reduce_sum(value):
    """Sum of `value` over the 32 lanes of the warp; every lane gets the result (xor-shuffle
    butterfly). All lanes of the warp must call it, outside `T.Parallel`."""
    return _warp_reduce("sum", value)


def warp_reduce_max(value):
    """Maximum of `value` over the 32 lanes of the warp (a NaN lane is ignored, as `T.max`);
    every lane gets the result. All lanes of the warp must call it, outside `T.Parallel`."""
    return _warp_reduce("max", value)


def warp_reduce_min(value):
    """Minimum of `value` over the 32 lanes of the warp (a NaN lane is ignored, as `T.min`);
    every lane gets the result. All lanes of the warp must call it, outside `T.Parallel`."""
    return _warp_reduce("min", value)


def warp_reduce_bitand(value):
    """Bitwise and of the integer `value` over the 32 lanes of the warp; every lane gets the
    result. All lanes of the warp must call it, outside `T.Parallel`."""
    return _warp_reduce("bitand", value)


def warp_reduce_bitor(value):
    """Bitwise or of the integer `value` over the 32 lanes of the warp; every lane gets the
    result. All lanes of the warp must call it, outside `T.Parallel`."""
    return _warp_reduce("bitor", value)


# ---- logical reductions over a buffer ---------------------------------------------------------

_MAX_LOGICAL_ELEMS = 1024


def _region_truths(arg, what):
    if isinstance(arg, ir.Buffer):
        region = ir.BufferRegion.full(arg)
    elif isinstance(arg, ir.BufferRegion):
        region = arg
    else:
        raise error(TypeError, f"T.{what} takes a buffer or a buffer region such as "
                               f"A[i, 0:8], got {arg!r}")
    buf = region.buffer
    extents = []
    for ext in region.extents:
        e = ext.value if isinstance(ext, ir.Const) else ext
        if not isinstance(e, int):
            raise error(ValueError, f"T.{what} needs a region of static size, got extent {ext}")
        extents.append(e)
    count = 1
    for e in extents:
        count *= e
    if count > _MAX_LOGICAL_ELEMS:
        raise error(ValueError, f"T.{what} reads each element in one thread; {count} elements "
                                f"is more than {_MAX_LOGICAL_ELEMS} (reduce with T.reduce_* "
                                "instead)")
    import itertools

    truths = []
    for offs in itertools.product(*(range(e) for e in extents)):
        idx = tuple(ir.binary("add", s, o) if o else ir.as_expr(s)
                    for s, o in zip(region.starts, offs))
        load = ir.Load(buf, idx, buf.dtype)
        truths.append(load if buf.dtype.is_bool else ir.compare("ne", load,
                                                                ir.const(0, buf.dtype)))
    return truths


def _balanced(op, items):
    # a balanced tree keeps the expression depth logarithmic in the element count
    while len(items) > 1:
        items = [op(items[i], items[i + 1]) if i + 1 < len(items) else items[i]
                 for i in range(0, len(items), 2)]
    return items[0]


def any_of(buffer):
    """True when any element of `buffer` (a buffer or a static region such as `A[i, 0:8]`) is
    true (non-zero). Each thread reads every element itself: use it on locals, shared tiles or
    global rows, not on fragments."""
    truths = _region_truths(buffer, "any_of")
    return _balanced(ir.logical_or, truths) if truths else ir.const(False)


def all_of(buffer):
    """True when every element of `buffer` (a buffer or a static region such as `A[i, 0:8]`)
    is true (non-zero). Each thread reads every element itself: use it on locals, shared tiles
    or global rows, not on fragments."""
    truths = _region_truths(buffer, "all_of")
    return _balanced(ir.logical_and, truths) if truths else ir.const(True)


def device_assert(cond, msg=""):
    """Check `cond` in every thread that reaches it; a failure stops the kernel with
    `msg` (the interpreter raises AssertionError at this line)."""
    emit(ir.Assert, ir.as_expr(cond), str(msg))


def func_attr(attrs):
    """`T.func_attr({"tir.noalias": True, ...})`: attributes of the function being traced
    (`func.attrs`); they record facts about it and change nothing in its code."""
    if not isinstance(attrs, dict) or not all(isinstance(k, str) for k in attrs):
        raise error(TypeError, f"T.func_attr takes a dict of str keys, got {attrs!r}")
    b = current_builder(what="T.func_attr")
    reserved = [k for k in attrs if k.endswith("_hook")]
    if reserved:
        raise error(ValueError, f"T.func_attr: {reserved[0]!r} is reserved")
    b.attrs.update(attrs)


def let(var, value, body=None):
    """`v = T.int32(); T.let(v, expr)`: bind the symbol `v` to `expr` for the statements that
    follow in this scope (a kernel-side `v = expr` that names an existing symbol). With
    `body`, the expression `body` with `v` standing for `value`."""
    if not isinstance(var, ir.Var):
        raise error(TypeError, f"T.let binds a symbol such as `T.int32()`, got "
                               f"{type(var).__name__} {var!r}")
    value = ir.cast_to(ir.as_expr(value), var.dtype)
    if body is not None:
        from ..ir.visitor import substitute

        return substitute(ir.as_expr(body), {var: value})
    b = current_builder(what="T.let")
    if id(var) in b.let_bound:
        raise error(ValueError, f"T.let: {var.name} is already bound in this kernel; a symbol "
                                "is bound once (make another with T.int32())")
    b.let_bound.add(id(var))
    b.frame.items.append(("let", var, value, current_loc()))


def assume(cond):
    """Promise that `cond` holds from here to the end of the enclosing block (at function
    level: in every kernel launched after it). The compiler may rely on it: bounds guards it
    implies are dropped (`T.assume(0 <= i and i < N)` before `A[i]`), and the bounds it puts
    on a loop or kernel variable are used like those of an enclosing `if`. A condition on the
    function's sizes and scalar arguments alone is checked at every call (RuntimeError
    "Assume: ..."); any other is checked by the CPU interpreter where it is reached, and is
    undefined behaviour on the GPU when false."""
    b = current_builder(what="T.assume")
    if isinstance(cond, bool) or (isinstance(cond, ir.Const) and cond.dtype.is_bool):
        value = cond if isinstance(cond, bool) else bool(cond.value)
        if not value:
            raise error(ValueError, "T.assume(False): the assumed condition never holds")
        return
    e = ir.as_expr(cond)
    if not e.dtype.is_bool:
        e = ir.compare("ne", e, ir.const(0, e.dtype))
    if b.in_kernel():
        b.scope_attr("assume", e)
    else:  # wraps the body of each kernel opened after it (language/kernel.py)
        b.function_assumptions.append((e, current_loc()))


# ---- explicit Hopper pipelines (mbarriers, warpgroup roles, wgmma waits) ------------------------


def create_list_of_mbarrier(*arrive_counts):
    """The reference's barrier list: `T.create_list_of_mbarrier(128, 128)` makes one mbarrier
    per count (as T.alloc_barrier([128, 128])); the mbarrier operations then name them by
    index (`T.mbarrier_arrive(0)`, `T.mbarrier_wait_parity(1, phase)`, `T.get_mbarrier(i)`)."""
    from .alloc import alloc_barrier

    counts = arrive_counts[0] if len(arrive_counts) == 1 and \
        isinstance(arrive_counts[0], (list, tuple)) else arrive_counts
    if not counts:
        raise error(ValueError, "T.create_list_of_mbarrier needs at least one arrive count")
    b = current_builder(what="T.create_list_of_mbarrier")
    if b.kernel.data.get("mbarrier_list") is not None:
        raise error(ValueError, "T.create_list_of_mbarrier is called twice in one kernel")
    buf = alloc_barrier([int(c) if isinstance(c, ir.Const) else c for c in counts])
    b.kernel.data["mbarrier_list"] = buf
    return buf


def get_mbarrier(index):
    """Barrier `index` of the kernel's T.create_list_of_mbarrier list."""
    b = current_builder(what="T.get_mbarrier")
    buf = b.kernel.data.get("mbarrier_list") if b.in_kernel() else None
    if buf is None:
        raise error(ValueError, "T.get_mbarrier / an mbarrier named by index needs "
                                "T.create_list_of_mbarrier(...) earlier in the kernel")
    idx = ir.as_expr(index)
    if isinstance(idx, ir.Const) and not 0 <= idx.value < buf.shape[0]:
        raise error(IndexError, f"mbarrier {idx.value} does not exist: the kernel's list has "
                                f"{buf.shape[0]}")
    return ir.Load(buf, (idx,), buf.dtype)


def barrier_load(bar, what):
    """The mbarrier element `bar` names: a Load of a `T.alloc_barrier` element (`bars[i]`), a
    whole one-barrier buffer (its element 0), or an int / int expression indexing the
    kernel's `T.create_list_of_mbarrier` list."""
    if isinstance(bar, int) and not isinstance(bar, bool) or \
            (isinstance(bar, ir.Expr) and not isinstance(bar, ir.Load) and bar.dtype.is_int):
        bar = get_mbarrier(bar)  # the reference names list barriers by index
    if isinstance(bar, ir.Buffer):
        bar = ir.Load(bar, (ir.const(0),), bar.dtype)
    if not isinstance(bar, ir.Load) or bar.dtype.name != "uint64":
        raise error(TypeError, f"{what} needs a barrier from T.alloc_barrier (e.g. bars[0]), "
                               f"got {bar!r}")
    return bar


def _barrier_ptr(bar, what):
    return ir.Call("address_of", (barrier_load(bar, what),), DType("handle"))


def _sync_call(name, *args):
    emit(ir.Evaluate, ir.Call("call_extern", (name,) + tuple(args), DType("void")))


def _one_barrier(bar, mbarrier, what):
    """The barrier given positionally or as the reference's `mbarrier=` keyword."""
    if (bar is None) == (mbarrier is None):
        raise error(TypeError, f"{what} takes one barrier (positionally or as mbarrier=)")
    return bar if mbarrier is None else mbarrier


def barrier_arrive(bar=None, *, mbarrier=None):
    """Arrive on an mbarrier (counts one of its expected arrivals); `mbarrier=` is the
    reference's keyword for the barrier."""
    bar = _one_barrier(bar, mbarrier, "T.barrier_arrive")
    _sync_call("tl::mbarrier_arrive", _barrier_ptr(bar, "T.barrier_arrive"))


def barrier_wait(bar=None, parity=None, *, mbarrier=None):
    """Wait until the phase of `parity` (0 or 1) of an mbarrier has completed (a fresh
    barrier reports parity 1 complete). `mbarrier=` is the reference's keyword for the
    barrier."""
    bar = _one_barrier(bar, mbarrier, "T.barrier_wait")
    if parity is None:
        raise error(TypeError, "T.barrier_wait needs the parity to wait for (0 or 1)")
    _sync_call("tl::mbarrier_wait", _barrier_ptr(bar, "T.barrier_wait"), ir.as_expr(parity))


def mbarrier_expect_tx(bar=None, nbytes=None, *, mbarrier=None, tx=None):
    """Add `nbytes` to the transaction count an mbarrier's current phase waits for, without
    arriving (the reference's meaning: `mbarrier.expect_tx`); the asynchronous (TMA)
    transfers that complete those bytes, and the expected arrivals, end the phase."""
    bar = _one_barrier(bar, mbarrier, "T.mbarrier_expect_tx")
    nbytes = nbytes if tx is None else tx
    if nbytes is None:
        raise error(TypeError, "T.mbarrier_expect_tx needs the number of bytes")
    _sync_call("tl::mbarrier_expect_tx", _barrier_ptr(bar, "T.mbarrier_expect_tx"),
               ir.as_expr(nbytes))


def mbarrier_arrive_expect_tx(bar=None, nbytes=None, *, mbarrier=None, tx=None):
    """`T.mbarrier_expect_tx` then `T.mbarrier_arrive` in one instruction
    (`mbarrier.arrive.expect_tx`)."""
    bar = _one_barrier(bar, mbarrier, "T.mbarrier_arrive_expect_tx")
    nbytes = nbytes if tx is None else tx
    if nbytes is None:
        raise error(TypeError, "T.mbarrier_arrive_expect_tx needs the number of bytes")
    _sync_call("tl::mbarrier_arrive_expect_tx",
               _barrier_ptr(bar, "T.mbarrier_arrive_expect_tx"), ir.as_expr(nbytes))


def mbarrier_arrive(bar=None, cta_id=None, *, mbarrier=None):
    """Arrive on an mbarrier (`mbarrier=` is the reference's keyword); with `cta_id`, on the
    same barrier of block `cta_id` of the cluster (sm_90; `T.alloc_cluster_barrier`, made
    visible to the peers by a `T.cluster_sync()` after the allocation)."""
    if cta_id is None:
        barrier_arrive(bar, mbarrier=mbarrier)
        return
    bar = _one_barrier(bar, mbarrier, "T.mbarrier_arrive")
    rank = ir.as_expr(cta_id)
    if not rank.dtype.is_int:
        raise error(TypeError, f"T.mbarrier_arrive: cta_id must be an integer, got {rank.dtype}")
    _sync_call("tl::mbarrier_arrive_remote", _barrier_ptr(bar, "T.mbarrier_arrive"),
               ir.cast_to(rank, "uint32"))


# ---- thread block clusters (sm_90): every thread of every block of the cluster takes part ----

def cluster_arrive():
    """Arrive on the cluster barrier (`barrier.cluster.arrive.release`): this block's memory
    accesses so far are ordered before what the cluster's blocks do after their
    `T.cluster_wait()`."""
    _sync_call("tl::cluster_arrive")


def cluster_arrive_relaxed():
    """`T.cluster_arrive` without the release ordering (`barrier.cluster.arrive.relaxed`)."""
    _sync_call("tl::cluster_arrive_relaxed")


def cluster_wait():
    """Wait until every thread of every block of the cluster has arrived
    (`barrier.cluster.wait.acquire`)."""
    _sync_call("tl::cluster_wait")


def cluster_sync():
    """`T.cluster_arrive()` then `T.cluster_wait()`: a barrier over the whole cluster."""
    _sync_call("tl::cluster_sync")


def block_rank_in_cluster():
    """This block's rank in its cluster (`%cluster_ctarank`: x fastest; 0 without clusters)."""
    return ir.Call("call_extern", ("tl::cluster_ctarank",), DType("int32"))


def mbarrier_wait_parity(bar=None, parity=None, *, mbarrier=None):
    """Wait until the phase of `parity` of an mbarrier has completed (`T.barrier_wait`)."""
    barrier_wait(bar, parity, mbarrier=mbarrier)


def tma_store_arrive():
    """Commit this thread's outstanding TMA stores as one bulk group
    (`cp.async.bulk.commit_group`; `T.tma_copy` stores commit their own group)."""
    _sync_call("tl::tma_store_arrive")


def tma_store_wait(count: int = 0, read: bool = True):
    """Wait until at most `count` bulk groups of this thread's TMA stores are in flight; with
    `read=True` (the default) only until their shared-memory sources have been read (the
    tile may be overwritten), with `read=False` until the writes are done."""
    if not isinstance(count, int) or count < 0:
        raise error(ValueError, f"T.tma_store_wait count must be a non-negative int, got "
                                f"{count!r}")
    _sync_call(f"tl::tma_store_wait<{count}>" if read else
               f"tl::tma_store_wait_complete<{count}>")


def wait_wgmma(n: int = 0):
    """Wait until at most `n` wgmma groups of this warpgroup are in flight."""
    _sync_call(f"tl::wgmma_wait<{int(n)}>")


def fence_proxy_async():
    """Order this thread's generic shared-memory writes before async-proxy reads (TMA, wgmma)."""
    _sync_call("tl::fence_proxy_async")


class ws:  # noqa: N801 - the reference spells it T.ws
    """`with T.ws(0):` — the body runs only on warpgroup 0 (several ids: any of them). Tile
    operations inside it run on that warpgroup's threads, as in the reference; sibling roles
    synchronise through the user's mbarriers (no block barrier is placed between them)."""

    def __init__(self, *ids):
        self.ids = ids

    def __enter__(self):
        from ..frontend.hooks import If
        from .kernel import get_warp_group_idx

        wg = get_warp_group_idx()
        cond = None
        for i in self.ids:
            c = ir.compare("eq", wg, i)
            cond = c if cond is None else ir.logical_or(cond, c)
        self._if = If(cond)
        self._if.__enter__()
        self._if.then()
        return self

    def __exit__(self, *exc):
        suppress = self._if.__exit__(*exc)
        frame = current_builder().frame  # the enclosing block, now that the branch is closed
        if exc[0] is None and frame.items and isinstance(frame.items[-1], ir.If):
            # marks a region the user synchronises (mbarriers): the barrier pass must not put
            # a block-wide __syncthreads between or inside roles (the other role never comes)
            frame.items[-1] = ir.Attr("warp_role", self.ids, frame.items[-1],
                                      loc=frame.items[-1].loc)
        return suppress


# ---- escape hatches ---------------------------------------------------------------------------


def import_source(source: str | None = None):
    """Add hand-written CUDA source (device functions) to the generated kernel file; None adds
    nothing (as the reference: examples pass an optional source unconditionally)."""
    if source is None:
        return
    if not isinstance(source, str):
        raise error(TypeError, f"T.import_source takes CUDA source text, got "
                               f"{type(source).__name__}")
    b = current_builder(what="T.import_source")
    b.attrs.setdefault("import_source", [])
    if source not in b.attrs["import_source"]:
        b.attrs["import_source"].append(source)


def call_extern(*args, dtype=None):
    """Call a device function by name (defined by `T.import_source` or a CUDA header):
    `T.call_extern(dtype, "name", *args)`, or as the reference also accepts,
    `T.call_extern("name", *args, dtype=dtype)`."""
    if dtype is not None:
        args = (dtype,) + args
    if len(args) < 2 or not isinstance(args[1], str):
        raise error(TypeError, "T.call_extern(dtype, 'function_name', *args) or "
                               "T.call_extern('function_name', *args, dtype=dtype)")
    dtype, func_name, args = args[0], args[1], args[2:]
    dt = DType("void" if dtype in (None, "void") else "handle" if dtype == "handle" else dtype)
    conv = tuple(a if isinstance(a, (str, ir.Expr)) else ir.as_expr(a) for a in args)
    return ir.Call("call_extern", (func_name,) + conv, dt)


def call_intrin(*args, dtype=None):
    """`T.call_extern` under the reference's other name: a call of a CUDA function (the name
    may be any object that prints as one)."""
    if dtype is not None:
        args = (dtype,) + args
    if len(args) >= 2:
        args = (args[0], str(args[1])) + args[2:]
    return call_extern(*args)


def __ldg(load_or_buf, index=None):  # noqa: N802 - the reference's name
    """Read one global element through the read-only data cache (`__ldg(&x[i])` on CUDA; a
    plain load on the interpreter): `T.__ldg(x[i])`, or `T.__ldg(x, i)` for a 1-D buffer."""
    if isinstance(load_or_buf, ir.Buffer):
        if index is None:
            raise error(ValueError, "T.__ldg(Buffer, index) requires an index when passing a "
                                    "Buffer")
        if isinstance(index, (list, tuple)):
            if len(index) != 1:
                raise error(ValueError, "T.__ldg currently supports 1D flattened indices")
            index = index[0]
        if len(load_or_buf.shape) != 1:
            raise error(ValueError, "T.__ldg currently supports 1D flattened indices")
        load_or_buf = ir.Load(load_or_buf, (ir.as_expr(index),), load_or_buf.dtype)
    if not isinstance(load_or_buf, ir.Load):
        raise error(TypeError, f"T.__ldg expects a buffer element such as x[i], got "
                               f"{load_or_buf!r}")
    buf, dt = load_or_buf.buffer, load_or_buf.dtype
    if buf.scope != "global":
        raise error(ValueError, f"T.__ldg reads global memory through the read-only cache; "
                                f"{buf.name} is {buf.scope}")
    if dt.lanes != 1 or dt.is_float8 or dt.is_bool:
        raise error(TypeError, f"T.__ldg loads integers and float16/bfloat16/float32/float64 "
                               f"elements (CUDA's __ldg overloads), got {dt}")
    return ir.Call("ldg", (load_or_buf,), dt)


def address_of(load):
    """The address of a buffer element (for `T.call_extern`)."""
    if isinstance(load, ir.Buffer) and load.scope == "local.var":
        load = ir.Load(load, (ir.const(0),), load.dtype)
    if not isinstance(load, ir.Load):
        raise error(TypeError, f"T.address_of needs a buffer element such as A[i], got {load!r}")
    return ir.Call("address_of", (load,), DType("handle"))


def access_ptr(base, access_type="r", *extents, offset=0, extent=None, ignore_last_ndim=0):
    """A pointer to `base` (a buffer: its first element; `A[i, j]` or a region: that element)
    plus `offset` elements, for `T.call_extern`, `T.ptx_cp_async` and the like. `access_type`
    ("r", "w", "rw") and the extents after it (the reference's extent of the access) do not
    change the pointer."""
    if isinstance(access_type, str) and access_type not in ("r", "w", "rw"):
        raise error(ValueError, f"T.access_ptr access_type must be 'r', 'w' or 'rw', got "
                                f"{access_type!r}")
    if isinstance(base, ir.BufferRegion):
        base = ir.Load(base.buffer, tuple(ir.as_expr(s) for s in base.starts), base.buffer.dtype)
    if isinstance(base, ir.Load):
        if not (isinstance(offset, int) and offset == 0):
            idx = list(base.indices)
            idx[-1] = ir.binary("add", idx[-1], offset)
            base = ir.Load(base.buffer, tuple(idx), base.dtype)
        return ir.Call("address_of", (base,), DType("handle"))
    if not isinstance(base, ir.Buffer):
        raise error(TypeError, f"T.access_ptr needs a buffer, an element or a region, got "
                               f"{base!r}")
    return ir.Call("access_ptr", (base, ir.as_expr(offset)), DType("handle"))


ir_hooks.access_ptr = access_ptr


# ---- explicit cp.async ----------------------------------------------------------------------------


def _element_pointer(ptr, what, scopes):
    if isinstance(ptr, ir.Call) and ptr.op == "access_ptr":
        buf = ptr.args[0]
        ptr = ir.Call("address_of", (ir.Load(buf, (ir.const(0),) * (len(buf.shape) - 1) +
                                             (ptr.args[1],), buf.dtype),), DType("handle"))
    if isinstance(ptr, ir.Load):
        ptr = ir.Call("address_of", (ptr,), DType("handle"))
    if not (isinstance(ptr, ir.Call) and ptr.op == "address_of"
            and isinstance(ptr.args[0], ir.Load)):
        raise error(TypeError, f"{what} takes pointers from T.access_ptr (or T.address_of), "
                               f"got {ptr!r}")
    buf = ptr.args[0].buffer
    if buf.scope not in scopes:
        raise error(ValueError, f"{what}: {buf.name} is in {buf.scope} memory, not "
                                f"{' or '.join(scopes)}")
    return ptr, buf


def ptx_cp_async(dst_access_ptr, src_access_ptr, num_elems, predicate=None):
    """`cp.async` (sm_80+): start copying `num_elems` elements (4, 8 or 16 bytes) from global
    memory (`src_access_ptr`) to shared memory (`dst_access_ptr`), both from `T.access_ptr`,
    without waiting. With `predicate` false, the destination is zero-filled instead. Close
    the thread's group of copies with `T.ptx_commit_group()` and wait with
    `T.ptx_wait_group(n)` (then synchronise the block), or let an mbarrier count them
    (`T.cp_async_barrier_noinc`). On the CPU interpreter the copy happens at once."""
    dst, dbuf = _element_pointer(dst_access_ptr, "T.ptx_cp_async destination",
                                 ("shared", "shared.dyn"))
    src, sbuf = _element_pointer(src_access_ptr, "T.ptx_cp_async source", ("global",))
    if dbuf.dtype.bits != sbuf.dtype.bits:
        raise error(TypeError, f"T.ptx_cp_async copies bytes between elements of one width: "
                               f"{sbuf.name} is {sbuf.dtype}, {dbuf.name} is {dbuf.dtype}")
    n = ir.int_value(ir.as_expr(num_elems))
    nbytes = None if n is None else n * dbuf.dtype.bits // 8
    if nbytes not in (4, 8, 16):
        raise error(ValueError, f"T.ptx_cp_async copies 4, 8 or 16 bytes: {num_elems} "
                                f"{dbuf.dtype} elements is not one of them")
    # ordered by the user's wait_group / mbarrier; the destination written as a shared-window
    # address (codegen/intrinsics.py, `_shared_window_address`)
    attrs = (("async", True), ("shared_window", True))
    if predicate is None:
        call = ir.Call("call_extern", (f"tl::cp_async<{nbytes}>", dst, src), DType("void"),
                       attrs)
    else:
        size = ir.select(ir.as_expr(predicate), ir.const(nbytes), ir.const(0))
        call = ir.Call("call_extern", (f"tl::cp_async_zfill<{nbytes}>", dst, src, size),
                       DType("void"), attrs)
    emit(ir.Evaluate, call)


def ptx_commit_group():
    """`cp.async.commit_group`: close this thread's group of outstanding `T.ptx_cp_async`."""
    _sync_call("tl::cp_async_commit")


def ptx_wait_group(num):
    """`cp.async.wait_group num`: wait until at most `num` of this thread's committed groups
    are still in flight (their data is then visible to this thread; synchronise the block
    before others read it)."""
    n = ir.int_value(ir.as_expr(num))
    if n is None or n < 0:
        raise error(ValueError, f"T.ptx_wait_group needs a static count >= 0, got {num!r}")
    _sync_call(f"tl::cp_async_wait<{n}>")


def cp_async_barrier_noinc(barrier):
    """`cp.async.mbarrier.arrive.noinc`: arrive on the mbarrier (one of its expected
    arrivals) once every `T.ptx_cp_async` this thread issued so far has completed."""
    _sync_call("tl::mbarrier_cp_async_arrive_noinc", _barrier_ptr(barrier,
                                                                 "T.cp_async_barrier_noinc"))


def ptx(*args, **kwargs):
    """Inline PTX (not supported: use T.import_source with an asm() device function)."""
    raise error(NotImplementedError, "inline PTX through T.ptx is not supported; use "
                                     "T.import_source with an asm() device function")


def evaluate(value):
    """Evaluate an expression for its side effects (e.g. a T.call_extern returning void)."""
    from .thread_reduce import EMITTED

    if value is EMITTED:  # T.tvm_thread_allreduce's statements are in the kernel already
        return
    emit(ir.Evaluate, ir.as_expr(value))


def comment(text: str):
    """A comment in the generated code (ignored by the interpreter)."""
    emit(ir.Evaluate, ir.Call("comment", (str(text),), DType("int32")))
