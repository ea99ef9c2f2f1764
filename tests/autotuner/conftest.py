import pytest

from tilelang.autotuner import AutoTuner


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Every autotuner test tunes against an empty cache directory and memory cache."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    AutoTuner._memory_cache.clear()
    yield tmp_path / "cache"
    AutoTuner._memory_cache.clear()
