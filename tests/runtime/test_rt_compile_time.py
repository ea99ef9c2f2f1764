"""What keeps a cold compile short (issue 5) without changing the machine code: finding the
CUDA headers does not start cuda-pathfinder's subprocess search when a toolkit has them."""

from __future__ import annotations

import pytest

from tilelang.runtime import toolkit


def test_cuda_headers_found_without_pathfinder(monkeypatch):
    """A toolkit's include/ is taken before cuda-pathfinder (whose search may spawn a Python
    subprocess) is consulted."""
    home = next((h for h in toolkit._cuda_homes() if toolkit._has_cuda_headers(
        f"{h}/include")), None)
    if home is None:
        pytest.skip("no CUDA toolkit headers")
    try:
        from cuda import pathfinder
    except ImportError:
        pathfinder = None
    if pathfinder is not None:
        def boom(*a, **k):
            raise AssertionError("cuda-pathfinder consulted although a toolkit has the headers")

        monkeypatch.setattr(pathfinder, "find_nvidia_header_directory", boom)
    toolkit.cuda_include_dir.cache_clear()
    try:
        assert toolkit.cuda_include_dir() == f"{home}/include"
    finally:
        toolkit.cuda_include_dir.cache_clear()
