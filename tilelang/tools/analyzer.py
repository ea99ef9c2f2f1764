"""`tilelang.tools.Analyzer`: a static estimate of a kernel's work, as the reference offers it.

    result = Analyzer.analysis(prim_func, CUDA("cuda"))
    result.total_flops, result.total_global_bytes, result.estimated_time

Counts, over every block of every `T.Kernel` and every iteration of the loops around them,
the floating-point operations of `T.gemm` (2·M·N·K per call) and the global-memory bytes moved
by `T.copy` (the global side of each copy). The time estimate is the larger of bytes over the
device's bandwidth and flops over its peak (`device.bandwidth` in MB/s, the reference's
convention, and `peak_tflops` from a table of known compute capabilities; None elsewhere).
Loop trip counts and grid sizes must be compile-time constants.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from ..ir import nodes as ir
from ..ir.visitor import Visitor

__all__ = ["Analyzer", "AnalysisResult", "ARCH_CONFIGS"]

logger = logging.getLogger(__name__)

# compute capability -> (FP16 tensor-core dense TFLOPS of the flagship part); the estimate's peak
ARCH_CONFIGS = {"80": 312.0, "86": 174.0, "89": 330.0, "90": 989.0, "100": 2250.0,
                "120": 420.0}


@dataclass(frozen=True)
class AnalysisResult:
    total_flops: int
    total_global_bytes: int
    estimated_time: float
    expected_tflops: float | None
    expected_bandwidth_GBps: float


def _count(value, what: str) -> int:
    if isinstance(value, ir.Const):
        value = value.value
    if isinstance(value, int):
        return value
    raise ValueError(f"Analyzer: {what} {value} is not a compile-time constant; analyse a "
                     "kernel specialised to concrete sizes")


class _Counter(Visitor):
    def __init__(self):
        self.flops = 0
        self.global_bytes = 0
        self.multiplier = 1  # blocks x enclosing loop trips

    def _scaled(self, extent, body, what):
        trips = _count(extent, what)
        old = self.multiplier
        self.multiplier *= trips
        try:
            self.visit(body)
        finally:
            self.multiplier = old

    def visit_Kernel(self, k: ir.Kernel):
        blocks = math.prod(_count(g, "the grid extent") for g in k.grid)
        self._scaled(blocks, k.body, "the grid size")

    def visit_For(self, f: ir.For):
        if f.kind == "parallel":
            self.visit(f.body)  # one tile-wide statement, not a repetition of the block
            return
        self._scaled(f.extent, f.body, f"the trip count of loop {f.var.name}")

    def visit_Gemm(self, g: ir.Gemm):
        M, N = (_count(e, "a gemm extent") for e in g.C.extents[-2:])
        a = [_count(e, "a gemm extent") for e in g.A.extents[-2:]]
        K = a[0] if g.trans_A else a[1]
        if isinstance(g, ir.GemmSp):
            K *= 2  # A holds half of each row: the product is the dense one's
        self.flops += 2 * M * N * K * self.multiplier

    def visit_Copy(self, c: ir.Copy):
        for region in (c.src, c.dst):
            if region.buffer.scope == "global":
                n = math.prod(_count(e, "a copy extent") for e in region.extents)
                self.global_bytes += n * region.buffer.dtype.bytes * self.multiplier
                return


class Analyzer:
    """`Analyzer.analysis(func, device)`: see the module docstring."""

    def __init__(self, fn, device):
        if not isinstance(fn, ir.PrimFunc):
            raise TypeError(f"Analyzer needs a PrimFunc (e.g. from jit_kernel.get_tir(...)), "
                            f"got {type(fn).__name__}")
        self.fn = fn
        self.device = device
        self.total_flops = 0
        self.total_global_bytes = 0

    def ir_pass(self) -> "Analyzer":
        counter = _Counter()
        counter.visit(self.fn.body)
        self.total_flops = counter.flops
        self.total_global_bytes = counter.global_bytes
        return self

    def calculate(self) -> AnalysisResult:
        bandwidth_gbps = self.device.bandwidth[1] / 1000
        cc = str(getattr(self.device, "compute_capability", ""))
        peak = ARCH_CONFIGS.get(cc)
        if peak is None:
            logger.info("no peak TFLOPS known for compute capability %s; the estimate counts "
                        "memory time only", cc)
        mem_time = self.total_global_bytes / (bandwidth_gbps * 1e9)
        compute_time = self.total_flops / (peak * 1e12) if peak else 0.0
        return AnalysisResult(self.total_flops, self.total_global_bytes,
                              max(mem_time, compute_time), peak, bandwidth_gbps)

    @classmethod
    def analysis(cls, fn, device) -> AnalysisResult:
        return cls(fn, device).ir_pass().calculate()
