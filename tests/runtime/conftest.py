"""Fixtures of the runtime tests: a private cache directory per test, compiler availability,
and skipping of `@pytest.mark.gpu` tests on machines without a CUDA GPU."""

from __future__ import annotations

import functools

import pytest



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
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Every test gets its own empty cache directory (never the user's ~/.tilelang)."""
    d = tmp_path / "tl-cache"
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(d))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    monkeypatch.delenv("TILELANG_CUDA_COMPILER", raising=False)
    return d
