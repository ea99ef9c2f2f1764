"""TileLang in pure Python: tile-level GPU kernels compiled just in time to CUDA.

    import tilelang
    import tilelang.language as T

Heavy parts (the CUDA runtime, torch) are imported on first use, so `import tilelang` is fast.
"""

from __future__ import annotations

__version__ = "0.1.0"

import logging as _logging

logger = _logging.getLogger("tilelang")


def set_log_level(level):
    """Set the level of `tilelang.logger`: a name (`"DEBUG"`, `"info"`, ...) or a `logging`
    level number."""
    if isinstance(level, str):
        name = level.strip().upper()
        value = _logging.getLevelName(name)
        if not isinstance(value, int):
            raise ValueError(f"unknown log level {level!r}; use DEBUG, INFO, WARNING, ERROR or "
                             "CRITICAL")
        level = value
    logger.setLevel(level)


def _init_logger():
    # as the reference: messages of the "tilelang" logger go to stderr with their own format,
    # level INFO, not through the root logger
    if not any(getattr(h, "_tilelang", False) for h in logger.handlers):
        handler = _logging.StreamHandler()
        handler._tilelang = True
        handler.setFormatter(_logging.Formatter(
            "%(asctime)s  [TileLang:%(name)s:%(levelname)s]: %(message)s", "%Y-%m-%d %H:%M:%S"))
        logger.addHandler(handler)
    logger.propagate = False
    set_log_level("INFO")


_init_logger()
del _init_logger

# `name as name`: the package ships py.typed, and type checkers (pyright, Pylance) count a
# plain `from .jit import jit` as private to this module ("jit" is not exported from module
# "tilelang") unless the import re-exports it explicitly
from . import language as language  # noqa: E402
from . import arith as _arith  # noqa: E402,F401  (installs what the IR borrows: ir/hooks.py)
from .env import (env as env, disable_cache as disable_cache,  # noqa: E402
                  enable_cache as enable_cache, is_cache_enabled as is_cache_enabled)
from .jit import (jit as jit, lazy_jit as lazy_jit, compile as compile,  # noqa: E402,A004
                  lower as lower, JITKernel as JITKernel)
from .transform.pass_config import PassConfigKey as PassConfigKey  # noqa: E402

_LAZY = {
    "autotune": ("tilelang.autotuner", "autotune"),
    "AutoTuner": ("tilelang.autotuner", "AutoTuner"),
    "Profiler": ("tilelang.profiler", "Profiler"),
    "TensorSupplyType": ("tilelang.profiler.supply", "TensorSupplyType"),
    "layout": ("tilelang.layout", None),
    "testing": ("tilelang.testing", None),
    "profiler": ("tilelang.profiler", None),
    "autotuner": ("tilelang.autotuner", None),
    "math": ("tilelang.math", None),
    "cache": ("tilelang.cache", None),
    "intrinsics": ("tilelang.intrinsics", None),
    "tools": ("tilelang.tools", None),
    "carver": ("tilelang.carver", None),
    "utils": ("tilelang.utils", None),
    "runtime": ("tilelang.runtime", None),
    "interp": ("tilelang.interp", None),
    "ir": ("tilelang.ir", None),
    "transform": ("tilelang.transform", None),
    # reference top-level names (`from .math import *`, layouts, dtypes)
    "cdiv": ("tilelang.math", "cdiv"),
    "next_power_of_2": ("tilelang.math", "next_power_of_2"),
    "Layout": ("tilelang.layout", "Layout"),
    "Fragment": ("tilelang.layout", "Fragment"),
    "dtypes": ("tilelang.language.dtypes", None),
    "par_compile": ("tilelang.jit.parallel", "par_compile"),
    "DataType": ("tilelang.tvm", "DataType"),
    "contrib": ("tilelang.contrib", None),
    "tileop": ("tilelang.tileop", None),
    "register_cuda_postproc": ("tilelang.engine.callback", "register_cuda_postproc"),
    "register_hip_postproc": ("tilelang.engine.callback", "register_hip_postproc"),
    "register_c_postproc": ("tilelang.engine.callback", "register_c_postproc"),
}


def _register_tvm_standin():
    # The reference's `import tilelang` makes `import tvm` work; reference programs use it for
    # `tvm.DataType`. Without a real TVM installed, `tvm` names our stand-in (tilelang/tvm.py).
    import importlib.util
    import sys

    if "tvm" in sys.modules:
        return
    try:
        if importlib.util.find_spec("tvm") is not None:
            return
    except (ImportError, ValueError):
        return
    from . import tvm as standin

    standin.register_as_tvm(sys.modules)


_register_tvm_standin()
del _register_tvm_standin


def __getattr__(name):
    entry = _LAZY.get(name)
    if entry is None:
        raise AttributeError(f"module 'tilelang' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(entry[0])
    return module if entry[1] is None else getattr(module, entry[1])
