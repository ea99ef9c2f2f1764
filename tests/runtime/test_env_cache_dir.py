"""`env.TILELANG_CACHE_DIR = path` redirects the caches in this process (the reference's
in-process override); the environment variable decides otherwise."""

import tilelang
import tilelang.language as T
from tilelang.env import env


def test_assignment_overrides_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "from_env"))
    assert env.TILELANG_CACHE_DIR == str(tmp_path / "from_env")
    try:
        env.TILELANG_CACHE_DIR = str(tmp_path / "assigned")
        assert env.cache_dir == tmp_path / "assigned"
        assert env.TILELANG_CACHE_DIR == str(tmp_path / "assigned")
    finally:
        env.TILELANG_CACHE_DIR = None  # back to the environment
    assert env.cache_dir == tmp_path / "from_env"


def test_compiled_kernels_go_to_the_assigned_directory(tmp_path):
    @T.prim_func
    def cache_dir_probe(A: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                A[i] = A[i] * 3.0 + 1.0

    try:
        env.TILELANG_CACHE_DIR = str(tmp_path / "assigned")
        tilelang.compile(cache_dir_probe, target="cuda -arch=sm_90a")
        assert any(p.is_file() for p in (tmp_path / "assigned").rglob("*"))
    finally:
        env.TILELANG_CACHE_DIR = None
