"""`T.Kernel`: the launch frame, and the block/thread index accessors."""

from __future__ import annotations

from ..frontend.builder import current_builder, current_loc, error
from ..ir import nodes as ir
from .reducer import check_epochs

_BLOCK_NAMES = ("bx", "by", "bz")
_THREAD_NAMES = ("tx", "ty", "tz")


def _grid_extent(value, axis):
    if isinstance(value, bool) or not isinstance(value, (int, ir.Expr, ir.Buffer)):
        raise error(TypeError, f"T.Kernel grid extent {axis} must be an int or a size "
                               f"expression, got {value!r}")
    if isinstance(value, int):
        # 0 is a kernel every call of which is refused (as in the reference: its issue 1993)
        if value < 0:
            raise error(ValueError, f"T.Kernel grid extent {axis} must not be negative, "
                                    f"got {value}")
        return value
    e = ir.as_expr(value)
    if isinstance(e, ir.Const):
        return e.value
    if not e.dtype.is_int:
        raise error(TypeError, f"T.Kernel grid extent {axis} must be an integer")
    return e


def _cluster_dims(value, grid):
    """`cluster_dims` as a 3-tuple of positive ints (None: no cluster); a static grid extent
    must be a multiple of the cluster's (the hardware launches whole clusters)."""
    if value is None:
        return None
    dims = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and not isinstance(d, bool)
                                          and d >= 1 for d in dims):
        raise error(ValueError, f"cluster_dims must be a positive int or a tuple of 1-3 "
                                f"positive ints, got {value!r}")
    dims = dims + (1,) * (3 - len(dims))
    size = dims[0] * dims[1] * dims[2]
    if size > 8:
        raise error(ValueError, f"a thread block cluster has at most 8 blocks (the portable "
                                f"limit), got cluster_dims={dims}")
    for axis, (c, g) in enumerate(zip(dims, tuple(grid) + (1, 1, 1))):
        if isinstance(g, int) and g % c:
            raise error(ValueError, f"grid extent {g} along {'xyz'[axis]} is not a multiple of "
                                    f"the cluster's {c} (cluster_dims={dims})")
    return None if size == 1 else dims


def _normalize_threads(threads) -> list:
    """`threads=` of T.Kernel as a 3-D block [x, y, z]: 128 threads when omitted, an int or a
    list/tuple of 1 to 3 extents, each a positive int (an empty block is an error, never a
    launch that runs nothing)."""
    if threads is None:
        threads = 128
    dims = list(threads) if isinstance(threads, (list, tuple)) else [threads]
    if not 1 <= len(dims) <= 3:
        raise error(ValueError, f"T.Kernel threads= takes 1 to 3 extents, got {threads!r}")
    for t in dims:
        if isinstance(t, bool) or not isinstance(t, int):
            raise error(ValueError, f"T.Kernel threads= must be ints, got {threads!r}")
        if t <= 0:
            raise error(ValueError, f"T.Kernel threads must be positive, got {threads!r}")
    return dims + [1] * (3 - len(dims))


class Kernel:
    """`with T.Kernel(gx, gy, gz, threads=128) as (bx, by, bz):` — one launch of a grid of
    thread blocks; the body describes what one block does."""

    def __init__(self, *grid, threads=None, prelude=None, is_cpu=False, cluster_dims=None,
                 **_ignored):
        if len(grid) == 1 and isinstance(grid[0], (tuple, list)):
            grid = tuple(grid[0])
        if len(grid) > 3:
            raise error(ValueError, f"T.Kernel takes at most 3 grid extents, got {len(grid)}")
        self.grid = tuple(_grid_extent(g, i) for i, g in enumerate(grid)) or (1,)
        # a grid past CUDA's limits is an error when the kernel is compiled (jit/kernel.py),
        # not here: the reference traces such programs (tilelang.tools.Analyzer analyses
        # them without a launch)
        given = len(threads) if isinstance(threads, (list, tuple)) else 1
        block = _normalize_threads(threads)
        # the launch keeps the dimensions the program named (its thread variables)
        threads = tuple(block[:given])
        total = block[0] * block[1] * block[2]
        if total > 1024:
            raise error(ValueError, f"a block has at most 1024 threads, got {total}")
        problem = ir.launch_limit_problem(threads, ir.BLOCK_LIMITS, "threads=")
        if problem:
            raise error(ValueError, f"T.Kernel {problem}")
        self.threads = threads
        self.prelude = prelude
        self.cluster_dims = _cluster_dims(cluster_dims, self.grid)
        self.names = None
        self.n_bound = len(grid)

    # an implicit launch: opened by a TVM-style `for bx in T.thread_binding(n, "blockIdx.x")`
    # outside any T.Kernel; each axis takes the extent of its first binding (widen_axis)
    implicit = False

    def widen_axis(self, kind, dim, extent):
        """Launch `extent` blocks / threads along `dim` (an implicit launch's first binding
        of that axis)."""
        bound = self.__dict__.setdefault("implicit_bound", set())
        if (kind, dim) in bound:
            return
        bound.add((kind, dim))
        if kind == "thread":
            dims = list(self.threads) + [1] * (dim + 1 - len(self.threads))
            dims[dim] = extent
            block = _normalize_threads(dims)
            if block[0] * block[1] * block[2] > 1024:
                raise error(ValueError, f"a block has at most 1024 threads, got {dims}")
            problem = ir.launch_limit_problem(tuple(dims), ir.BLOCK_LIMITS, "threads=")
            if problem:
                raise error(ValueError, f"T.thread_binding {problem}")
            self.threads = tuple(dims)
            self.thread_vars += tuple(ir.Var(n) for n in
                                      _THREAD_NAMES[len(self.thread_vars):len(dims)])
        else:
            grid = list(self.grid) + [1] * (dim + 1 - len(self.grid))
            grid[dim] = _grid_extent(extent, dim)
            self.grid = tuple(grid)
            self.block_vars += tuple(ir.Var(n) for n in
                                     _BLOCK_NAMES[len(self.block_vars):len(grid)])

    def set_names(self, names):
        self.names = names

    def _block_names(self):
        names = self.names
        if isinstance(names, str):
            names = (names,)
        out = []
        for i in range(len(self.grid)):
            n = names[i] if isinstance(names, tuple) and i < len(names) else None
            out.append(n if isinstance(n, str) and n != "_" else _BLOCK_NAMES[i])
        return out

    def __enter__(self):
        b = current_builder(what="T.Kernel")
        if b.in_kernel():
            raise error(ValueError, "T.Kernel frames cannot be nested")
        self.loc = current_loc()
        self.block_vars = tuple(ir.Var(n) for n in self._block_names())
        self.thread_vars = tuple(ir.Var(n) for n in _THREAD_NAMES[:len(self.threads)])
        frame = b.push("kernel", allocs=[], attrs=[], kernel=self)
        b.kernels.append(frame)
        if isinstance(self.names, tuple):
            # `as (bx,)` / `as (bx, by)`: the user unpacks, even a one-dimensional grid
            return self.block_vars
        if self.n_bound == 1 or len(self.block_vars) == 1:
            return self.block_vars[0]
        return self.block_vars if self.n_bound > 0 else self.block_vars[0]

    def __exit__(self, exc_type, *rest):
        b = current_builder()
        if exc_type is not None:
            return False
        b.kernels.pop()
        frame, body = b.pop("kernel")
        check_epochs(frame.data, body)
        attrs = list(frame.data["attrs"])
        if self.prelude:
            attrs.append(("prelude", self.prelude))
        if self.cluster_dims:
            attrs.append(("cluster_dims", self.cluster_dims))
        for cond, loc in reversed(b.function_assumptions):  # T.assume before the kernel
            body = ir.Attr("assume", cond, body, loc=loc)
        b.emit(ir.Kernel(self.grid, self.threads, self.block_vars, self.thread_vars, body,
                         tuple(frame.data["allocs"]), tuple(attrs), loc=self.loc))
        return False


def ClusterKernel(*grid, cluster_dims, threads=None, prelude=None):
    """`with T.ClusterKernel(gx, gy, cluster_dims=2, threads=256) as (bx, by):` — T.Kernel
    launched in thread block clusters of `cluster_dims` blocks (sm_90+): consecutive blocks
    along each axis form one cluster. On Hopper, a tile that every block of a cluster loads
    alike in a warp-specialised pipeline (the A tile of a GEMM whose cluster runs along N)
    is then loaded once per cluster and multicast to all of its blocks, each issuing one
    slice. Other targets launch the same grid without clusters; results do not change."""
    return Kernel(*grid, threads=threads, prelude=prelude, cluster_dims=cluster_dims)


def _kernel_obj() -> Kernel:
    b = current_builder(what="a thread/block binding")
    return b.kernel.data["kernel"]


def get_thread_binding(dim: int = 0):
    """The thread index along `dim` (threadIdx.x/y/z) inside the enclosing T.Kernel."""
    k = _kernel_obj()
    if not 0 <= dim < 3:
        raise error(ValueError, "thread binding dimension must be 0, 1 or 2")
    if dim >= len(k.thread_vars):
        return ir.const(0)
    return k.thread_vars[dim]


def get_thread_bindings():
    """The thread indices of every launched dimension."""
    return list(_kernel_obj().thread_vars)


def get_block_binding(dim: int = 0):
    """The block index along `dim` (blockIdx, after T.use_swizzle's renumbering)."""
    k = _kernel_obj()
    if dim >= len(k.block_vars):
        return ir.const(0)
    return k.block_vars[dim]


def get_block_bindings():
    """The block indices of every launched grid dimension."""
    return list(_kernel_obj().block_vars)


def get_thread_extent(dim: int = 0) -> int:
    """The number of threads along `dim` (1 for dimensions not given)."""
    k = _kernel_obj()
    return k.threads[dim] if dim < len(k.threads) else 1


def get_block_extent(dim: int = 0):
    """The grid size along `dim` (1 for dimensions not launched)."""
    k = _kernel_obj()
    return k.grid[dim] if dim < len(k.grid) else 1


def launch_thread(name: str, extent):
    """`T.launch_thread("threadIdx.x", n)` inside a T.Kernel: the thread (or block, for
    "blockIdx.*") index along that axis, which the kernel must already launch with extent
    `n` (the reference's TIR binding; a T.Kernel launches every axis itself)."""
    axes = {"x": 0, "y": 1, "z": 2}
    kind, _, axis = str(name).partition(".")
    if kind not in ("threadIdx", "blockIdx") or axis not in axes:
        raise error(ValueError, f"T.launch_thread takes 'threadIdx.x/y/z' or 'blockIdx.x/y/z', "
                                f"got {name!r}")
    b = current_builder(what="T.launch_thread")
    if not b.in_kernel():
        raise error(NotImplementedError, "T.launch_thread outside `with T.Kernel(...)` is not "
                                         "supported: launch the kernel with T.Kernel")
    dim = axes[axis]
    threads = kind == "threadIdx"
    have = (get_thread_extents() if threads else get_block_extents())[dim]
    if not ir.structural_equal(ir.as_expr(have), ir.as_expr(extent)):
        raise error(ValueError, f"T.launch_thread({name!r}, {extent}): the enclosing T.Kernel "
                                f"launches {name} with extent {have}; a different extent is not "
                                "supported")
    return get_thread_binding(dim) if threads else get_block_binding(dim)


def get_thread_extents() -> list:
    """The block's thread extents `[x, y, z]` (1 for dimensions not given in `threads=`)."""
    k = _kernel_obj()
    return [k.threads[d] if d < len(k.threads) else 1 for d in range(3)]


def get_block_extents() -> list:
    """The grid's extents `[x, y, z]` of the enclosing `T.Kernel` (1 for dimensions not
    launched; symbolic sizes stay expressions)."""
    k = _kernel_obj()
    return [k.grid[d] if d < len(k.grid) else 1 for d in range(3)]


def get_lane_idx(warp_size: int = None):
    """This thread's lane within its warp (`warp_size`: 32 when None, the NVIDIA warp)."""
    return get_thread_binding(0) % (warp_size or 32)


def get_warp_idx_sync(warp_size: int = None):
    """This thread's warp within the block (threadIdx.x // 32)."""
    return get_thread_binding(0) // (warp_size or 32)


get_warp_idx = get_warp_idx_sync


def shuffle_elect(thread_extent: int):
    """True in exactly one thread of each group of `thread_extent` consecutive threads (the
    first; `thread_extent=0`: thread 0 of the block), False elsewhere."""
    if isinstance(thread_extent, ir.Const):
        thread_extent = thread_extent.value
    if isinstance(thread_extent, bool) or not isinstance(thread_extent, int) or \
            thread_extent < 0:
        raise error(ValueError, f"T.shuffle_elect takes a non-negative int thread extent, got "
                                f"{thread_extent!r}")
    tx = get_thread_binding(0)
    if thread_extent == 0:
        return ir.compare("eq", tx, 0)
    return ir.compare("eq", ir.binary("floormod", tx, thread_extent), 0)


def get_warp_group_idx(warp_size: int = None, warps_per_group: int = None):
    """This thread's warpgroup (4 warps, 128 threads, when the arguments are None) within the
    block."""
    return get_thread_binding(0) // ((warp_size or 32) * (warps_per_group or 4))
