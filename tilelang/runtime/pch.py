"""NVRTC precompiled headers for generated kernels: the header prefix is parsed once per
header set, not once per kernel.

Most of NVRTC's front end on a generated kernel is spent parsing tilelang's headers and the
CUDA headers they include (about 65 of its 70 ms on the development VM); NVRTC 12.8+ can save
that parse to a file (`--create-pch`) and load it for the next program with the same leading
preprocessing directives and options (`--use-pch`). The cubin is the same either way.

Expects a CUDA source as codegen/module.py writes it (comments, `#define TL_...`, our
`#include`s, then code) and NVRTC options as runtime/compiler.py builds them. Guarantees:
  * `plan(source, options, backend)` returns None (compile without) unless: PCH is on
    (`TILELANG_NVRTC_PCH`, default 1), NVRTC is 12.8 or newer, every leading directive is one
    codegen writes (`#define TL_*`, `#include "tl.cuh"`, `#include "tl/*.cuh"`,
    `#include <cooperative_groups.h>`: nothing of the user's whose contents we do not hash),
    the options add no include directories or pre-included files of their own, and the cache
    directory is usable (see below);
  * a PCH file is keyed on what NVRTC does not check itself when it loads one: the contents
    of tilelang's headers, the CUDA headers' sizes and modification times (top-level files and
    directories of the include directory), and the NVRTC library (path, size, mtime) and
    version; plus the directives and options (which NVRTC also checks): editing a header or
    updating the toolkit gives a new key, never the old parse;
  * files live in `<TILELANG_CACHE_DIR>/pch`, with the kernel cache's rules: nothing is read or
    written when the cache is off (TILELANG_DISABLE_CACHE); a directory that is not this
    user's alone (another user's, group- or world-writable, a link of someone else's) is
    refused with a warning and kernels compile without PCH; a PCH file is used only when it is
    a non-empty regular file of ours (not a link);
  * a header set's first compile only records that it was seen (`<key>.seen`); the second
    creates the PCH (about 45 ms more, once) into a temporary file renamed into place whole,
    so one-off header sets (a test's private cache) never pay for a file they do not reuse;
  * a PCH that NVRTC rejects (damaged, incomplete, other options) is deleted, so the next
    compile makes it again; one that disappeared between the check and the compile (evicted by
    another process) makes the compile run once more without PCH; NVRTC's PCH messages are
    removed from the log;
  * the directory keeps at most TILELANG_PCH_MAX_ENTRIES files (32) and TILELANG_PCH_MAX_SIZE
    bytes (1 GiB), least recently used deleted first.
`TILELANG_CLEAR_CACHE` / `cache.clear()` remove them with the kernels.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..cache import files
from . import toolkit

MIN_NVRTC = (12, 8)
DEFAULT_MAX_ENTRIES = 32
DEFAULT_MAX_BYTES = 1 << 30

# the leading directives codegen/module.py writes; anything else there is not ours
_OUR_DIRECTIVE = re.compile(r'#\s*(?:define\s+TL_\w+\s*|include\s+"tl(?:\.cuh|/\w+\.cuh)"\s*|'
                            r'include\s+<cooperative_groups\.h>\s*)$')
# NVRTC's messages about the PCH itself (creating / using / rejecting one)
_PCH_MESSAGE = re.compile(r'precompiled header file "[^"]*"')
# ... and those where it refused one ("Warning #630-D: the initial sequence of preprocessing
# directives is not compatible with those of precompiled header file ...", #626 invalid,
# #629 other options, #2226 incomplete)
_PCH_REJECTED = re.compile(r'(?i)warning[^\n]*precompiled header file "[^"]*"')
_WARNING = re.compile(r"(?i)\bwarning #\d+")
_SUPPRESS_REMARK = "Remark: The warnings can be suppressed with"
_warned: set = set()


def enabled() -> bool:
    return os.environ.get("TILELANG_NVRTC_PCH", "1").strip().lower() not in \
        ("0", "false", "off", "no")


def header_prefix(source: str) -> Optional[list[str]]:
    """The leading preprocessing directives of `source` (comments and blank lines skipped:
    NVRTC ignores them when it matches a PCH), or None when one of them is not codegen's."""
    out = []
    for line in source.split("\n"):
        s = line.strip()
        if not s or s.startswith("//"):
            continue
        if not s.startswith("#"):
            break
        if not _OUR_DIRECTIVE.match(s):
            return None
        out.append(s)
    return out if any("include" in d for d in out) else None


def _nvrtc_new_enough(version: str) -> bool:
    try:
        return tuple(int(x) for x in version.split(".")[:2]) >= MIN_NVRTC
    except ValueError:
        return False


def _own_options(options) -> bool:
    """Whether `options` search only our include directories and pre-include nothing."""
    ours = {f"-I{d}" for d in toolkit.include_dirs()}
    for o in options:
        if o.startswith("-I") and o not in ours:
            return False
        if o.split("=")[0] in ("-include", "--pre-include", "-pre-include", "--include-path",
                               "-include-path"):
            return False
    return True


@functools.lru_cache(maxsize=None)
def cuda_headers_stamp() -> tuple:
    """(name, size, mtime_ns) of the CUDA include directory's top-level files and directories
    (a toolkit update replaces files or directory entries, which changes these)."""
    d = toolkit.cuda_include_dir()
    if not d:
        return ()
    out = []
    try:
        with os.scandir(d) as it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=True)
                except OSError:
                    continue
                out.append((e.name, st.st_size, st.st_mtime_ns))
    except OSError:
        return ()
    return (d, tuple(sorted(out)))


def pch_key(prefix: list[str], options, backend) -> str:
    from .cache import headers_digest

    lib = getattr(backend, "path", None) or toolkit._loaded_library("libnvrtc.so")
    parts = {
        "prefix": prefix,
        "options": list(options),
        "nvrtc": backend.version,
        "library": toolkit.file_stamps([os.path.realpath(lib)]) if lib else None,
        "tl_headers": headers_digest(),
        "cuda_headers": cuda_headers_stamp(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def pch_dir() -> Optional[Path]:
    """`<cache dir>/pch` (created 0700), or None when the kernel cache is off or its directory
    unsafe (cache.cache_dir warns once), or `pch` there is not a private directory of ours."""
    from . import cache

    base = cache.cache_dir()
    if base is None:
        return None
    try:
        return files.private_dir(base / "pch")
    except OSError as e:
        _warn_once(str(base), f"tilelang: NVRTC precompiled headers are not used: {e}")
    return None


def _warn_once(tag: str, msg: str):
    if tag not in _warned:
        _warned.add(tag)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)


def clear(base: Path):
    """Remove the PCH files (and header-set marks) under the cache directory `base`."""
    for suffix in (".pch", ".seen"):
        files.remove_entries(base / "pch", suffix)


def _our_regular_file(path: Path) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    uid = files.current_uid()
    return stat.S_ISREG(st.st_mode) and st.st_size > 0 and \
        (uid is None or files.owner_of(st) == uid)


@dataclass
class Plan:
    """The NVRTC options that create or use one PCH file, and what to do after the compile."""

    options: list
    path: Path  # the PCH file of this header set
    creating: Optional[str] = None  # the temporary file NVRTC writes, when creating

    def finish(self, ok: bool, log: str) -> str:
        """Put a created file in place or drop a rejected one; returns the log without NVRTC's
        PCH messages."""
        rejected = not self.creating and _PCH_REJECTED.search(log) is not None
        if self.creating:
            try:
                if ok and os.path.getsize(self.creating) > 0:
                    os.replace(self.creating, self.path)
                    _evict(self.path.parent)
                else:
                    os.unlink(self.creating)
            except OSError:
                pass
        elif rejected:  # damaged, incomplete or made with other options: made again next time
            try:
                os.unlink(self.path)
            except OSError:
                pass
        else:
            files.touch(self.path)
        return clean_log(log)

    def abandon(self):
        if self.creating:
            try:
                os.unlink(self.creating)
            except OSError:
                pass


def clean_log(log: str) -> str:
    """`log` without NVRTC's messages about precompiled headers (and the remark that follows
    a warning when no other warning is left)."""
    if not _PCH_MESSAGE.search(log):
        return log
    lines = [ln for ln in log.split("\n") if not _PCH_MESSAGE.search(ln)]
    if not any(_WARNING.search(ln) for ln in lines):
        lines = [ln for ln in lines if not ln.startswith(_SUPPRESS_REMARK)]
    return "\n".join(lines).strip()


def missing_pch(log: str) -> bool:
    """Whether a failed compile failed because its PCH file could not be read."""
    return "cannot open precompiled header file" in log


def _evict(directory: Path):
    max_entries = _int_setting("TILELANG_PCH_MAX_ENTRIES", DEFAULT_MAX_ENTRIES)
    max_bytes = files.size_setting("TILELANG_PCH_MAX_SIZE", DEFAULT_MAX_BYTES)
    files.evict(directory, ".pch", max_entries, max_bytes)
    files.evict(directory, ".seen", 4 * max_entries, 1 << 20)


def _int_setting(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a whole number") from None
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {text!r}")
    return value


def plan(source: str, options, backend) -> Optional[Plan]:
    """How to compile `source` with a PCH (see the module docstring), or None."""
    if backend is None or not enabled() or not _nvrtc_new_enough(backend.version):
        return None
    prefix = header_prefix(source)
    if prefix is None or not _own_options(options):
        return None
    d = pch_dir()
    if d is None:
        return None
    key = pch_key(prefix, options, backend)
    path = d / f"{key}.pch"
    if _our_regular_file(path):
        return Plan([f"--use-pch={path}"], path)
    seen = d / f"{key}.seen"
    if not os.path.lexists(seen):  # first time: remember the header set, compile without
        try:
            files.write_atomic(d, seen.name, b"", durable=False)
        except OSError:
            pass
        return None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=d)
        os.close(fd)
    except OSError:
        return None
    return Plan([f"--create-pch={tmp}"], path, creating=tmp)
