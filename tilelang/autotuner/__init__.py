"""Automatic tuning of kernel factories over configurations of compile-time parameters.

Two forms, as in the reference:
  * `@tilelang.autotune(configs=...)` on top of `@tilelang.jit` (decorator.py);
  * `AutoTuner.from_kernel(kernel=factory, configs=...).set_compile_args(...)
    .set_profile_args(...).run()` returning an `AutotuneResult` (tuner.py).
Results are cached on disk under `tilelang.env.env.cache_dir / "autotune"` (cache.py);
`default_gemm_configs()` / `default_attention_configs()` give starting search spaces.
"""

from .capture import get_autotune_inputs, set_autotune_inputs  # noqa: F401
from .configs import default_attention_configs, default_gemm_configs  # noqa: F401
from .decorator import AutoTuneImpl, autotune  # noqa: F401
from .param import AutotuneResult, CompileArgs, ProfileArgs, Record  # noqa: F401
from .tuner import AutoTuner, expand_configs  # noqa: F401


def clear_autotune_cache(memory: bool = True, disk: bool = True) -> int:
    """Forget tuning results (in this process and/or on disk); returns files removed."""
    from . import cache

    if memory:
        AutoTuner._memory_cache.clear()
    return cache.clear() if disk else 0


__all__ = ["autotune", "AutoTuner", "AutoTuneImpl", "AutotuneResult", "CompileArgs",
           "ProfileArgs", "set_autotune_inputs", "get_autotune_inputs",
           "default_gemm_configs", "default_attention_configs", "clear_autotune_cache"]
