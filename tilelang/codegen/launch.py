"""What the host side needs of a rendered CUDA module: its source and how to launch each
kernel. Kept apart from the code generator so that a program loaded from the disk cache
(engine/program_cache.py) does not import it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import nodes as ir
from ..ir.visitor import collect


@dataclass
class KernelLaunch:
    name: str
    grid: tuple  # 3 extents: ints or Exprs of the symbols (and of ir.DEVICE_SM_COUNT)
    block: tuple  # 3 ints
    smem_bytes: int
    notes: list = field(default_factory=list)
    cooperative: bool = False  # T.sync_grid: all blocks resident (cuLaunchCooperativeKernel)

    @property
    def sized_at_launch(self) -> bool:
        """Whether the grid names the launching GPU's SM count."""
        return any(collect(g, lambda n: n is ir.DEVICE_SM_COUNT)
                   for g in self.grid if isinstance(g, ir.Expr))


@dataclass
class CudaModuleSource:
    source: str
    kernels: list
    params: list  # C signature order: the PrimFunc's params, symbols, workspaces
    symbols: list  # size Vars passed as int arguments
    workspaces: list
    arch: str
    tma: list = field(default_factory=list)  # TmaDescriptor parameters, encoded per call
    zeroed: tuple = ()  # indices of the workspaces allocated zero-filled (T.sync_grid's counter)
    # (parameter index, bytes): the alignment the kernels' vector accesses need of a tensor
    # parameter's data pointer (analysis/alignment.py), checked before every launch
    aligned: tuple = ()


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
