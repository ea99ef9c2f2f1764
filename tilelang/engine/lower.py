"""`tilelang.engine.lower` (the reference's module path): `lower(func, target=...)`, the same
as `tilelang.lower`. The reference's switches for its TVM host and device modules
(`enable_host_codegen`, `enable_device_compile`, `runtime_only`) are accepted and change
nothing: the result is the generated source (with `.kernel_source`)."""

from __future__ import annotations

__all__ = ["lower"]


def lower(func_or_mod, target="auto", target_host=None, runtime_only=False,
          enable_host_codegen=False, enable_device_compile=False, pass_configs=None):
    from ..jit.api import lower as _lower

    return _lower(func_or_mod, target=target, target_host=target_host,
                  pass_configs=pass_configs)
