"""The cubin disk cache: hits, what the key depends on, bad entries, permissions, and
several processes at once."""

from __future__ import annotations

import multiprocessing as mp
import os
import stat
import warnings

import pytest

import tilelang
from rt_helpers import requires_compiler
from tilelang.runtime import cache, compile_cuda

TINY = 'extern "C" __global__ void tiny(int* p) { p[threadIdx.x] = VALUE; }\n'


def _entries(d):
    return sorted(d.glob("*/*.cubin"))


@requires_compiler
def test_second_compile_is_a_hit(private_cache):
    src = TINY.replace("VALUE", "7")
    a = compile_cuda(src, "sm_80")
    b = compile_cuda(src, "sm_80")
    assert not a.cache_hit and b.cache_hit
    assert a.cubin == b.cubin and a.key == b.key
    assert len(_entries(private_cache)) == 1
    # whitespace and line endings do not change the key
    c = compile_cuda(src.replace("\n", "  \r\n"), "sm_80")
    assert c.cache_hit


@requires_compiler
def test_key_changes_with_every_input(monkeypatch):
    src = TINY.replace("VALUE", "1")
    base = compile_cuda(src, "sm_80").key
    keys = {
        "source": compile_cuda(TINY.replace("VALUE", "2"), "sm_80").key,
        "arch": compile_cuda(src, "sm_90a").key,
        "options": compile_cuda(src, "sm_80", options=["-DX=1"]).key,
        "fast_math": compile_cuda(src, "sm_80", fast_math=True).key,
    }
    # contexts of their own: undo() would also drop the autouse fixture's private cache
    with monkeypatch.context() as m:
        m.setattr(tilelang, "__version__", "999.0")
        keys["version"] = compile_cuda(src, "sm_80").key
    with monkeypatch.context() as m:
        m.setattr(cache, "headers_digest", lambda: "edited-headers")
        keys["headers"] = compile_cuda(src, "sm_80").key
    assert compile_cuda(src, "sm_80").key == base
    for what, k in keys.items():
        assert k != base, f"changing the {what} must change the cache key"
    assert len(set(keys.values())) == len(keys)
    ident = cache.make_key(src, "sm_80", ["-O3"], "nvcc-13.0")
    assert ident != cache.make_key(src, "sm_80", ["-O3"], "nvrtc-13.0")


@requires_compiler
@pytest.mark.parametrize("damage", ["flip_cubin_byte", "truncate", "truncate_header",
                                    "wrong_key", "garbage", "empty"])
def test_bad_entry_is_rebuilt(private_cache, damage):
    src = TINY.replace("VALUE", "3")
    good = compile_cuda(src, "sm_80")
    (path,) = _entries(private_cache)
    data = path.read_bytes()
    if damage == "flip_cubin_byte":
        data = data[:-10] + bytes([data[-10] ^ 0x40]) + data[-9:]
    elif damage == "truncate":
        data = data[: len(data) - 100]
    elif damage == "truncate_header":
        data = data[:20]
    elif damage == "wrong_key":  # a valid entry of another kernel under this key's name
        other = compile_cuda(TINY.replace("VALUE", "4"), "sm_80")
        data = cache.entry_path(private_cache, other.key).read_bytes()
    elif damage == "garbage":
        data = os.urandom(len(data))
    else:
        data = b""
    path.write_bytes(data)
    with pytest.warns(RuntimeWarning, match="damaged kernel cache entry"):
        assert cache.load(good.key) is None
    with pytest.warns(RuntimeWarning, match="damaged kernel cache entry"):
        again = compile_cuda(src, "sm_80")
    assert not again.cache_hit, "a damaged entry must not be trusted"
    assert again.cubin == good.cubin
    third = compile_cuda(src, "sm_80")
    assert third.cache_hit and third.cubin == good.cubin  # it was overwritten with a good one


def test_directory_is_private(private_cache, monkeypatch):
    nested = private_cache / "a" / "b"
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(nested))
    old = os.umask(0o022)
    try:
        assert cache.store("ab" * 32, b"cubin-bytes") is not None
    finally:
        os.umask(old)
    for d in (private_cache, private_cache / "a", nested, nested / "ab"):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    (entry,) = _entries(nested)
    assert stat.S_IMODE(os.stat(entry).st_mode) & 0o077 == 0
    assert cache.load("ab" * 32)["cubin"] == b"cubin-bytes"


def test_shared_writable_directory_is_not_used(private_cache):
    private_cache.mkdir(parents=True)
    os.chmod(private_cache, 0o777)
    cache._warned.clear()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert cache.store("cd" * 32, b"x") is None
        assert cache.load("cd" * 32) is None
    assert any("writable by other users" in str(x.message) for x in w)
    assert _entries(private_cache) == []


@requires_compiler
def test_disabled_cache_writes_nothing(private_cache, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    src = TINY.replace("VALUE", "5")
    a = compile_cuda(src, "sm_80")
    b = compile_cuda(src, "sm_80")
    assert not a.cache_hit and not b.cache_hit
    assert not private_cache.exists() or _entries(private_cache) == []


def test_decode_rejects_every_single_byte_corruption():
    key = "ef" * 32
    blob = cache.encode(key, os.urandom(300), "log", "nvrtc-x")
    assert cache.decode(blob, key)["log"] == "log"
    for i in range(0, len(blob), 7):
        bad = blob[:i] + bytes([blob[i] ^ 0x01]) + blob[i + 1:]
        got = cache.decode(bad, key)
        # a flipped byte may only land in a part that does not matter (e.g. the log text)
        assert got is None or got["cubin"] == cache.decode(blob, key)["cubin"]
    for n in range(len(blob)):
        assert cache.decode(blob[:n], key) is None


# ---- several processes -----------------------------------------------------------------------
# Plain fork()ed processes released together by a Barrier (no Pool or Manager threads); each
# reports through a Queue. On a GPU machine the parent already has CUDA driver threads, which
# Python 3.12 warns about; the children touch neither CUDA nor torch, only NVRTC and files.
_FORK_OK = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")

def _compile_worker(cache_dir, barrier, out):
    os.environ["TILELANG_CACHE_DIR"] = cache_dir
    barrier.wait()
    r = compile_cuda(TINY.replace("VALUE", "11"), "sm_80")
    out.put(r.cubin)


def _store_worker(cache_dir, seed, barrier, out):
    os.environ["TILELANG_CACHE_DIR"] = cache_dir
    key = "9" * 64
    barrier.wait()
    bad = 0
    for i in range(40):
        cache.store(key, _payload(seed, i))
        got = cache.load(key)
        if got is None or got["cubin"] not in _ALL_PAYLOADS:
            bad += 1
    out.put(bad)


def _payload(seed, i):
    return bytes([seed]) * (200_000 + 997 * i)  # large enough that a write takes a while


_ALL_PAYLOADS = {_payload(s, i) for s in range(8) for i in range(40)}


def _run_eight(target, make_args):
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(8), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*make_args(i), barrier, out)) for i in range(8)]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


@_FORK_OK
@requires_compiler
def test_eight_processes_compile_the_same_kernel(private_cache):
    ref = compile_cuda(TINY.replace("VALUE", "11"), "sm_80", use_cache=False).cubin
    results = _run_eight(_compile_worker, lambda i: (str(private_cache),))
    assert all(cubin == ref for cubin in results)
    (entry,) = _entries(private_cache)
    assert cache.decode(entry.read_bytes(), entry.stem)["cubin"] == ref
    assert not [p for p in entry.parent.iterdir() if p.suffix == ".tmp"]


@_FORK_OK
def test_eight_processes_store_and_load_one_key(private_cache):
    bad = _run_eight(_store_worker, lambda i: (str(private_cache), i))
    assert bad == [0] * 8, "a reader saw a partial or foreign entry"
