"""Disk cache of compiled cubins.

Expects: `tilelang.env.env.cache_dir` / `cache_enabled` (TILELANG_CACHE_DIR, TILELANG_DISABLE_CACHE,
TILELANG_CACHE_MAX_ENTRIES, TILELANG_CACHE_MAX_SIZE).
Guarantees (the file rules are `tilelang.cache.files`', shared with the autotuner's cache):
  * the key (`make_key`) changes with the normalised source, the architecture, the options, the
    package version, the compiler identity and the contents of tilelang's header library;
  * the directory and its shards are created with mode 0700, and used only while they are
    directories of this user that no one else can write to (a warning is printed once and the
    cache behaves as disabled otherwise);
  * an entry is written to a temporary file in the same directory, then `os.replace`d, so a
    reader sees either no entry or a complete one, also with several processes at once;
  * an entry is read only from a regular file of at most MAX_ENTRY_BYTES, opened without
    following links (a FIFO, a device or a link there is never read);
  * an entry carries a header (magic, key, cubin length, sha256 of the cubin, compile log);
    `load` verifies all of it and treats anything truncated, corrupt, mistyped or written for
    another key as a miss, with a warning, so the caller recompiles and overwrites it;
  * the cache holds at most TILELANG_CACHE_MAX_ENTRIES entries and TILELANG_CACHE_MAX_SIZE
    bytes (20,000 and 4 GiB by default, each shard its 1/256th): a store past that deletes the
    least recently used entries of its shard (a hit counts as a use);
  * sources that failed to compile go to `failed/` there, else to /tmp/tilelang-<uid>/failed
    under the same rules (the newest 256 are kept).

Entry layout: b"TLCUBIN1\\n" + one JSON line (key, size, sha256, log, compiler) + cubin bytes.

The same directory holds other entries, written and verified under the same rules
(`store_blob`): programs (`<key>.prog`, engine/program_cache.py) and rewritten kernel
functions (`<key>.code`, frontend/rewrite.py).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Optional

from ..cache import files
from ..env import env
from ..record import Record

MAGIC = b"TLCUBIN1\n"
SHARDS = 256  # entries live in d/<first two hex digits of the key>/
MAX_ENTRY_BYTES = 256 << 20  # far above any cubin; a larger file is not ours
DEFAULT_MAX_ENTRIES = 20_000
DEFAULT_MAX_BYTES = 4 << 30
_HEADER_TYPES = {"key": str, "size": int, "sha256": str, "log": str, "compiler": str}
_warned: set = set()


def normalize_source(source: str) -> str:
    """Line endings and trailing blanks do not change the cubin, so they do not change the key."""
    lines = [ln.rstrip() for ln in source.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return "\n".join(lines).strip("\n") + "\n"


@functools.lru_cache(maxsize=None)
def headers_digest() -> str:
    """sha256 over tilelang's device headers (names and contents), once per process: editing a
    header must not hand back cubins built with the old one."""
    from .toolkit import TILELANG_INCLUDE

    h = hashlib.sha256()
    root = Path(TILELANG_INCLUDE)
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in (".cuh", ".h"):
            h.update(str(p.relative_to(root)).encode() + b"\0")
            h.update(p.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def make_key(source: str, arch: str, options, compiler_id: str, name: str = "") -> str:
    from .. import __version__

    parts = {
        "source": normalize_source(source),
        "arch": arch,
        "options": list(options),
        "version": __version__,
        "compiler": compiler_id,
        "headers": headers_digest(),
        "name": name,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def cache_dir() -> Optional[Path]:
    """The cache directory (created 0700), or None when caching is off or unsafe."""
    if not env.cache_enabled:
        return None
    d = env.cache_dir
    try:
        return files.private_dir(d)
    except files.UnsafePath as e:
        _warn_once(str(d), f"tilelang: the kernel cache directory is not used: {e} (chmod 700 "
                           "it, or set TILELANG_CACHE_DIR to a directory of your own)")
    except OSError as e:
        _warn_once(str(d), f"tilelang: cache directory {d} is unusable ({e}); "
                           "compiled kernels are not cached")
    return None


def _warn_once(tag: str, msg: str):
    if tag not in _warned:
        _warned.add(tag)
        warnings.warn(msg, RuntimeWarning, stacklevel=3)


def _warn_damaged(path, reason):
    warnings.warn(f"tilelang: ignoring a damaged kernel cache entry ({reason}); the kernel is "
                  f"compiled again and the entry {path} rewritten", RuntimeWarning, stacklevel=3)


class CompileResult(Record):
    """What `compiler.compile_cuda` returns, and what engine/program_cache.py makes of an entry
    (defined here so that loading a cached kernel does not import the compiler): `compiler` is
    "nvrtc" or "nvcc", `key` the cubin entry's key."""

    __slots__ = ("cubin", "log", "compiler", "cache_hit", "seconds", "arch", "options", "key",
                 "compiler_version")

    def __init__(self, cubin: bytes, log: str, compiler: str, cache_hit: bool, seconds: float,
                 arch: str = "", options: tuple = (), key: str = "",
                 compiler_version: str = ""):
        self.cubin, self.log, self.compiler, self.cache_hit = cubin, log, compiler, cache_hit
        self.seconds, self.arch, self.options, self.key = seconds, arch, options, key
        self.compiler_version = compiler_version


def entry_path(d: Path, key: str) -> Path:
    return d / key[:2] / f"{key}.cubin"


def load(key: str) -> Optional[dict]:
    """The verified entry `{"cubin", "log", "compiler"}` for `key`, or None (a damaged one is
    None too, with a warning)."""
    d = cache_dir()
    if d is None:
        return None
    path = entry_path(d, key)
    if not path.parent.exists():
        return None
    try:
        files.private_dir(path.parent)  # a shard others could write to holds nothing of ours
        data = files.read_entry(path, MAX_ENTRY_BYTES)
        if data is None:
            return None
        entry = _verify(data, key)
    except files.DamagedEntry as e:
        _warn_damaged(path, e)
        return None
    except OSError as e:
        _warn_once(str(path.parent), f"tilelang: kernel cache shard not used: {e}")
        return None
    files.touch(path)
    return entry


def decode(data: bytes, key: str) -> Optional[dict]:
    """The entry `data` holds for `key`, or None for anything truncated, corrupt or another
    key's."""
    try:
        return _verify(data, key)
    except files.DamagedEntry:
        return None


def _verify(data: bytes, key: str) -> dict:
    if not data.startswith(MAGIC):
        raise files.DamagedEntry("no entry header")
    nl = data.find(b"\n", len(MAGIC))
    if nl < 0:
        raise files.DamagedEntry("the header is cut off")
    try:
        head = json.loads(data[len(MAGIC):nl])
    except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
        raise files.DamagedEntry("the header is not JSON") from None
    cubin = data[nl + 1:]
    if not isinstance(head, dict) or not all(
            isinstance(head.get(k), t) for k, t in _HEADER_TYPES.items()):
        raise files.DamagedEntry("the header has missing or mistyped fields")
    if head["key"] != key:
        raise files.DamagedEntry("the entry belongs to another key")
    if head["size"] != len(cubin) or hashlib.sha256(cubin).hexdigest() != head["sha256"]:
        raise files.DamagedEntry("the cubin does not match its checksum")
    return {"cubin": cubin, "log": head["log"], "compiler": head["compiler"]}


def encode(key: str, cubin: bytes, log: str, compiler: str) -> bytes:
    head = {"key": key, "size": len(cubin), "sha256": hashlib.sha256(cubin).hexdigest(),
            "log": log, "compiler": compiler}
    return MAGIC + json.dumps(head).encode() + b"\n" + cubin


def store(key: str, cubin: bytes, log: str = "", compiler: str = "") -> Optional[Path]:
    """Write the entry atomically, then keep its shard under its share of the size cap;
    failures (full disk, read-only dir) only cost the cache."""
    d = cache_dir()
    if d is None:
        return None
    path = entry_path(d, key)
    try:
        shard = files.private_dir(path.parent)
        files.write_atomic(shard, path.name, encode(key, cubin, log, compiler))
        max_entries, max_bytes = limits()
        # keys are uniform hashes: a shard's share of the quota bounds the whole cache
        files.evict(shard, ".cubin", max(1, max_entries // SHARDS),
                    max(1, max_bytes // SHARDS))
        return path
    except OSError as e:
        _warn_once("store", f"tilelang: could not write the kernel cache entry {path}: {e}")
        return None


def limits() -> tuple[int, int]:
    """(entries, bytes) the cache may hold: TILELANG_CACHE_MAX_ENTRIES, TILELANG_CACHE_MAX_SIZE."""
    return (files.size_setting("TILELANG_CACHE_MAX_ENTRIES", DEFAULT_MAX_ENTRIES),
            files.size_setting("TILELANG_CACHE_MAX_SIZE", DEFAULT_MAX_BYTES))


def failed_source_dir() -> Path:
    """Where sources that failed to compile are written: inside the cache directory when it is
    usable, else /tmp/tilelang-<uid>/failed, else (another user made that path first) a fresh
    private temporary directory."""
    d = cache_dir()
    if d is not None:
        base = d
    else:
        uid = files.current_uid()
        base = Path(tempfile.gettempdir()) / f"tilelang-{uid if uid is not None else 0}"
    try:
        return files.private_dir(files.private_dir(base) / "failed")
    except OSError:
        return Path(tempfile.mkdtemp(prefix="tilelang-failed-"))


def write_failed_source(name: str, source: str) -> Path:
    """Keep a source that failed to compile for the user to read (the newest 256)."""
    d = failed_source_dir()
    path = files.write_atomic(d, name, source.encode(), durable=False)
    files.evict(d, ".cu", 256, 1 << 28)
    return path


def clear():
    """Remove every cache entry (not the directory)."""
    d = cache_dir()
    if d is None:
        return
    with os.scandir(d) as it:
        shards = [e.path for e in it if len(e.name) == 2 and e.is_dir(follow_symlinks=False)]
    for shard in shards:
        for suffix in (".cubin", ".prog", ".code"):
            files.remove_entries(shard, suffix)


# ---- other entries: programs (engine/program_cache.py), rewritten kernel functions ----------

BLOB_MAGIC = b"TLBLOB1\n"


def blob_path(d: Path, key: str, suffix: str) -> Path:
    return d / key[:2] / f"{key}.{suffix}"


def store_blob(key: str, suffix: str, payload: bytes) -> Optional[Path]:
    """Write entry `<key>.<suffix>` (b"TLBLOB1\\n" + one JSON line (key, size, sha256) +
    payload) atomically; None when caching is off or the write failed."""
    d = cache_dir()
    if d is None:
        return None
    path = blob_path(d, key, suffix)
    head = {"key": key, "size": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}
    try:
        shard = files.private_dir(path.parent)
        # no fsync: these entries are written on the way to a first compile (a rewritten
        # function before tracing); a torn one fails its checksum and is written again
        files.write_atomic(shard, path.name,
                           BLOB_MAGIC + json.dumps(head).encode() + b"\n" + payload,
                           durable=False)
        max_entries, max_bytes = limits()
        files.evict(shard, f".{suffix}", max(1, max_entries // SHARDS),
                    max(1, max_bytes // SHARDS))
        return path
    except OSError:
        return None


def load_blob(key: str, suffix: str) -> Optional[bytes]:
    """The verified payload of entry `<key>.<suffix>`, or None (missing, or damaged: with a
    warning)."""
    d = cache_dir()
    if d is None:
        return None
    path = blob_path(d, key, suffix)
    if not path.parent.exists():
        return None
    try:
        files.private_dir(path.parent)
        data = files.read_entry(path, MAX_ENTRY_BYTES)
        if data is None:
            return None
        payload = _verify_blob(data, key)
    except files.DamagedEntry as e:
        _warn_damaged(path, e)
        return None
    except OSError:
        return None
    files.touch(path)
    return payload


def _verify_blob(data: bytes, key: str) -> bytes:
    if not data.startswith(BLOB_MAGIC):
        raise files.DamagedEntry("no entry header")
    nl = data.find(b"\n", len(BLOB_MAGIC))
    if nl < 0:
        raise files.DamagedEntry("the header is cut off")
    try:
        head = json.loads(data[len(BLOB_MAGIC):nl])
    except (ValueError, RecursionError):
        raise files.DamagedEntry("the header is not JSON") from None
    payload = data[nl + 1:]
    if not isinstance(head, dict) or head.get("key") != key or \
            head.get("size") != len(payload) or \
            head.get("sha256") != hashlib.sha256(payload).hexdigest():
        raise files.DamagedEntry("the entry does not match its key or checksum")
    return payload


@functools.lru_cache(maxsize=None)
def package_stamp() -> str:
    """sha256 over the path, size and modification time of every Python file and header of
    the tilelang package, once per process: a program entry holds what the compiler made of
    a program, so any edit to the compiler must miss it. Stats, not contents: about 1 ms.
    (The package version is not in it: keys add it themselves, read when they are made.)"""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    stack = [str(root)]
    while stack:
        with os.scandir(stack.pop()) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if e.name != "__pycache__":
                    stack.append(e.path)
            elif e.name.endswith((".py", ".cuh", ".h")):
                st = e.stat()
                h.update(f"{e.path}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()
