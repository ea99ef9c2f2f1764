"""Disk cache of compiled cubins.

Expects: `tilelang.env.env.cache_dir` / `cache_enabled` (TILELANG_CACHE_DIR, TILELANG_DISABLE_CACHE).
Guarantees:
  * the key (`make_key`) changes with the normalised source, the architecture, the options, the
    package version, the compiler identity and the contents of tilelang's header library;
  * the directory is created with mode 0700; a directory that other users could write to is
    not used (a warning is printed once and the cache behaves as disabled);
  * an entry is written to a temporary file in the same directory, then `os.replace`d, so a
    reader sees either no entry or a complete one, also with several processes at once;
  * an entry carries a header (magic, key, cubin length, sha256 of the cubin, compile log);
    `load` verifies all of it and returns None for anything truncated, corrupt or written for
    another key, so the caller recompiles and overwrites it.

Entry layout: b"TLCUBIN1\\n" + one JSON line (key, size, sha256, log, compiler) + cubin bytes.

The same directory holds other entries, written and verified the same way (`store_blob`):
programs (`<key>.prog`, engine/program_cache.py) and rewritten kernel functions (`<key>.code`,
frontend/rewrite.py).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
import tempfile
import warnings
from pathlib import Path
from typing import Optional

from ..env import env

MAGIC = b"TLCUBIN1\n"
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
        _make_private_dir(d)
        st = os.stat(d)
    except OSError as e:
        _warn_once(str(d), f"tilelang: cache directory {d} is unusable ({e}); "
                           "compiled kernels are not cached")
        return None
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
        _warn_once(str(d), f"tilelang: cache directory {d} is writable by other users or not "
                           "owned by you; it is not used (chmod 700 it, or set "
                           "TILELANG_CACHE_DIR)")
        return None
    return d


def _make_private_dir(d: Path):
    missing = []
    p = d
    while not p.exists():
        missing.append(p)
        p = p.parent
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            pass
        else:
            os.chmod(p, 0o700)  # mkdir's mode is masked by the umask


def _warn_once(tag: str, msg: str):
    if tag not in _warned:
        _warned.add(tag)
        warnings.warn(msg, RuntimeWarning, stacklevel=3)


def entry_path(d: Path, key: str) -> Path:
    return d / key[:2] / f"{key}.cubin"


def load(key: str) -> Optional[dict]:
    """The verified entry `{"cubin", "log", "compiler"}` for `key`, or None."""
    d = cache_dir()
    if d is None:
        return None
    try:
        data = entry_path(d, key).read_bytes()
    except OSError:
        return None
    return decode(data, key)


def decode(data: bytes, key: str) -> Optional[dict]:
    verified = _verified(data, key, MAGIC)
    if verified is None:
        return None
    head, cubin = verified
    return {"cubin": cubin, "log": head.get("log", ""), "compiler": head.get("compiler", "")}


def _verified(data: bytes, key: str, magic: bytes):
    """(header dict, payload) of an entry `magic` + JSON header line + payload whose header
    names `key` and the payload's size and sha256; None for anything else."""
    if not data.startswith(magic):
        return None
    nl = data.find(b"\n", len(magic))
    if nl < 0:
        return None
    try:
        head = json.loads(data[len(magic):nl])
        payload = data[nl + 1:]
        if head["key"] != key or head["size"] != len(payload):
            return None
        if hashlib.sha256(payload).hexdigest() != head["sha256"]:
            return None
        return head, payload
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def encode(key: str, cubin: bytes, log: str, compiler: str) -> bytes:
    head = {"key": key, "size": len(cubin), "sha256": hashlib.sha256(cubin).hexdigest(),
            "log": log, "compiler": compiler}
    return MAGIC + json.dumps(head).encode() + b"\n" + cubin


def store(key: str, cubin: bytes, log: str = "", compiler: str = "") -> Optional[Path]:
    """Write the entry atomically; failures (full disk, read-only dir) only cost the cache."""
    d = cache_dir()
    if d is None:
        return None
    return _write_atomic(entry_path(d, key), encode(key, cubin, log, compiler))


def _write_atomic(path: Path, data: bytes, durable: bool = True) -> Optional[Path]:
    """Write `data` to `path` through a temporary file and `os.replace` (readers see no file
    or the whole file); None when it could not be written. `durable` also fsyncs the file
    first (what a crash leaves of an entry written without it is caught by the checksum)."""
    tmp = None
    try:
        _make_private_dir(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:16]}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
        return path
    except OSError as e:
        _warn_once("store", f"tilelang: could not write the kernel cache entry {path}: {e}")
        return None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


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
    head = {"key": key, "size": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}
    # no fsync: these entries are written on the way to a first compile (a rewritten function
    # before tracing), a torn one fails its checksum and is written again
    return _write_atomic(blob_path(d, key, suffix),
                         BLOB_MAGIC + json.dumps(head).encode() + b"\n" + payload, durable=False)


def load_blob(key: str, suffix: str) -> Optional[bytes]:
    """The verified payload of entry `<key>.<suffix>`, or None (missing, truncated, corrupt)."""
    d = cache_dir()
    if d is None:
        return None
    try:
        data = blob_path(d, key, suffix).read_bytes()
    except OSError:
        return None
    verified = _verified(data, key, BLOB_MAGIC)
    return None if verified is None else verified[1]


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


def failed_source_dir() -> Path:
    """Where sources that failed to compile are written (inside the cache dir when usable)."""
    d = cache_dir()
    if d is not None:
        out = d / "failed"
    else:
        uid = os.getuid() if hasattr(os, "getuid") else 0
        out = Path(tempfile.gettempdir()) / f"tilelang-{uid}" / "failed"
    _make_private_dir(out)
    if stat.S_IMODE(os.stat(out).st_mode) & 0o077:
        os.chmod(out, 0o700)
    return out


def clear():
    """Remove every cache entry (not the directory)."""
    d = cache_dir()
    if d is None:
        return
    for p in [*d.glob("*/*.cubin"), *d.glob("*/*.prog"), *d.glob("*/*.code")]:
        try:
            p.unlink()
        except OSError:
            pass
