"""Parametrisation shared by the tests that run one program on both targets: the CPU
interpreter always, a CUDA GPU (marked `gpu`, skipped without one) where there is one.

    @pytest.mark.parametrize("device", DEVICES)
    def test_x(device):
        tilelang.compile(func, target=target_of(device))(...)
"""

import pytest
import torch

from tilelang.runtime import toolkit

HAS_COMPILER = toolkit.nvrtc_backend() is not None or toolkit.nvcc_path() is not None

DEVICES = ["cpu", pytest.param("cuda", marks=[
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")])]


def target_of(device: str) -> str:
    """The compile target that runs on `device`."""
    return "cpu" if device == "cpu" else "cuda"
