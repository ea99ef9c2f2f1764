"""The kernel cache seen through `tilelang.compile` (tests/runtime/test_rt_cache.py covers the
cubin store itself: atomic writes, entry verification, permissions, key inputs of
`compile_cuda`). Here: a second *process* compiling the same program hits the cache, even after
compiling other kernels first (no process-local name reaches the key); eight processes compiling
the same kernels at once all get the right cubin; a damaged entry is rebuilt by the next
`tilelang.compile`; the key follows what changes the code (source, arch, effective pass
configs, compile flags, package version) and nothing else (re-tracing, no-op configs)."""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import subprocess
import sys

import pytest

import tilelang
from tilelang.runtime import cache, compile_cuda, toolkit

import cache_child

pytestmark = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")

HERE = os.path.dirname(os.path.abspath(__file__))


def _child(cache_dir, *args) -> list:
    env = dict(os.environ, TILELANG_CACHE_DIR=str(cache_dir))
    env.pop("TILELANG_DISABLE_CACHE", None)
    p = subprocess.run([sys.executable, os.path.join(HERE, "cache_child.py"), *args],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def _entries(d):
    return sorted(d.glob("*/*.cubin"))


def test_second_process_hits_the_cache(private_cache):
    first = _child(private_cache, "sm_90a", "gemm", "softmax")
    assert [r["hit"] for r in first] == [False, False]
    second = _child(private_cache, "sm_90a", "--perturb", "softmax", "gemm")
    by_name = {r["name"]: r for r in second}
    for r in first:
        again = by_name[r["name"]]
        assert again["hit"], f"{r['name']}: a second process missed the cache"
        assert again["key"] == r["key"] and again["sha"] == r["sha"]
    # this process (which has traced nothing yet) agrees too
    here = cache_child.compile_one("gemm", "sm_90a")
    assert here["hit"] and here["key"] == first[0]["key"]


def test_second_process_loads_the_program_without_lowering(private_cache):
    """engine/program_cache.py: the second process keys the traced program (also after
    tracing and compiling other kernels) and loads the source, the launch description and
    the cubin the first one made."""
    first = _child(private_cache, "sm_90a", "gemm", "axpy")
    assert [r["program_hit"] for r in first] == [False, False]
    second = _child(private_cache, "sm_90a", "--perturb", "axpy", "gemm")
    by_name = {r["name"]: r for r in second}
    for r in first:
        again = by_name[r["name"]]
        assert again["program_hit"], f"{r['name']}: a second process lowered it again"
        assert (again["source"], again["sha"], again["key"]) == \
            (r["source"], r["sha"], r["key"])


# what a process needs to trace a program and load it from the cache: the semantic check and
# the size alignment run on every trace; the passes, the code generator and the compiler not
WARM_TRANSFORMS = {"tilelang.transform", "tilelang.transform.align_sizes",
                   "tilelang.transform.pass_config", "tilelang.transform.semantic_check",
                   "tilelang.transform.simplify", "tilelang.transform.uninitialized_reads"}


def test_a_program_loaded_from_the_cache_imports_no_pass_and_no_compiler(private_cache):
    _child(private_cache, "sm_90a", "gemm")
    *rows, imported = _child(private_cache, "sm_90a", "--modules", "gemm")
    assert rows[0]["program_hit"]
    modules = set(imported["modules"])
    assert {m for m in modules if m.startswith("tilelang.transform")} <= WARM_TRANSFORMS
    for absent in ("tilelang.engine.pipeline", "tilelang.codegen.module", "tilelang.codegen.cuda",
                   "tilelang.runtime.compiler", "tilelang.runtime.pch",
                   "tilelang.transform.analysis"):
        assert absent not in modules, f"loading a cached program imported {absent}"


def _pool_worker(args):
    cache_dir, barrier, arch = args
    os.environ["TILELANG_CACHE_DIR"] = cache_dir
    barrier.wait()
    return [cache_child.compile_one(n, arch) for n in ("softmax", "axpy")]


def test_eight_processes_compile_the_same_kernels(private_cache, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    ref = {n: cache_child.compile_one(n, "sm_80") for n in ("softmax", "axpy")}
    monkeypatch.delenv("TILELANG_DISABLE_CACHE")
    ctx = mp.get_context("fork")
    with ctx.Manager() as m:
        barrier = m.Barrier(8)
        with ctx.Pool(8) as pool:
            results = pool.map(_pool_worker, [(str(private_cache), barrier, "sm_80")] * 8)
    for per_process in results:
        for r in per_process:
            assert r["sha"] == ref[r["name"]]["sha"], "a process got a different cubin"
            assert r["key"] == ref[r["name"]]["key"]
    entries = _entries(private_cache)
    assert sorted(e.stem for e in entries) == sorted(r["key"] for r in ref.values())
    for e in entries:
        assert hashlib.sha256(cache.decode(e.read_bytes(), e.stem)["cubin"]).hexdigest() in \
            {r["sha"] for r in ref.values()}
        assert not [p for p in e.parent.iterdir() if p.name.endswith(".tmp")]
    # and a later compile in this process is a hit on what they wrote
    assert cache_child.compile_one("axpy", "sm_80")["hit"]


@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "empty", "other_entry"])
def test_damaged_entry_is_rebuilt_by_the_next_compile(private_cache, damage):
    good = cache_child.compile_one("softmax", "sm_80")
    (path,) = _entries(private_cache)
    data = path.read_bytes()
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip_byte":
        data = data[:-50] + bytes([data[-50] ^ 0xFF]) + data[-49:]
    elif damage == "empty":
        data = b""
    else:
        other = cache_child.compile_one("axpy", "sm_80")
        data = cache.entry_path(private_cache, other["key"]).read_bytes()
    path.write_bytes(data)
    with pytest.warns(RuntimeWarning, match="damaged kernel cache entry"):
        again = cache_child.compile_one("softmax", "sm_80")
    assert not again["hit"], "a damaged entry was trusted"
    assert again["sha"] == good["sha"]
    third = cache_child.compile_one("softmax", "sm_80")
    assert third["hit"] and third["sha"] == good["sha"]


def _key(func, arch="sm_90a", **kw):
    return tilelang.compile(func, target=f"cuda -arch={arch}", **kw).adapter.compiled.key


def test_key_follows_what_changes_the_code_and_nothing_else(monkeypatch):
    prog = cache_child.gemm  # on sm_90a: TMA, wgmma, warp specialisation
    base = _key(prog())
    changed = {
        "source": _key(cache_child.softmax()),
        "arch": _key(prog(), "sm_80"),
        "pass config (no TMA)": _key(prog(), pass_configs={"tl.disable_tma_lower": True}),
        "pass config (no wgmma)": _key(prog(), pass_configs={"tl.disable_wgmma": True}),
        "pass config (fast math)": _key(prog(), pass_configs={"tl.enable_fast_math": True}),
        "compile flags": _key(prog(), compile_flags=["-DTL_TEST_FLAG=1"]),
    }
    # (a context of its own: undo() would also drop the private cache directory the autouse
    # fixture set, and the next compiles would read the user's cache)
    with monkeypatch.context() as m:
        m.setattr(tilelang, "__version__", "0.0.0+other")
        changed["package version"] = _key(prog())
    for what, k in changed.items():
        assert k != base, f"changing the {what} must change the key"
    assert len(set(changed.values())) == len(changed)
    unchanged = {
        "re-traced program": _key(prog()),
        "after other compiles": (_key(cache_child.axpy(7.0)), _key(prog()))[1],
        "no-op pass config": _key(prog(), pass_configs={"tir.disable_cse_tir": True}),
        "default-valued pass config": _key(prog(), pass_configs={"tl.disable_tma_lower": False}),
    }
    for what, k in unchanged.items():
        assert k == base, f"the key changed with the {what}, which does not change the code"


def test_cache_dir_is_private_after_a_compile(private_cache):
    cache_child.compile_one("axpy", "sm_80")
    import stat

    for d in [private_cache] + [p for p in private_cache.rglob("*") if p.is_dir()]:
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    for f in _entries(private_cache):
        assert stat.S_IMODE(os.stat(f).st_mode) & 0o077 == 0, f


_ = compile_cuda
