"""Printing, annotations, warp primitives and escape hatches to hand-written CUDA."""

from __future__ import annotations

import math

from ..frontend.builder import current_builder, emit, error
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


def annotate_layout(layout_map: dict):
    """Fix the physical layout of shared buffers / fragments (results are unchanged)."""
    if not isinstance(layout_map, dict):
        raise error(TypeError, "T.annotate_layout takes a dict {buffer: layout}")
    for buf, layout in layout_map.items():
        if not isinstance(buf, ir.Buffer):
            raise error(TypeError, f"T.annotate_layout keys must be buffers, got {buf!r}")
        if callable(layout) and not hasattr(layout, "forward_index") and not hasattr(
                layout, "map_indices"):
            from ..layout import Layout

            layout = Layout.from_function(buf.shape, layout)
        _kernel_attrs().append(("layout", (buf, layout)))


def annotate_safe_value(safe_value_map: dict):
    """Values returned by out-of-bounds global loads (default 0)."""
    for buf, value in safe_value_map.items():
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


def sync_threads(barrier_id=None, arrive_count=None):
    """Block-wide barrier (`__syncthreads()`). With `barrier_id` (1-15): a named barrier for
    `arrive_count` threads (default: the whole block), e.g. one warpgroup inside a T.ws role."""
    if barrier_id is None:
        emit(ir.Evaluate, ir.Call("sync_threads", (), DType("int32")))
        return
    if not isinstance(barrier_id, int) or not 0 <= barrier_id < 16:
        raise error(ValueError, f"T.sync_threads barrier_id must be an int in [0, 16), got "
                                f"{barrier_id!r}")
    if arrive_count is None:
        from .kernel import get_thread_extents

        arrive_count = math.prod(get_thread_extents())
    if not isinstance(arrive_count, int) or arrive_count <= 0 or arrive_count % 32:
        raise error(ValueError, f"T.sync_threads arrive_count must be a positive multiple of "
                                f"32 (whole warps), got {arrive_count!r}")
    emit(ir.Evaluate, ir.Call("sync_threads", (ir.const(barrier_id), ir.const(arrive_count)),
                              DType("int32")))


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
    """Grid-wide barrier (not supported: raises a located error)."""
    raise error(NotImplementedError, "T.sync_global (grid-wide barrier) is not supported")


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


def _barrier_ptr(bar, what):
    if isinstance(bar, int) and not isinstance(bar, bool) or \
            (isinstance(bar, ir.Expr) and not isinstance(bar, ir.Load) and bar.dtype.is_int):
        bar = get_mbarrier(bar)  # the reference names list barriers by index
    if isinstance(bar, ir.Buffer):
        bar = ir.Load(bar, (ir.const(0),), bar.dtype)
    if not isinstance(bar, ir.Load) or bar.dtype.name != "uint64":
        raise error(TypeError, f"{what} needs a barrier from T.alloc_barrier (e.g. bars[0]), "
                               f"got {bar!r}")
    return ir.Call("address_of", (bar,), DType("handle"))


def _sync_call(name, *args):
    emit(ir.Evaluate, ir.Call("call_extern", (name,) + tuple(args), DType("void")))


def barrier_arrive(bar):
    """Arrive on an mbarrier (counts one of its expected arrivals)."""
    _sync_call("tl::mbarrier_arrive", _barrier_ptr(bar, "T.barrier_arrive"))


def barrier_wait(bar, parity):
    """Wait until the phase of `parity` (0 or 1) of an mbarrier has completed."""
    _sync_call("tl::mbarrier_wait", _barrier_ptr(bar, "T.barrier_wait"), ir.as_expr(parity))


def mbarrier_expect_tx(bar, nbytes):
    """Arrive and expect `nbytes` of asynchronous (TMA) transfers on an mbarrier."""
    _sync_call("tl::mbarrier_arrive_expect_tx", _barrier_ptr(bar, "T.mbarrier_expect_tx"),
               ir.as_expr(nbytes))


mbarrier_arrive = barrier_arrive
mbarrier_wait_parity = barrier_wait


def wait_wgmma(n: int = 0):
    """Wait until at most `n` wgmma groups of this warpgroup are in flight."""
    _sync_call(f"tl::wgmma_wait<{int(n)}>")


def fence_proxy_async():
    """Order this thread's generic shared-memory writes before async-proxy reads (TMA, wgmma)."""
    _sync_call("tl::fence_proxy_async")


class ws:  # noqa: N801 - the reference spells it T.ws
    """`with T.ws(0):` — the body runs only on warpgroup 0 (several ids: any of them)."""

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


def import_source(source: str):
    """Add hand-written CUDA source (device functions) to the generated kernel file."""
    b = current_builder(what="T.import_source")
    b.attrs.setdefault("import_source", [])
    if source not in b.attrs["import_source"]:
        b.attrs["import_source"].append(source)


def call_extern(dtype, func_name: str, *args):
    """Call a device function by name (defined by `T.import_source` or a CUDA header)."""
    if not isinstance(func_name, str):
        raise error(TypeError, "T.call_extern(dtype, 'function_name', *args)")
    dt = DType("void" if dtype in (None, "void") else "handle" if dtype == "handle" else dtype)
    conv = tuple(a if isinstance(a, (str, ir.Expr)) else ir.as_expr(a) for a in args)
    return ir.Call("call_extern", (func_name,) + conv, dt)


def call_intrin(dtype, name, *args):
    """`T.call_extern` under the reference's other name: a call of a CUDA function."""
    return call_extern(dtype, str(name), *args)


def address_of(load):
    """The address of a buffer element (for `T.call_extern`)."""
    if isinstance(load, ir.Buffer) and load.scope == "local.var":
        load = ir.Load(load, (ir.const(0),), load.dtype)
    if not isinstance(load, ir.Load):
        raise error(TypeError, f"T.address_of needs a buffer element such as A[i], got {load!r}")
    return ir.Call("address_of", (load,), DType("handle"))


def access_ptr(buffer, access_mask="r", offset=0, extent=None, *args, **kwargs):
    """A pointer to `buffer` (+ `offset` elements) for `T.call_extern`."""
    if isinstance(buffer, ir.BufferRegion):
        base = ir.Load(buffer.buffer, tuple(ir.as_expr(s) for s in buffer.starts),
                       buffer.buffer.dtype)
        return ir.Call("address_of", (base,), DType("handle"))
    if isinstance(buffer, ir.Load):
        return ir.Call("address_of", (buffer,), DType("handle"))
    if not isinstance(buffer, ir.Buffer):
        raise error(TypeError, f"access_ptr needs a buffer, got {buffer!r}")
    return ir.Call("access_ptr", (buffer, ir.as_expr(offset)), DType("handle"))


def ptx(*args, **kwargs):
    """Inline PTX (not supported: use T.import_source with an asm() device function)."""
    raise error(NotImplementedError, "inline PTX through T.ptx is not supported; use "
                                     "T.import_source with an asm() device function")


def evaluate(value):
    """Evaluate an expression for its side effects (e.g. a T.call_extern returning void)."""
    emit(ir.Evaluate, ir.as_expr(value))


def comment(text: str):
    """A comment in the generated code (ignored by the interpreter)."""
    emit(ir.Evaluate, ir.Call("comment", (str(text),), DType("int32")))
