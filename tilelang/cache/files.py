"""Files of the on-disk caches (compiled kernels, tuning results, failed sources), kept where
no other user can plant, replace or read them.

Both caches use these rules, in one place:

  * `private_dir(path)` creates a directory (and its missing parents) with mode 0700, or checks
    an existing one: it must be a directory owned by this user (a symbolic link only if this
    user owns the link too), never writable by others; one merely readable by others (a cache
    made by an older version, or by hand) is narrowed to 0700 through a descriptor opened
    without following links. Anything else raises `UnsafePath`, and the caller does without.
  * `read_entry(path, limit)` opens without following links and without blocking, and reads
    only a regular file owned by this user of at most `limit` bytes: a FIFO, a device, a link
    (to /dev/zero, say) or a huge file is `DamagedEntry`, never a hang or an unbounded read.
  * `write_atomic(directory, name, data)` writes a fresh temporary file (O_EXCL, 0600) in the
    same directory and renames it over `name`: readers see the old entry or the new one, and a
    link planted at `name` is replaced, never followed.
  * `evict(directory, suffix, max_entries, max_bytes)` keeps a directory of entries under its
    quota by deleting the least recently used (oldest modification time: hits refresh it,
    `touch`), down to 90% of the quota so the next stores do not evict again at once.

Ownership is read through `owner_of(stat)` and `current_uid()`: the boundary where a test
substitutes another user's files when it cannot chown to another uid.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Optional

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class UnsafePath(OSError):
    """A cache directory another user could write to, or that is not ours."""


class DamagedEntry(ValueError):
    """A cache entry that cannot be what we wrote (wrong kind of file, too large, corrupt)."""


def current_uid() -> Optional[int]:
    """This process's user id (None where the platform has none: no ownership checks)."""
    return os.getuid() if hasattr(os, "getuid") else None


def owner_of(st) -> int:
    """The owner's uid in an os.stat result."""
    return st.st_uid


def _check_owner(st, what: str, path, exc):
    uid = current_uid()
    owner = owner_of(st)
    if uid is not None and owner != uid:
        raise exc(f"{path} is {what} owned by uid {owner}, not by you (uid {uid})")


def private_dir(path) -> Path:
    """`path` as a directory only this user can use (see the module docstring)."""
    path = Path(path)
    missing = []
    p = path
    while not os.path.lexists(p):  # lexists: a dangling link is there, not missing
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for q in reversed(missing):
        try:
            os.mkdir(q, 0o700)
        except FileExistsError:  # made meanwhile by someone: checked below like any other
            pass
    st = os.lstat(path)
    through_link = stat.S_ISLNK(st.st_mode)
    if through_link:
        _check_owner(st, "a symbolic link", path, UnsafePath)
        st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{path} is not a directory")
    _check_owner(st, "a directory", path, UnsafePath)
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        raise UnsafePath(f"{path} is writable by other users (mode {mode:o})")
    if mode & 0o077:
        _narrow(path, st, through_link)
    return path


def _narrow(path: Path, st, through_link: bool):
    """chmod 0700 the directory we checked, not whatever replaced it meanwhile."""
    fd = os.open(path, os.O_RDONLY | _DIRECTORY | _CLOEXEC | (0 if through_link else _NOFOLLOW))
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise UnsafePath(f"{path} was replaced while it was being checked")
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


def read_entry(path, limit: int) -> Optional[bytes]:
    """The bytes of the regular file `path` (None when there is none); `DamagedEntry` for
    anything else there."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise DamagedEntry(f"{path} is a symbolic link") from None
        raise DamagedEntry(f"{path} cannot be opened ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise DamagedEntry(f"{path} is not a regular file (mode {st.st_mode:o})")
        _check_owner(st, "a file", path, DamagedEntry)
        if st.st_size > limit:
            raise DamagedEntry(f"{path} has {st.st_size} bytes, more than the {limit} an "
                               "entry may have")
        chunks, total = [], 0
        while True:  # the size may change under us: never read past the limit
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise DamagedEntry(f"{path} grew past the {limit} bytes an entry may have")
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_atomic(directory: Path, name: str, data: bytes, durable: bool = True) -> Path:
    """Write `directory / name` whole or not at all (see the module docstring)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{name[:24]}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        target = Path(directory) / name
        os.replace(tmp, target)
        tmp = None
        return target
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def touch(path):
    """Mark an entry as just used (eviction removes the least recently used first)."""
    try:
        os.utime(path, follow_symlinks=False)
    except (OSError, NotImplementedError):
        pass


def _entries(directory, suffix: str):
    """(mtime, size, name) of the regular files named *suffix in `directory`."""
    out = []
    try:
        it = os.scandir(directory)
    except OSError:
        return out
    with it:
        for e in it:
            if e.name.endswith(suffix) and not e.name.startswith("."):
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                out.append((st.st_mtime, st.st_size, e.name))
    return out


def evict(directory, suffix: str, max_entries: int, max_bytes: int) -> int:
    """Delete the least recently used entries while `directory` is over its quota; returns
    how many were deleted."""
    entries = _entries(directory, suffix)
    total = sum(size for _, size, _ in entries)
    if len(entries) <= max_entries and total <= max_bytes:
        return 0
    entries.sort()
    keep_n, keep_bytes = int(max_entries * 0.9), int(max_bytes * 0.9)
    removed = 0
    for _, size, name in entries:
        if len(entries) - removed <= keep_n and total <= keep_bytes:
            break
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            continue
        removed += 1
        total -= size
    return removed


def remove_entries(directory, suffix: str) -> int:
    """Delete every entry (and leftover temporary file) of `directory`; returns the count of
    entries deleted."""
    n = 0
    try:
        it = os.scandir(directory)
    except OSError:
        return 0
    with it:
        for e in it:
            is_tmp = e.name.startswith(".") and e.name.endswith(".tmp")
            if e.name.endswith(suffix) or is_tmp:
                try:
                    os.unlink(e.path)
                except OSError:
                    continue
                n += not is_tmp
    return n


def size_setting(name: str, default: int) -> int:
    """A size from the environment: bytes, or with a K/M/G/T suffix (powers of 1024)."""
    text = os.environ.get(name, "").strip().upper().removesuffix("B")
    if not text:
        return default
    scale = 1
    if text[-1] in "KMGT":
        scale = 1024 ** ("KMGT".index(text[-1]) + 1)
        text = text[:-1]
    try:
        value = float(text) * scale
    except ValueError:
        raise ValueError(f"{name}={os.environ[name]!r} is not a size (bytes, or a number with "
                         "K, M, G or T)") from None
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {os.environ[name]!r}")
    return int(value)
