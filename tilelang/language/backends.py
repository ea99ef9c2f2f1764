"""T names of backends this compiler does not have: Blackwell (sm_100) tcgen05 and tensor
memory and cluster launch control, AMD matrix cores. `T.<name>` of one of them says which backend it belongs to (the
error is located at the user's line like any other)."""

from __future__ import annotations

__all__ = ["absent_backend"]

_BLACKWELL = ("the Blackwell (sm_100) tcgen05 / tensor-memory backend, which this TileLang "
              "does not have (it generates code up to sm_90a Hopper: use T.gemm, which issues "
              "wgmma there)")
_BLACKWELL_CLC = ("Blackwell (sm_100) cluster launch control (clusterlaunchcontrol.try_cancel "
                  "/ query_cancel), which this TileLang does not have (it generates code up to "
                  "sm_90a Hopper)")
_AMD = "the AMD (ROCm/HIP) backend, which this TileLang does not have (NVIDIA CUDA only)"

_PREFIXES = (("tcgen05", _BLACKWELL), ("tmem_", _BLACKWELL), ("clc_", _BLACKWELL_CLC), ("mfma", _AMD), ("wmma_amd", _AMD))
_NAMES = {"alloc_tmem": _BLACKWELL, "gemm_blockscaled": _BLACKWELL, "utccp": _BLACKWELL}


def absent_backend(name: str):
    """The backend a T name belongs to, when it is one this compiler lacks; else None."""
    if name in _NAMES:
        return _NAMES[name]
    for prefix, backend in _PREFIXES:
        if name.startswith(prefix):
            return backend
    return None
