"""torch's current CUDA stream and device, through the cheapest accessor torch offers.

Expects torch with CUDA at call time (imported lazily). Guarantees: `current_stream_handle(d)`
is the raw `cudaStream_t` (an int; 0 is the legacy default stream) that torch would use for
work on device `d` now, also while a CUDA graph is being captured; `current_device()` is
torch's current device index.
"""

from __future__ import annotations

_raw_stream = None
_get_device = None


def _bind():
    global _raw_stream, _get_device
    import torch

    c = torch._C
    raw = getattr(c, "_cuda_getCurrentRawStream", None)
    if raw is None:
        def raw(idx):
            return torch.cuda.current_stream(idx).cuda_stream
    dev = getattr(c, "_cuda_getDevice", None) or torch.cuda.current_device
    _raw_stream, _get_device = raw, dev


def current_stream_handle(device_index: int | None = None) -> int:
    if _raw_stream is None:
        _bind()
    if device_index is None:
        device_index = _get_device()
    return _raw_stream(device_index)


def cached_stream_arg(cache: dict, stream: int):
    """The c_void_p cuLaunchKernel takes for raw stream handle `stream`, made once per stream
    and kept in `cache` (a handful per process; cleared if a program cycles through many)."""
    import ctypes

    if len(cache) > 64:
        cache.clear()
    arg = cache[stream] = ctypes.c_void_p(stream)
    return arg


def current_device() -> int:
    if _get_device is None:
        _bind()
    return _get_device()
