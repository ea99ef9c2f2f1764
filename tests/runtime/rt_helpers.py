"""Shared helpers of the runtime tests (compiler availability, small kernels)."""

from __future__ import annotations

import pytest

from tilelang.runtime import toolkit

try:
    import torch
except ImportError:  # pragma: no cover - torch is a dependency
    torch = None


def compilers() -> list[str]:
    """The compilers present here: "nvrtc" (cuda.bindings or libnvrtc) and/or "nvcc"."""
    out = []
    if toolkit.nvrtc_backend() is not None:
        out.append("nvrtc")
    if toolkit.nvcc_path() is not None:
        out.append("nvcc")
    return out


requires_nvcc = pytest.mark.skipif(toolkit.nvcc_path() is None, reason="nvcc not installed")
requires_nvrtc = pytest.mark.skipif(toolkit.nvrtc_backend() is None,
                                    reason="NVRTC not installed (pip install cuda-bindings "
                                           "nvidia-cuda-nvrtc)")
requires_compiler = pytest.mark.skipif(not compilers(), reason="no CUDA compiler installed")


def nvrtc_kinds() -> list[str]:
    """NVRTC access paths present here: "bindings" (cuda.bindings) and/or "ctypes"."""
    out = []
    b = toolkit.nvrtc_backend("bindings")
    if b is not None and b.kind == "cuda.bindings":
        out.append("bindings")
    if toolkit._libnvrtc_candidates():
        out.append("ctypes")
    return out


# ---- GPU test helpers ----------------------------------------------------------------------
DEV = "cuda"


def arch() -> str:
    if not torch.cuda.is_available():
        return ""
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}" + ("a" if major == 9 else "")


def sm() -> int:
    if not torch.cuda.is_available():
        return 0
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


def build(src, name, types, compiler=None, **kw):
    from tilelang.runtime import CudaKernelFunction, compile_cuda

    r = compile_cuda(src, arch(), compiler=compiler, **kw)
    return CudaKernelFunction(r.cubin, name, types)


def run(fn, grid, block, args, smem=0):
    import torch

    from tilelang.runtime import current_stream_handle, launch

    launch(fn, grid, block, smem, current_stream_handle(), args)
    torch.cuda.synchronize()


def ptr(t):
    return t.data_ptr()
