"""Buffer allocation: shared, fragment, local, var, global workspaces, barriers."""

from __future__ import annotations

from ..frontend.builder import current_builder, current_loc, error
from ..ir import nodes as ir
from ..ir.dtype import DType

UNNAMED = "__unnamed"


def _shape(shape, what):
    if isinstance(shape, (int, ir.Expr)):
        shape = (shape,)
    out = []
    for s in shape:
        if isinstance(s, bool) or not isinstance(s, (int, ir.Expr)):
            raise error(TypeError, f"{what} shape entries must be ints, got {s!r}")
        if isinstance(s, ir.Const):
            s = s.value
        if isinstance(s, int) and s <= 0:
            raise error(ValueError, f"{what} shape entries must be positive, got {s}")
        out.append(s)
    return tuple(out)


def _block_buffer(shape, dtype, scope, what):
    b = current_builder(what=what)
    if not b.in_kernel():
        raise error(RuntimeError, f"{what} must be called inside `with T.Kernel(...)`")
    shape = _shape(shape, what)
    if not all(isinstance(s, int) for s in shape):
        raise error(ValueError, f"{what} needs a static shape, got {list(shape)}")
    buf = ir.Buffer(UNNAMED, shape, DType(dtype), scope, loc=current_loc())
    b.declare_block_buffer(buf)
    return buf


def alloc_shared(shape, dtype="float32", scope="shared.dyn"):
    """A tile in shared memory, visible to every thread of the block."""
    return _block_buffer(shape, dtype, "shared.dyn" if scope == "shared" else scope,
                         "T.alloc_shared")


def alloc_fragment(shape, dtype="float32", scope="local.fragment"):
    """A block-level tile held in registers, spread over the threads (layout chosen by the
    compiler). Index it inside T.Parallel by any expression, or outside at any index (see
    "Fragments: what an index means" below)."""
    return _block_buffer(shape, dtype, "local.fragment", "T.alloc_fragment")


def alloc_local(shape, dtype="float32", scope="local"):
    """An array private to each thread (uninitialised)."""
    b = current_builder(what="T.alloc_local")
    if not b.in_kernel():
        raise error(RuntimeError, "T.alloc_local must be called inside `with T.Kernel(...)`")
    buf = ir.Buffer(UNNAMED, _shape(shape, "T.alloc_local"), DType(dtype), "local",
                    loc=current_loc())
    b.declare_local(buf)
    return buf


def alloc_var(dtype="float32", init=None, *args, scope="local.var", **kwargs):
    """A scalar private to each thread: read by name, assigned by name (`v = v + 1`).
    Starts at `init` (0 when omitted)."""
    if "init" in kwargs:
        init = kwargs.pop("init")
    if args and init is None:
        init = args[0]
    b = current_builder(what="T.alloc_var")
    if not b.in_kernel():
        raise error(RuntimeError, "T.alloc_var must be called inside `with T.Kernel(...)`")
    dt = DType(dtype)
    if dt.lanes > 1:  # one private element per lane (language/vectors.py)
        from .vectors import VectorVar

        buf = ir.Buffer(UNNAMED, (dt.lanes,), dt.with_lanes(1), "local", loc=current_loc())
        b.declare_local(buf, None)
        var = VectorVar(buf, dt)
        if init is not None:
            var.store(init)
        return var
    buf = ir.Buffer(UNNAMED, (1,), dt, "local.var", loc=current_loc())
    b.declare_local(buf, ir.cast_to(0 if init is None else init, dt))
    return buf


def alloc_global(shape, dtype="float32"):
    """A global-memory workspace allocated for every call (uninitialised)."""
    b = current_builder(what="T.alloc_global")
    buf = ir.Buffer(UNNAMED, _shape(shape, "T.alloc_global"), DType(dtype), "global",
                    loc=current_loc())
    b.workspaces.append(buf)
    return buf


def alloc_buffer(shape, dtype="float32", data=None, strides=None, elem_offset=None,
                 scope="global", align=-1, offset_factor=0, buffer_type="default",
                 axis_separators=None, annotations=None):
    """TVMScript's allocation by scope: "global" (a workspace, `T.alloc_global`), "shared" /
    "shared.dyn" (`T.alloc_shared`), "local.fragment", "local" (`T.alloc_local`) or
    "local.var" (`T.alloc_var`); with `data=X.data`, a view of global tensor X at `shape`
    (`T.Tensor(shape, dtype, X.data)`). Strides, offsets and alignment options are not
    supported."""
    what = "T.alloc_buffer"
    if strides is not None or elem_offset not in (None, 0) or axis_separators:
        raise error(NotImplementedError, f"{what}: strides, elem_offset and axis_separators "
                                         "are not supported")
    if data is not None:
        if scope != "global":
            raise error(NotImplementedError, f"{what}(..., data=...) views global tensors "
                                             f"only, not {scope} memory")
        from .types import make_view

        return make_view(shape, dtype, data)
    if scope == "global":
        return alloc_global(shape, dtype)
    if scope in ("shared", "shared.dyn"):
        return alloc_shared(shape, dtype, scope)
    if scope == "local.fragment":
        return alloc_fragment(shape, dtype)
    if scope == "local":
        return alloc_local(shape, dtype)
    if scope == "local.var":
        if _shape(shape, what) != (1,):
            raise error(ValueError, f"{what}: a local.var holds one value, got shape "
                                    f"{list(shape) if isinstance(shape, (list, tuple)) else shape}")
        return alloc_var(dtype)
    raise error(ValueError, f"{what}: unknown scope {scope!r} (global, shared, shared.dyn, "
                            "local.fragment, local or local.var)")


def alloc_barrier(arrive_count=1):
    """mbarriers in shared memory for explicit producer/consumer pipelines (sm_90): one per
    entry of `arrive_count` (an int or a list), initialised at kernel start with that many
    expected arrivals. Use with T.barrier_arrive / T.barrier_wait / T.mbarrier_expect_tx."""
    counts = arrive_count if isinstance(arrive_count, (list, tuple)) else [arrive_count]
    for c in counts:
        if not isinstance(c, int) or not 1 <= c < 2**20:
            raise error(ValueError, f"T.alloc_barrier arrive counts must be ints in [1, 2^20), "
                                    f"got {c!r}")
    buf = _block_buffer((len(counts),), "uint64", "shared.dyn", "T.alloc_barrier")
    b = current_builder()
    b.kernel.data["attrs"].append(("barrier_init", (buf, tuple(counts))))
    return buf


def alloc_cluster_barrier(arrive_count=1):
    """`T.alloc_barrier` whose barriers the other blocks of a cluster arrive on
    (`T.mbarrier_arrive(bar, cta_id)`); call `T.cluster_sync()` after it so that the peers see
    them initialised."""
    return alloc_barrier(arrive_count)


def alloc_tmem(*args, **kwargs):
    """Blackwell tensor memory (not supported on sm_80/sm_90: raises a located error)."""
    from .backends import absent_backend

    raise error(NotImplementedError, f"T.alloc_tmem belongs to {absent_backend('alloc_tmem')}")
