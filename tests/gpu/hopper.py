"""Helpers of the sm_90a GPU tests."""

import pytest
import torch


def need_sm90():
    """Skip the calling test below Hopper (wgmma, TMA and setmaxnreg need sm_90a)."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("wgmma needs sm_90a")
