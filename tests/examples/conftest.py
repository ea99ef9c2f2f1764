"""Skips `@pytest.mark.gpu` example tests on machines without a CUDA GPU."""

import pytest


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        gpu = torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        gpu = False
    if gpu:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the device machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
