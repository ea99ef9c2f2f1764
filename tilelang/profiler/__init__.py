"""Benchmarking and correctness helpers for compiled kernels.

    profiler = kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Normal)
    profiler.assert_allclose(ref_program, rtol=1e-2, atol=1e-2)
    latency_ms = profiler.do_bench()

`tilelang.profiler.do_bench(fn, ...)` times any callable (CUDA events with L2 flush on the GPU,
wall clock on the CPU).
"""

from .bench import do_bench, summarize  # noqa: F401
from .profiler import Profiler, kernel_device  # noqa: F401
from .supply import (KernelParam, TensorSupplyType, get_tensor_supply,  # noqa: F401
                     make_tensor, normalize_supply_type)

__all__ = ["Profiler", "TensorSupplyType", "KernelParam", "do_bench", "get_tensor_supply",
           "make_tensor", "summarize"]
