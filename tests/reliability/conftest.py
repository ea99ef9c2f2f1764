"""Fixtures of the reliability tests: a private kernel cache per test (never the user's
~/.tilelang), and skipping of `@pytest.mark.gpu` tests where there is no CUDA GPU."""

from __future__ import annotations

import functools
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # reliability_helpers


@functools.lru_cache(maxsize=None)
def gpu_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the device machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    d = tmp_path / "tl-cache"
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(d))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    monkeypatch.delenv("TILELANG_CUDA_COMPILER", raising=False)
    return d
