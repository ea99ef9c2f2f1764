"""CUDA C++ source -> cubin, with NVRTC (preferred) or nvcc, through the disk cache.

Expects CUDA C++ that includes tilelang's headers (`#include "tl.cuh"`) and an architecture
such as "sm_80" or "sm_90a". Guarantees:
  * `compile_cuda` returns a `CompileResult` whose `cubin` is SASS for exactly that
    architecture (sm_90a = compute_90a/sm_90a, so wgmma and setmaxnreg are available);
  * options are written in nvcc's spelling; for NVRTC they are translated (`-O3` is NVRTC's
    default and dropped, `-Xptxas X` becomes `--ptxas-options=X`, host-only flags are dropped);
  * a failed compile raises `CudaCompileError` with the compiler log, the source lines around
    the first error and the path where the whole source was written;
  * identical requests are compiled once per process at a time (threads wait for the first);
  * NVRTC parses the headers from a precompiled header when runtime/pch.py made one for the
    source's header set earlier in this process (same cubin and log; the PCH options are not
    part of the cache key).
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
import time

from ..errors import TileLangError
from . import cache, toolkit
from .cache import CompileResult


class CudaCompileError(TileLangError, RuntimeError):
    """The CUDA compiler rejected a kernel. `log` is its full output, `source_path` the file the
    source was written to, `line` the first error's line (or None)."""

    def __init__(self, message: str, log: str = "", source_path: str = "", line=None):
        super().__init__(message)
        self.log = log
        self.source_path = source_path
        self.line = line


_ARCH_RE = re.compile(r"^(?:sm_?|compute_)?(\d{2,3})([af]?)$")


def normalize_arch(arch: str) -> str:
    """"sm_90a", "90a", "sm90a" -> "sm_90a"."""
    m = _ARCH_RE.match(str(arch).strip().lower())
    if not m:
        raise ValueError(f"unknown CUDA architecture {arch!r}; expected e.g. 'sm_80' or 'sm_90a'")
    return f"sm_{m.group(1)}{m.group(2)}"


# ---- options -------------------------------------------------------------------------------

_TAKES_VALUE = {"-Xptxas", "--ptxas-options", "-maxrregcount", "--maxrregcount", "-I", "-D",
                "-U", "-include", "-Xcompiler", "--compiler-options", "-arch", "-gencode",
                "--gpu-architecture", "-code", "--gpu-code", "-ccbin"}
_HOST_ONLY = ("-Xcompiler", "--compiler-options", "-ccbin", "-keep", "--keep", "-lcuda",
              "-shared", "-c", "-cubin", "-ptx", "-fatbin")
_ARCH_FLAGS = ("-arch", "--gpu-architecture", "-gencode", "--generate-code", "-code",
               "--gpu-code")


def _split(options) -> list[tuple[str, str | None]]:
    """nvcc-style options -> [(flag, value)], joining "-Xptxas -v" and "-Xptxas=-v" forms."""
    if isinstance(options, str):
        options = options.split()
    items = list(options)
    out = []
    i = 0
    while i < len(items):
        o = str(items[i])
        if "=" in o and o.startswith("-"):
            flag, val = o.split("=", 1)
            out.append((flag, val))
        elif o in _TAKES_VALUE and i + 1 < len(items):
            out.append((o, str(items[i + 1])))
            i += 1
        elif len(o) > 2 and o[:2] in ("-I", "-D", "-U") and not o.startswith("--"):
            out.append((o[:2], o[2:]))
        else:
            out.append((o, None))
        i += 1
    return out


def _nvcc_options(arch: str, user, fast_math, lineinfo, verbose) -> list[str]:
    num = arch[3:]
    opts = ["-cubin", f"-gencode=arch=compute_{num},code=sm_{num}", "-O3", "-std=c++17"]
    for d in toolkit.include_dirs():
        opts.append(f"-I{d}")
    if fast_math:
        opts.append("--use_fast_math")
    if lineinfo:
        opts.append("-lineinfo")
    if verbose:
        opts.append("-Xptxas=-v")
    for flag, val in _split(user):
        if flag in _ARCH_FLAGS or flag in ("-cubin", "-c", "-o"):
            continue
        opts.append(flag if val is None else (f"{flag}{val}" if flag in ("-I", "-D", "-U")
                                              else f"{flag}={val}"))
    return opts


def _nvrtc_options(arch: str, user, fast_math, lineinfo, verbose) -> list[str]:
    opts = [f"--gpu-architecture={arch}", "-std=c++17"]
    for d in toolkit.include_dirs():
        opts.append(f"-I{d}")
    if fast_math:
        opts.append("--use_fast_math")
    if lineinfo:
        opts.append("-lineinfo")
    if verbose:
        opts.append("--ptxas-options=-v")
    for flag, val in _split(user):
        if flag in _ARCH_FLAGS or flag in _HOST_ONLY or flag in ("-o",):
            continue
        if re.fullmatch(r"-O[0-3s]?", flag):  # NVRTC optimises by default; it has no -O
            continue
        if flag in ("-Xptxas", "--ptxas-options"):
            flag = "--ptxas-options"
        elif flag in ("-maxrregcount", "--maxrregcount"):
            flag = "--maxrregcount"
        elif flag in ("-use_fast_math",):
            flag = "--use_fast_math"
        opts.append(flag if val is None else (f"{flag}{val}" if flag in ("-I", "-D", "-U")
                                              else f"{flag}={val}"))
    return opts


# ---- compile ---------------------------------------------------------------------------------

_locks: dict = {}
_locks_guard = threading.Lock()


def _key_lock(key: str) -> threading.Lock:
    with _locks_guard:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = threading.Lock()
        return lock


def choose_compiler(compiler: str | None = None):
    """(kind, NVRTC backend or None) for `compiler`: "auto" (NVRTC if present, else nvcc),
    "nvrtc", "nvcc", or "nvrtc-bindings" / "nvrtc-ctypes" (one NVRTC access path)."""
    want = (compiler or toolkit.requested_compiler() or "auto").lower()
    if want == "nvcc":
        if toolkit.nvcc_path() is None:
            raise CudaCompileError("nvcc was requested but is not installed (set CUDA_HOME or "
                                   "add it to PATH)")
        return "nvcc", None
    prefer = {"nvrtc-bindings": "bindings", "nvrtc-ctypes": "ctypes"}.get(want, "auto")
    backend = toolkit.nvrtc_backend(prefer)
    if backend is not None and (prefer != "bindings" or backend.kind == "cuda.bindings"):
        return "nvrtc", backend
    if want.startswith("nvrtc"):
        raise CudaCompileError(f"{want} was requested but NVRTC was not found (pip install "
                               "cuda-bindings nvidia-cuda-nvrtc)")
    if toolkit.nvcc_path() is not None:
        return "nvcc", None
    raise CudaCompileError("no CUDA compiler found: install cuda-bindings and "
                           "nvidia-cuda-nvrtc (pip), or the CUDA toolkit (nvcc)")


def compile_cuda(source: str, arch: str, options=(), name: str = "kernel", *,
                 fast_math: bool = False, lineinfo: bool = False, verbose: bool = False,
                 compiler: str | None = None, use_cache: bool = True) -> CompileResult:
    """Compile CUDA C++ `source` to a cubin for `arch` (cached on disk)."""
    t0 = time.perf_counter()
    arch = normalize_arch(arch)
    which, backend = choose_compiler(compiler)
    if which == "nvrtc":
        ident = f"nvrtc-{backend.version}"
        opts = _nvrtc_options(arch, options, fast_math, lineinfo, verbose)
    else:
        ident = toolkit.nvcc_version()
        opts = _nvcc_options(arch, options, fast_math, lineinfo, verbose)
    fname = re.sub(r"[^A-Za-z0-9_.-]", "_", name or "kernel")
    key = cache.make_key(source, arch, opts, ident, fname)
    with _key_lock(key):
        if use_cache:
            hit = cache.load(key)
            if hit is not None:
                return CompileResult(hit["cubin"], hit["log"], which, True,
                                     time.perf_counter() - t0, arch, tuple(opts), key, ident)
        if which == "nvrtc":
            ok, log, cubin = _nvrtc_compile(backend, source, fname, opts)
        else:
            ok, log, cubin = _run_nvcc(source, fname, opts)
        if not ok:
            raise _compile_error(source, fname, arch, which, ident, log, opts)
        if use_cache:
            cache.store(key, cubin, log, ident)
    return CompileResult(cubin, log, which, False, time.perf_counter() - t0, arch,
                         tuple(opts), key, ident)


def _nvrtc_compile(backend, source: str, fname: str, opts: list[str]):
    """NVRTC with a precompiled header where one applies (runtime/pch.py): the same cubin,
    the headers parsed once per header set instead of once per kernel."""
    from . import pch  # here: a program-cache hit never compiles, nor needs this import

    plan = pch.plan(source, opts, backend)
    if plan is None:
        return backend.compile(source, fname + ".cu", opts)
    try:
        ok, log, cubin = backend.compile(source, fname + ".cu", [*opts, *plan.options])
    except BaseException:
        if plan.creating:  # a half-written file
            plan.forget()
        raise
    if not ok and pch.missing_pch(log):  # removed meanwhile (another thread evicted it)
        plan.forget()
        return backend.compile(source, fname + ".cu", opts)
    return ok, plan.finish(ok, log), cubin


def _run_nvcc(source: str, fname: str, opts: list[str]):
    import subprocess  # here: importing it costs a program-cache hit a few ms

    with tempfile.TemporaryDirectory(prefix="tilelang-nvcc-") as d:
        src = os.path.join(d, fname + ".cu")
        out = os.path.join(d, fname + ".cubin")
        with open(src, "w") as f:
            f.write(source)
        cmd = [toolkit.nvcc_path(), *opts, "-o", out, src]
        from ..env import env

        timeout = env.get_compile_timeout_seconds() or 1800
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, (f"nvcc timed out after {timeout:g} s (TILELANG_COMPILE_TIMEOUT_SECONDS "
                           "sets the limit)"), b""
        log = (p.stdout + p.stderr).replace(src, fname + ".cu").strip()
        if p.returncode != 0 or not os.path.exists(out):
            return False, log or f"nvcc exited with status {p.returncode}", b""
        with open(out, "rb") as f:
            return True, log, f.read()


_ERR_LINE = re.compile(r"(?m)^(?P<file>[^\n(]*?)\((?P<line>\d+)\): (?:catastrophic )?error")


def _context(lines: list[str], line: int, radius: int = 3) -> list[str]:
    lo, hi = max(1, line - radius), min(len(lines), line + radius)
    return [f"{'>' if i == line else ' '}{i:5d} | {lines[i - 1]}" for i in range(lo, hi + 1)]


def _compile_error(source, fname, arch, which, ident, log, opts) -> CudaCompileError:
    import hashlib

    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    try:
        path = str(cache.write_failed_source(f"{fname}_{digest}.cu", source))
    except OSError:
        path = "(could not be written)"
    parts = [f"CUDA compilation of '{fname}' for {arch} failed ({ident}):", log.strip()]
    line = None
    errors = list(_ERR_LINE.finditer(log))
    own = [m for m in errors if os.path.basename(m.group("file")) == fname + ".cu"]
    inst = re.search(rf"at line (\d+) of (?:[^\s]*/)?{re.escape(fname)}\.cu", log)
    if own or inst:  # the first error in the generated source, or where it instantiated
        line = int(own[0].group("line")) if own else int(inst.group(1))
        parts.append(f"generated source around line {line}:")
        parts += _context(source.split("\n"), line)
    if errors and (not own or errors[0] is not own[0]):  # first error inside a header
        hdr, hline = errors[0].group("file"), int(errors[0].group("line"))
        try:
            with open(hdr) as f:
                parts.append(f"{hdr} around line {hline}:")
                parts += _context(f.read().split("\n"), hline)
        except OSError:
            pass
    hint = _register_hint(source, log)
    if hint:
        parts.append(hint)
    parts.append(f"full source written to {path}")
    parts.append("options: " + " ".join(o for o in opts if not o.startswith("-I")))
    return CudaCompileError("\n".join(parts), log, path, line)


def _register_hint(source: str, log: str) -> str:
    """What ptxas's 'Insufficient registers (R)' means for the user's kernel, or ''."""
    m = re.search(r"Insufficient registers \((\d+)\)", log)
    bounds = re.search(r"__launch_bounds__\((\d+)", source)
    if not m or not bounds:
        return ""
    return (f"hint: a block of {bounds.group(1)} threads leaves each thread at most "
            f"{m.group(1)} of the SM's 65536 registers, too few for one instruction (a wgmma "
            "needs its whole accumulator in registers: 64 per thread for a 64x128 tile per "
            "warpgroup, 128 for 64x256). Use fewer threads or smaller tiles per warpgroup.")
