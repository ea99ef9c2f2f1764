"""NVRTC precompiled headers within a process: a process that compiles several kernels with
the same header set parses the headers once, not once per kernel.

Most of NVRTC's front end on a generated kernel is spent parsing tilelang's headers and the
CUDA headers they include (about 50 of its 70 ms on the development VM); NVRTC 12.8+ can save
that parse to a file (`--create-pch`) and load it for a later program with the same leading
preprocessing directives and options (`--use-pch`). The cubin is the same either way. A PCH
file is an image of NVRTC's heap: NVRTC accepts it only in the process (the loaded library
instance) that made it ("incompatible precompiled header (PCH) heap allocation address" in
any other), so these files are private to the process and deleted when it exits.

Expects a CUDA source as codegen/module.py writes it (comments, `#define TL_...`, our
`#include`s, then code) and NVRTC options as runtime/compiler.py builds them. Guarantees:
  * `plan(source, options, backend)` returns None (compile without) unless: PCH is on
    (`TILELANG_NVRTC_PCH`, default 1), NVRTC is 12.8 or newer, every leading directive is one
    codegen writes (`#define TL_*`, `#include "tl.cuh"`, `#include "tl/*.cuh"`,
    `#include <cooperative_groups.h>`: nothing of the user's whose files we do not stamp),
    and the options add no include directories or pre-included files of their own;
  * a header set's first compile in the process only records it; the second creates the PCH
    (about 40 ms more, once); later ones use it. A process compiling one kernel of a header
    set never pays for a file it would not reuse;
  * a PCH file is keyed on the directives and options and on the size and modification time
    of tilelang's header files and of the CUDA include directory's top-level entries, read
    at every compile: a header edited while the process runs gives a new key, never the old
    parse (NVRTC itself checks directives and options, not the headers' contents);
  * files live in a directory this process made with `tempfile.mkdtemp` (mode 0700, a fresh
    name: never a directory someone else made or can write to) and are used only while they
    are non-empty regular files of this user's (not links); the directory is removed at exit
    (by the process that made it: a forked child makes its own);
  * a PCH that NVRTC refuses (damaged, incomplete, other options, another heap) is deleted and
    made again by the next compile of its header set; one that disappeared before the compile
    makes the compile run once more without PCH; NVRTC's PCH messages are removed from the
    log, so the log (and the cache entry) is the one a compile without PCH gives;
  * at most MAX_FILES files per process (about 20 MB each), least recently used deleted.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..cache import files
from . import toolkit

MIN_NVRTC = (12, 8)
MAX_FILES = 8
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

# the leading directives codegen/module.py writes; anything else there is not ours
_OUR_DIRECTIVE = re.compile(r'#\s*(?:define\s+TL_\w+\s*|include\s+"tl(?:\.cuh|/\w+\.cuh)"\s*|'
                            r'include\s+<cooperative_groups\.h>\s*)$')
# NVRTC's messages about a PCH ("creating / using precompiled header file", the warnings)
_PCH_MESSAGE = re.compile(r'(?:precompiled header|PCH) file "[^"]*"')
# ... and those where it refused one: #630 other directives, #629 other options, #626
# invalid, #2226 incomplete, #20282 made by another process
_PCH_REJECTED = re.compile(r'(?i)warning[^\n]*(?:precompiled header|PCH) file "[^"]*"')
_WARNING = re.compile(r"(?i)\bwarning #\d+")
_SUPPRESS_REMARK = "Remark: The warnings can be suppressed with"


class _ProcessFiles:
    """This process's PCH directory and what it holds (reset in a forked child)."""

    def __init__(self):
        self.pid = os.getpid()
        self.dir: Optional[Path] = None
        self.seen: set = set()  # (directives, options, NVRTC version) compiled once
        self.failed: set = set()  # header sets NVRTC made no PCH of (not tried again)
        self.creating: set = set()  # header sets a thread is making a PCH of now
        self.made: dict = {}  # key -> path, least recently used first
        self.lock = threading.Lock()


_state = _ProcessFiles()


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


def nvrtc_new_enough(version: str) -> bool:
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


def _dir_stamps(d: str, recursive: bool) -> list:
    out = []
    try:
        with os.scandir(d) as it:
            entries = list(it)
    except OSError:
        return out
    for e in entries:
        try:
            st = e.stat(follow_symlinks=True)
        except OSError:
            continue
        if recursive and stat.S_ISDIR(st.st_mode):
            out += _dir_stamps(e.path, True)
        else:
            out.append((e.path, st.st_size, st.st_mtime_ns))
    return out


def headers_stamp() -> list:
    """(path, size, mtime_ns) of tilelang's header files and of the CUDA include directory's
    top-level files and directories (a toolkit update replaces files or directory entries)."""
    out = _dir_stamps(toolkit.TILELANG_INCLUDE, True)
    cuda = toolkit.cuda_include_dir()
    if cuda:
        out += _dir_stamps(cuda, False)
    return sorted(out)


def pch_key(prefix: list[str], options, backend) -> str:
    parts = {"prefix": prefix, "options": list(options), "nvrtc": backend.version,
             "headers": headers_stamp()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _current() -> _ProcessFiles:
    """This process's state (a forked child starts afresh: the parent's files stay its own)."""
    global _state
    if _state.pid != os.getpid():
        _state = _ProcessFiles()
    return _state


def _process_dir(state: _ProcessFiles) -> Path:
    """This process's private directory (made on first use; caller holds the lock)."""
    if state.dir is None:
        state.dir = Path(tempfile.mkdtemp(prefix="tilelang-pch-"))
        atexit.register(_remove_dir, state.dir, state.pid)
    return state.dir


def _remove_dir(d: Path, pid: int):
    if os.getpid() == pid:
        shutil.rmtree(d, ignore_errors=True)


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
    """The NVRTC option that creates or uses one PCH file, and what to do after the compile."""

    options: list
    key: str
    path: Path
    creating: bool = False

    def finish(self, ok: bool, log: str) -> str:
        """Record a created file, or drop one NVRTC refused; returns the log without NVRTC's
        PCH messages."""
        with _state.lock:
            _state.creating.discard(self.key)
            if self.creating and ok and _our_regular_file(self.path):
                _state.made[self.key] = self.path
                _evict()
            elif self.creating or _PCH_REJECTED.search(log):
                if self.creating and ok:  # compiled, but no PCH came of it (heap too small)
                    _state.failed.add(self.key)
                self.forget()
        return clean_log(log)

    def forget(self):
        _state.creating.discard(self.key)
        _state.made.pop(self.key, None)
        try:
            os.unlink(self.path)
        except OSError:
            pass


def _evict():
    while len(_state.made) > MAX_FILES:
        key = next(iter(_state.made))
        path = _state.made.pop(key)
        try:
            os.unlink(path)
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


def plan(source: str, options, backend) -> Optional[Plan]:
    """How to compile `source` with a PCH (see the module docstring), or None."""
    if backend is None or not enabled() or not nvrtc_new_enough(backend.version):
        return None
    prefix = header_prefix(source)
    if prefix is None or not _own_options(options):
        return None
    header_set = (tuple(prefix), tuple(options), backend.version)
    state = _current()
    with state.lock:
        if header_set not in state.seen:  # first time: remember the header set, compile
            state.seen.add(header_set)    # without (nothing stat'ed, nothing made)
            return None
    key = pch_key(prefix, options, backend)
    with state.lock:
        if key in state.failed or key in state.creating:  # no PCH / another thread makes it
            return None
        try:
            d = _process_dir(state)
        except OSError:
            return None
        path = d / f"{key}.pch"
        if key in state.made:
            if _our_regular_file(path):
                state.made[key] = state.made.pop(key)  # most recently used
                return Plan([f"--use-pch={path}"], key, path)
            state.made.pop(key)  # gone or replaced: made again below
        try:  # whatever is there is not a PCH we made; reserve the name (O_EXCL, 0600)
            if os.path.lexists(path):
                os.unlink(path)
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | _NOFOLLOW, 0o600))
        except OSError:
            return None
        state.creating.add(key)
        return Plan([f"--create-pch={path}"], key, path, creating=True)
