"""Loop constructors: T.Parallel, T.Pipelined, T.serial, T.unroll, T.vectorized, T.grid.

Each returns a `LoopSpec`; the rewritten `for` statement calls `spec.trace(names)`, which opens
one IR loop per dimension, yields the loop variables once (the body is traced once), and emits
the loop nest when the body is done.
"""

from __future__ import annotations

import operator

from ..frontend.builder import current_builder, current_loc, error
from ..ir import nodes as ir


def _int_or_expr(v, what):
    if isinstance(v, bool):
        raise error(TypeError, f"{what} must be an integer, got {v!r}")
    if isinstance(v, int):
        return v
    if isinstance(v, (ir.Expr, ir.Buffer)) or hasattr(v, "__tl_expr__"):
        e = ir.as_expr(v)
        if not (e.dtype.is_int):
            raise error(TypeError, f"{what} must be an integer, got {e.dtype}")
        return e.value if isinstance(e, ir.Const) else e
    raise error(TypeError, f"{what} must be an integer, got {type(v).__name__} {v!r}")


class LoopSpec:
    """A loop nest to open: one (start, extent, step) per dimension, all of one kind."""

    kind = "serial"

    def __init__(self, dims, annotations=()):
        self.dims = dims  # list of (start, extent, step)
        self.annotations = tuple(annotations)

    def _names(self, names):
        n = len(self.dims)
        if isinstance(names, str):
            names = (names,)
        if not isinstance(names, tuple):
            names = ()
        default = ["i", "j", "k", "l", "m", "n"]
        out = []
        for d in range(n):
            nm = names[d] if d < len(names) and isinstance(names[d], str) else None
            out.append(nm if nm and nm != "_" else (default[d] if d < len(default) else f"i{d}"))
        return out

    def __iter__(self):
        # without the AST rewrite (source unavailable) a `for` calls iter() directly
        return self.trace(())

    def check_context(self, b):
        if not b.in_kernel():
            raise error(RuntimeError, f"T.{self.kind} loops must be inside `with T.Kernel(...)`")

    def trace(self, names):
        b = current_builder(what=f"a T.{self.kind} loop")
        self.check_context(b)
        loc = current_loc()
        vars_ = [ir.Var(n, _var_dtype(*dim, self.kind))
                 for n, dim in zip(self._names(names), self.dims)]
        for v, dim in zip(vars_, self.dims):
            b.push("for", loop_kind=self.kind, var=v, bounds=dim)
        b.loop_kinds.append("ir")
        yield vars_[0] if len(vars_) == 1 else tuple(vars_)
        b.loop_kinds.pop()
        stmt = None
        for v, (start, extent, step) in reversed(list(zip(vars_, self.dims))):
            _, body = b.pop("for")
            if stmt is not None:  # outer frames of a multi-dim nest hold nothing themselves
                body = stmt
            start_e, extent_e = ir.as_expr(start), ir.as_expr(extent)
            if v.dtype is ir.INT64:  # bounds in 64 bits too: `start + extent` must not wrap
                start_e, extent_e = ir.cast_to(start_e, v.dtype), ir.cast_to(extent_e, v.dtype)
            stmt = ir.For(v, start_e, extent_e, self.kind, body, step, self.annotations,
                          loc=loc)
        b.emit(stmt)


_INT32 = (-2**31, 2**31 - 1)


def _var_dtype(start, extent, step, kind):
    """int32 unless the loop reaches past it (start, or the bound `start + extent * step` the
    variable is compared with, constant or of a 64-bit type): then int64, so a loop over 2^40
    iterations counts to 2^40. A T.Parallel loop spreads its iterations over one block's
    threads: a constant 2^31 or more of them is an error, not a wider variable (a symbolic
    extent keeps the int32 variable those loops always had)."""
    consts = [v for v in (start, extent) if isinstance(v, int)]
    wide = any(not _INT32[0] <= v <= _INT32[1] for v in consts)
    if isinstance(start, int) and isinstance(extent, int):
        wide |= not _INT32[0] <= start + extent * step <= _INT32[1]
    if kind == "parallel":
        if wide:
            raise error(ValueError, f"T.Parallel extent {extent} from {start}: a parallel "
                                    "loop runs on one block's threads and must stay below "
                                    "2^31 iterations; split the work over blocks")
        return ir.INT32
    wide |= any(v.dtype.bits > 32 for v in (start, extent) if isinstance(v, ir.Expr))
    return ir.INT64 if wide else ir.INT32


def _is_empty(s):
    return isinstance(s, ir.Seq) and not s.stmts


def _range_dims(start, stop, step, what):
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    if isinstance(step, ir.Const):
        step = step.value
    if not isinstance(step, int) or isinstance(step, bool):
        raise error(TypeError, f"{what} step must be a Python int")
    if step == 0:
        raise error(ValueError, f"{what} step must be non-zero")
    start = _int_or_expr(start, f"{what} start")
    stop = _int_or_expr(stop, f"{what} stop")
    if step > 0:
        if isinstance(start, int) and isinstance(stop, int):
            extent = max(0, -(-(stop - start) // step))
        elif step == 1:
            extent = ir.binary("sub", stop, start)
        else:
            extent = ir.binary("floordiv", ir.binary("add", ir.binary("sub", stop, start),
                                                     step - 1), step)
    else:
        if isinstance(start, int) and isinstance(stop, int):
            extent = max(0, -(-(start - stop) // -step))
        else:
            extent = ir.binary("floordiv", ir.binary("add", ir.binary("sub", start, stop),
                                                     -step - 1), -step)
    return [(start, extent, step)]


class _Serial(LoopSpec):
    kind = "serial"


class _Unroll(LoopSpec):
    kind = "unroll"


class _Vectorized(LoopSpec):
    kind = "vectorized"


class _Parallel(LoopSpec):
    kind = "parallel"

    def check_context(self, b):
        super().check_context(b)
        if any(f.kind == "for" and f.data.get("loop_kind") == "parallel" for f in b.frames):
            inner = b.frame
            perfect_chain = (inner.kind == "for" and inner.data.get("loop_kind") == "parallel"
                             and not inner.items)
            if not perfect_chain:
                raise error(ValueError, "Nested parallel loops are not allowed: write the loop "
                                        "nest as one T.Parallel(M, N) or a direct chain")


class _Pipelined(LoopSpec):
    kind = "pipelined"

    def check_context(self, b):
        super().check_context(b)
        for f in b.frames:
            if f.kind == "for" and f.data.get("loop_kind") == "parallel":
                raise error(ValueError, "Pipelined loop cannot be nested inside a parallel loop")


class _SymbolicStepLoop(LoopSpec):
    """A sequential loop whose step is a kernel expression (its sign unknown when tracing):
    a counter `k` over the trip count, the loop variable `start + k * step` bound by a let.
    The trip count is ceil((stop - start) / step) for either sign of the step, 0 when the
    range is empty."""

    def __init__(self, start, stop, step, kind, annotations=()):
        super().__init__([], annotations)
        self.start, self.stop, self.step, self.kind = start, stop, step, kind

    def trace(self, names):
        b = current_builder(what=f"a T.{self.kind} loop")
        self.check_context(b)
        loc = current_loc()
        step = ir.as_expr(self.step)
        toward_zero = ir.select(ir.compare("gt", step, ir.const(0, step.dtype)),
                                ir.const(1, step.dtype), ir.const(-1, step.dtype))
        span = ir.binary("sub", self.stop, self.start)
        trips = ir.binary("max", ir.binary("floordiv", ir.binary(
            "sub", ir.binary("add", span, step), toward_zero), step), 0)
        counter = ir.Var(b.fresh_name("k"), ir.as_expr(trips).dtype)
        b.push("for", loop_kind=self.kind, var=counter, bounds=(0, trips, 1))
        b.loop_kinds.append("ir")
        name = names[0] if isinstance(names, tuple) and names else names
        name = name if isinstance(name, str) and name != "_" else "i"
        yield b.let(b.fresh_name(name), ir.as_expr(
            ir.binary("add", self.start, ir.binary("mul", counter, step))))
        b.loop_kinds.pop()
        _, body = b.pop("for")
        b.emit(ir.For(counter, ir.const(0, counter.dtype), ir.as_expr(trips), self.kind, body,
                      1, self.annotations, loc=loc))


class _SteppedSerial(LoopSpec):
    """A sequential loop of a constant step other than 1 (a plain loop nest, not one of the
    reference's IR-builder frames: see tilelang/tvm/script/ir_builder/base.py)."""

    kind = "serial"


class _SteppedUnroll(_SteppedSerial):
    kind = "unroll"


def _sequential(start, stop, step, annotations, kind, unit_step_cls, stepped_cls):
    """T.serial / T.unroll: a loop of step 1 (a frame), a constant step, or a symbolic one."""
    what = f"T.{kind}"
    annotations = tuple((annotations or {}).items())
    if isinstance(step, ir.Const):
        step = step.value
    if step is None or (isinstance(step, int) and not isinstance(step, bool) and step == 1):
        return unit_step_cls(_range_dims(start, stop, step, what), annotations)
    if isinstance(step, int) or not isinstance(step, (ir.Expr, ir.Buffer)):
        return stepped_cls(_range_dims(start, stop, step, what), annotations)
    if stop is None:
        start, stop = 0, start
    return _SymbolicStepLoop(_int_or_expr(start, f"{what} start"),
                             _int_or_expr(stop, f"{what} stop"),
                             _int_or_expr(step, f"{what} step"), kind, annotations)


def serial(start, stop=None, step=None, *, annotations=None, unroll_factor=None):
    """A sequential loop (`range` in a kernel body means the same). The step may be a kernel
    expression (of either sign)."""
    return _sequential(start, stop, step, annotations, "serial", _Serial, _SteppedSerial)


Serial = serial


def unroll(start, stop=None, step=None, *, explicit=False, unroll_factor=None,
           annotations=None):
    """A sequential loop the compiler unrolls (by `unroll_factor` iterations at a time when
    given: `#pragma unroll n` on CUDA)."""
    if unroll_factor is not None:
        if isinstance(unroll_factor, bool) or not isinstance(unroll_factor, int) or \
                unroll_factor < 1:
            raise error(ValueError, f"T.unroll unroll_factor must be a positive int, got "
                                    f"{unroll_factor!r}")
        annotations = {**(annotations or {}), "unroll_factor": unroll_factor}
    return _sequential(start, stop, step, annotations, "unroll", _Unroll, _SteppedUnroll)


def vectorized(start, stop=None, step=None, **_):
    """A per-thread loop the compiler may turn into vector instructions (same results as
    T.serial)."""
    return _Vectorized(_range_dims(start, stop, step, "T.vectorized"))


def grid(*extents):
    """`for i, j in T.grid(M, N)`: nested sequential loops."""
    dims = []
    for e in extents:
        dims.extend(_range_dims(e, None, None, "T.grid"))
    return _Serial(dims)


def Parallel(*extents, coalesced_width=None, loop_layout=None, prefer_async=None, **_):
    """`for i, j in T.Parallel(M, N)`: element-wise work spread over the block's threads.
    Iterations must be independent."""
    if not extents:
        raise error(TypeError, "T.Parallel needs at least one extent")
    if len(extents) == 1 and isinstance(extents[0], (tuple, list)):
        extents = tuple(extents[0])
    dims = []
    for e in extents:
        if isinstance(e, tuple) and len(e) == 2:
            dims.extend(_range_dims(e[0], e[1], None, "T.Parallel"))
        else:
            dims.extend(_range_dims(e, None, None, "T.Parallel"))
    ann = []
    if coalesced_width is not None:
        ann.append(("coalesced_width", coalesced_width))
    if loop_layout is not None:
        ann.append(("loop_layout", loop_layout))
    return _Parallel(dims, ann)


parallel = Parallel


def Pipelined(start, stop=None, num_stages=0, order=None, stage=None, sync=None, group=None,
              **kwargs):
    """`for k in T.Pipelined(n, num_stages=3)`: a sequential loop whose copies for later
    iterations overlap the compute of earlier ones (same results as T.serial)."""
    dims = _range_dims(start, stop, None, "T.Pipelined")
    given = num_stages.value if isinstance(num_stages, ir.Const) else num_stages
    try:  # ints of any kind (numpy's from a config list too), never floats or bools
        num_stages = operator.index(given) if not isinstance(given, bool) else -1
    except TypeError:
        num_stages = -1
    if num_stages < 0:
        raise error(ValueError, f"T.Pipelined num_stages must be a non-negative integer (0 "
                                f"turns pipelining off), got {given!r}")
    ann = [("num_stages", num_stages)]
    for key, value in (("order", order), ("stage", stage), ("sync", sync), ("group", group)):
        if value is not None:
            ann.append((key, tuple(value) if isinstance(value, list) else value))
    for key, value in kwargs.items():
        ann.append((key, value))
    return _Pipelined(dims, ann)


class _Persistent(LoopSpec):
    """`for bx, by in T.Persistent([TM, TN], wave_size, index)`: block `index` of a
    `wave_size`-block grid visits tiles index, index + wave_size, ... of the domain.
    Traced as a serial loop over waves with the tile coordinates bound by lets and the body
    guarded by `tile < prod(domain)` (the last wave may be partial). A 2-D domain is walked
    in groups of `group_size` rows, column by column within a group (the tiles running at
    once share rows of one operand and columns of the other in L2); other domains and
    group_size <= 1 are walked row-major."""

    kind = "serial"

    def __init__(self, domain, wave_size, index, group_size=1):
        super().__init__([])
        self.domain, self.wave_size, self.index = domain, wave_size, index
        self.group_size = group_size

    def _coords(self, tile):
        dom, g = self.domain, self.group_size
        if len(dom) == 2 and not (isinstance(g, int) and g <= 1):
            tm, tn = dom
            per_group = g * tn
            first = tile // per_group * g
            if isinstance(tm, int) and isinstance(g, int) and tm % g == 0:
                rows = g  # every group is whole: no division by a runtime row count
            else:
                rows = ir.binary("min", ir.as_expr(tm - first), ir.as_expr(g))
            within = tile % per_group
            return [first + within % rows, within // rows]
        coords, rest = [], tile
        for d in range(len(dom) - 1, -1, -1):  # row-major: the last dimension varies fastest
            coords.append(rest % dom[d] if d > 0 else rest)
            rest = rest // dom[d]
        return coords[::-1]

    def trace(self, names):
        b = current_builder(what="a T.Persistent loop")
        self.check_context(b)
        loc = current_loc()
        nd = len(self.domain)
        if isinstance(names, str):
            names = (names,)
        names = names if isinstance(names, tuple) else ()
        coord_names = [names[d] if d < len(names) and isinstance(names[d], str)
                       and names[d] != "_" else f"tile{d}" for d in range(nd)]
        total = self.domain[0]
        for e in self.domain[1:]:
            total = total * e
        waves = (total + self.wave_size - 1) // self.wave_size
        w = ir.Var(b.fresh_name("wave"))
        b.push("for", loop_kind=self.kind, var=w)
        b.loop_kinds.append("ir")
        tile = ir.as_expr(w * self.wave_size + self.index)
        b.push("then")
        coords = self._coords(tile)
        vars_ = [b.let(b.fresh_name(n), ir.as_expr(c)) for n, c in zip(coord_names, coords)]
        yield vars_[0] if nd == 1 else tuple(vars_)
        _, then = b.pop("then")
        b.emit(ir.If(ir.compare("lt", tile, ir.as_expr(total)), then, None, loc=loc))
        b.loop_kinds.pop()
        _, body = b.pop("for")
        b.emit(ir.For(w, ir.const(0), ir.as_expr(waves), self.kind, body, 1, (), loc=loc))


def Persistent(domain, wave_size, index, group_size=8):
    """`for bx, by in T.Persistent([TM, TN], wave_size, index)`: a persistent-kernel tile loop.
    Block `index` (of `wave_size` launched blocks) runs the body for tiles index,
    index + wave_size, ... of the domain. A 2-D domain is walked `group_size` rows at a time,
    column by column within the group (L2 reuse; the reference's rasterisation width, 8 by
    default), others row-major; the visiting order does not change results. On sm_90a a
    `T.Pipelined` loop inside keeps its TMA producer (and its order/stage schedule), which
    loads the next tile's stages during this tile's epilogue, and also a tile's copy before
    the loop that only the loop reads (FlashAttention's Q) while the previous tile runs."""
    if isinstance(domain, (int, ir.Expr)):
        domain = [domain]
    if not isinstance(domain, (list, tuple)) or not domain:
        raise error(TypeError, "T.Persistent needs a list of tile-grid extents as its domain, "
                               f"got {domain!r}")
    dom = [_int_or_expr(d, "T.Persistent domain extent") for d in domain]
    ws = _int_or_expr(wave_size, "T.Persistent wave_size")
    if isinstance(ws, int) and ws < 1:
        raise error(ValueError, f"T.Persistent wave_size must be positive, got {ws}")
    g = _int_or_expr(group_size, "T.Persistent group_size") if group_size is not None else 1
    return _Persistent(dom, ws, _int_or_expr(index, "T.Persistent index"), g)


_LAUNCH_AXES = {"threadIdx.x": ("thread", 0), "threadIdx.y": ("thread", 1),
                "threadIdx.z": ("thread", 2), "blockIdx.x": ("block", 0),
                "blockIdx.y": ("block", 1), "blockIdx.z": ("block", 2)}


class _ThreadBinding(LoopSpec):
    """A TVM-style loop bound to a launch axis inside `T.Kernel`: its variable is that axis's
    index (plus `start`), so the body runs once per thread (block) as written."""

    kind = "thread_binding"

    def __init__(self, start, extent, axis):
        super().__init__([(start, extent, 1)])
        self.axis = axis
        self.loc = current_loc()

    def index(self):
        """The launch index this binding names, after checking that the binding covers
        exactly the launched extent (a partial or larger binding would need a guard or more
        threads, which the reference's launch rejects too)."""
        from .kernel import _kernel_obj

        b = current_builder(what="T.thread_binding")
        if not b.in_kernel():
            raise error(NotImplementedError, "`v = T.thread_binding(...)` outside `with "
                                             "T.Kernel(...)`: bind launch indices with `for "
                                             "v in T.thread_binding(...)` loops or T.Kernel")
        kernel = _kernel_obj()
        kind, dim = _LAUNCH_AXES[self.axis]
        start, extent, _ = self.dims[0]
        if kernel.implicit:
            kernel.widen_axis(kind, dim, extent)
        extents = kernel.threads if kind == "thread" else kernel.grid
        launched = extents[dim] if dim < len(extents) else 1
        same = (extent == launched if isinstance(extent, int) and isinstance(launched, int)
                else ir.structural_equal(ir.as_expr(extent), ir.as_expr(launched)))
        if not same:
            raise error(ValueError, f"T.thread_binding over {extent} {self.axis} values, but "
                                    f"T.Kernel launches {launched} along {self.axis}: a "
                                    "binding must cover the launched extent exactly")
        if dim >= len(extents):
            var = ir.const(0)
        else:
            var = (kernel.thread_vars if kind == "thread" else kernel.block_vars)[dim]
        return var if isinstance(start, int) and start == 0 else ir.binary("add", var, start)

    def trace(self, names):
        b = current_builder(what="T.thread_binding")
        if b.in_kernel():
            yield self.index()
            return
        # TVM-style launch: the loop nest of bindings outside T.Kernel is the kernel, each
        # axis launched at the extent of its binding
        from .kernel import Kernel

        launch = Kernel(1, threads=1)
        launch.implicit = True
        with launch:
            yield self.index()

    def __tl_bind__(self, name):
        # `tx = T.thread_binding(0, n, thread="threadIdx.x")` binds the rest of the scope to
        # the launch index, as the reference's frame does
        return self.index()


def thread_binding(start, stop=None, thread=None, *, annotations=None):
    """`for tx in T.thread_binding(128, "threadIdx.x")` or `tx = T.thread_binding(0, 128,
    thread="threadIdx.x")` inside `T.Kernel`: the index of this thread (block, for
    "blockIdx.*") along that launch axis, plus `start`. The extent must equal the launched
    one (`threads=` / the grid)."""
    if thread is None and isinstance(stop, str):
        start, stop, thread = 0, start, stop
    elif stop is None:
        start, stop = 0, start
    if thread not in _LAUNCH_AXES:
        raise error(ValueError, f"T.thread_binding thread must be one of "
                                f"{', '.join(_LAUNCH_AXES)}, got {thread!r}")
    start = _int_or_expr(start, "T.thread_binding start")
    stop = _int_or_expr(stop, "T.thread_binding stop")
    extent = stop - start if isinstance(start, int) and isinstance(stop, int) else \
        ir.binary("sub", stop, start)
    return _ThreadBinding(start, extent, thread)
