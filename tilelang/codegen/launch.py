"""What the host side needs of a rendered CUDA module: its source, how to launch each kernel
and the TMA descriptors it encodes per call. Kept apart from the code generator so that a
program loaded from the disk cache (engine/program_cache.py) imports neither it nor the passes.

Records (tilelang/record.py), not dataclasses: every process that loads a kernel from the
cache imports these three.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import collect
from ..record import Record


class TmaDescriptor(Record):
    """A CUtensorMap kernel parameter the host encodes per call: over `buffer` (a parameter
    or workspace, or a view of one), boxes of `box` elements (outermost first), `swizzle`
    bytes (0, 32, 64, 128); `im2col` for the im2col mode (transform/warp_specialize/
    tma_im2col.py): (lower (h, w), upper (h, w), channels, pixels, stride (h, w))."""

    __slots__ = ("name", "buffer", "box", "swizzle", "param", "im2col")

    def __init__(self, name: str, buffer: ir.Buffer, box: tuple, swizzle: int,
                 param: ir.Var = None, im2col: tuple = None):
        self.name, self.buffer, self.box, self.swizzle = name, buffer, box, swizzle
        self.param, self.im2col = param, im2col


class KernelLaunch(Record):
    """One kernel of the module: `grid` holds 3 extents (ints or Exprs of the symbols and of
    ir.DEVICE_SM_COUNT), `block` 3 ints; `cooperative` for T.sync_grid (all blocks resident,
    cuLaunchCooperativeKernel)."""

    __slots__ = ("name", "grid", "block", "smem_bytes", "notes", "cooperative")

    def __init__(self, name: str, grid: tuple, block: tuple, smem_bytes: int,
                 notes: list = None, cooperative: bool = False):
        self.name, self.grid, self.block, self.smem_bytes = name, grid, block, smem_bytes
        self.notes = [] if notes is None else notes
        self.cooperative = cooperative

    @property
    def sized_at_launch(self) -> bool:
        """Whether the grid names the launching GPU's SM count."""
        return any(collect(g, lambda n: n is ir.DEVICE_SM_COUNT)
                   for g in self.grid if isinstance(g, ir.Expr))


class CudaModuleSource(Record):
    """The module: `params` in C signature order (the PrimFunc's params, then the size
    `symbols` passed as int arguments, then the global `workspaces`); `tma` the descriptors
    encoded per call; `zeroed` the indices of the workspaces allocated zero-filled
    (T.sync_grid's counter); `aligned` (parameter index, bytes): the alignment the kernels'
    vector accesses need of a tensor parameter's data pointer (analysis/alignment.py),
    checked before every launch."""

    __slots__ = ("source", "kernels", "params", "symbols", "workspaces", "arch", "tma",
                 "zeroed", "aligned")

    def __init__(self, source: str, kernels: list, params: list, symbols: list,
                 workspaces: list, arch: str, tma: list = None, zeroed: tuple = (),
                 aligned: tuple = ()):
        self.source, self.kernels, self.params = source, kernels, params
        self.symbols, self.workspaces, self.arch = symbols, workspaces, arch
        self.tma = [] if tma is None else tma
        self.zeroed, self.aligned = zeroed, aligned


def signature_params(func: ir.PrimFunc):
    """Buffers and scalars of the PrimFunc, then symbolic sizes that are not already scalar
    parameters, then global workspaces."""
    scalars = {p for p in func.params if isinstance(p, ir.Var)}
    symbols, seen = [], set()
    for p in list(func.params) + list(func.workspaces):
        if isinstance(p, ir.Buffer):
            for s in list(p.shape) + list(p.strides or ()):
                if isinstance(s, ir.Expr):
                    for v in collect(s, lambda n: isinstance(n, ir.Var)):
                        if v not in scalars and v not in seen:
                            seen.add(v)
                            symbols.append(v)
    return list(func.params), symbols, list(func.workspaces)
