"""TileLang in pure Python: tile-level GPU kernels compiled just in time to CUDA.

    import tilelang
    import tilelang.language as T

Heavy parts (the CUDA runtime, torch) are imported on first use, so `import tilelang` is fast.
"""

from __future__ import annotations

__version__ = "0.1.0"

from . import language  # noqa: F401,E402
from .env import env, disable_cache, enable_cache, is_cache_enabled  # noqa: F401,E402
from .jit import jit, lazy_jit, compile, lower, JITKernel  # noqa: F401,E402,A004
from .transform.pass_config import PassConfigKey  # noqa: F401,E402
from .profiler.supply import TensorSupplyType  # noqa: F401,E402

_LAZY = {
    "autotune": ("tilelang.autotuner", "autotune"),
    "AutoTuner": ("tilelang.autotuner", "AutoTuner"),
    "Profiler": ("tilelang.profiler", "Profiler"),
    "layout": ("tilelang.layout", None),
    "testing": ("tilelang.testing", None),
    "profiler": ("tilelang.profiler", None),
    "autotuner": ("tilelang.autotuner", None),
    "math": ("tilelang.math", None),
    "cache": ("tilelang.cache", None),
    "intrinsics": ("tilelang.intrinsics", None),
    "tools": ("tilelang.tools", None),
    "carver": ("tilelang.carver", None),
    # reference top-level names (`from .math import *`, layouts, dtypes)
    "cdiv": ("tilelang.math", "cdiv"),
    "next_power_of_2": ("tilelang.math", "next_power_of_2"),
    "Layout": ("tilelang.layout", "Layout"),
    "Fragment": ("tilelang.layout", "Fragment"),
    "dtypes": ("tilelang.language.dtypes", None),
    "par_compile": ("tilelang.jit.parallel", "par_compile"),
}


def __getattr__(name):
    entry = _LAZY.get(name)
    if entry is None:
        raise AttributeError(f"module 'tilelang' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(entry[0])
    return module if entry[1] is None else getattr(module, entry[1])
