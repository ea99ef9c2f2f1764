"""Shared helpers of the runtime tests (compiler availability, small kernels)."""

from __future__ import annotations

import pytest

from tilelang.runtime import toolkit


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
