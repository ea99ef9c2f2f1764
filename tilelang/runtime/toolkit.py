"""Where the CUDA tools are: header directories, nvcc, and an NVRTC backend.

Expects nothing beyond the standard library; `cuda.bindings` and `cuda.pathfinder` are used
when importable. Guarantees:
  * `include_dirs()` lists tilelang's own header library first, then one CUDA header directory
    that holds `cuda_fp16.h` (toolkit or the `nvidia-*` wheels), found once per process;
  * `nvrtc_backend()` returns an object with `compile(source, name, options) -> (ok, log, cubin)`
    and `version`: `libnvrtc` through ctypes (the library cuda-pathfinder finds, which is the
    one `cuda.bindings` would load, else an `nvidia-*` wheel's or a toolkit's; where that is a
    library already loaded or a wheel's in site-packages, found without importing
    cuda-pathfinder, by its rules), else
    `cuda.bindings.nvrtc`, else None. ctypes first because it is the cheaper way to the same
    library: importing `cuda.bindings.nvrtc` (it imports the driver bindings too) costs about
    20 ms more of the first compile in a process;
  * `nvcc_path()` returns the nvcc executable or None.
`TILELANG_CUDA_COMPILER=nvrtc|nvcc` forces one compiler (read on every call).
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import sys
from pathlib import Path
from typing import Optional

TILELANG_INCLUDE = str(Path(__file__).resolve().parent.parent / "include")


def _cuda_homes() -> list[str]:
    homes = []
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        v = os.environ.get(var)
        if v:
            homes.append(v)
    nvcc = shutil.which("nvcc")
    if nvcc:
        homes.append(str(Path(os.path.realpath(nvcc)).parent.parent))
    homes += ["/usr/local/cuda"] + sorted(_listdir("/usr/local", "cuda-"), reverse=True)
    out = []
    for h in homes:
        if h not in out and os.path.isdir(h):
            out.append(h)
    return out


def _wheel_dirs(sub: str) -> list[str]:
    """`nvidia/<pkg>/<sub>` directories of the NVIDIA wheels (cu13 layout first)."""
    out = []
    for base in sys.path:
        root = os.path.join(base or ".", "nvidia")
        if not os.path.isdir(root):
            continue
        for pkg in ("cu13", "cu12", "cuda_runtime", "cuda_nvrtc", "cuda_nvcc"):
            d = os.path.join(root, pkg, sub)
            if os.path.isdir(d) and d not in out:
                out.append(d)
    return out


def _listdir(d: str, prefix: str) -> list[str]:
    """The paths in directory `d` whose names start with `prefix` (a glob without `glob`,
    whose pattern compiling is most of what finding the CUDA homes costs a cached kernel's
    first load)."""
    try:
        return [os.path.join(d, n) for n in os.listdir(d) if n.startswith(prefix)]
    except OSError:
        return []


def _has_cuda_headers(d: str) -> bool:
    return os.path.isfile(os.path.join(d, "cuda_fp16.h")) and \
        os.path.isfile(os.path.join(d, "cuda_bf16.h"))


@functools.lru_cache(maxsize=None)
def cuda_include_dir() -> Optional[str]:
    """A directory holding the CUDA runtime headers (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h):
    a toolkit's include/, else the one cuda-pathfinder finds, else an `nvidia-*` wheel's.
    cuda-pathfinder is asked only when no toolkit has them: its search can start a Python
    subprocess (about 0.1 s of the first compile in a process)."""
    for h in _cuda_homes():
        d = os.path.join(h, "include")
        if _has_cuda_headers(d):
            return d
    try:  # cuda-pathfinder knows the conda / wheel layouts too
        from cuda import pathfinder

        d = pathfinder.find_nvidia_header_directory("cudart")
        if d and _has_cuda_headers(str(d)):
            return str(d)
    except Exception:
        pass
    for d in _wheel_dirs("include"):
        if _has_cuda_headers(d):
            return d
    return None


def include_dirs() -> list[str]:
    dirs = [TILELANG_INCLUDE]
    cuda = cuda_include_dir()
    if cuda:
        dirs.append(cuda)
        # CUDA 13 keeps libcu++ (<cuda/std/...>, which <cooperative_groups.h> includes) here;
        # nvcc searches it by itself, NVRTC only when told
        cccl = os.path.join(cuda, "cccl")
        if os.path.isdir(cccl):
            dirs.append(cccl)
    return dirs


@functools.lru_cache(maxsize=None)
def nvcc_path() -> Optional[str]:
    for h in _cuda_homes():
        p = os.path.join(h, "bin", "nvcc")
        if os.access(p, os.X_OK):
            return p
    return shutil.which("nvcc")


@functools.lru_cache(maxsize=None)
def nvcc_version() -> str:
    """`nvcc-13.0.88` style identity (part of the cache key)."""
    import subprocess  # here: importing it costs a program-cache hit a few ms

    path = nvcc_path()
    if path is None:
        return "nvcc-missing"
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "nvcc-unknown"
    for tok in out.split():
        if tok.startswith("V") and tok[1:2].isdigit():
            return "nvcc-" + tok[1:].rstrip(",")
    return "nvcc-" + str(abs(hash(out)))


# ---- NVRTC ---------------------------------------------------------------------------------

class _BindingsNvrtc:
    """NVRTC through NVIDIA's `cuda.bindings.nvrtc` (cuda-python)."""

    kind = "cuda.bindings"

    def __init__(self):
        from cuda.bindings import nvrtc

        self._n = nvrtc
        err, major, minor = nvrtc.nvrtcVersion()
        self.version = f"{major}.{minor}"

    def compile(self, source: str, name: str, options: list[str]):
        n = self._n
        err, prog = n.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
        if err != n.nvrtcResult.NVRTC_SUCCESS:
            return False, f"nvrtcCreateProgram failed: {err}", b""
        try:
            opts = [o.encode() for o in options]
            (res,) = n.nvrtcCompileProgram(prog, len(opts), opts)
            _, size = n.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            n.nvrtcGetProgramLog(prog, log)
            log = log.rstrip(b"\x00 ").decode(errors="replace")
            if res != n.nvrtcResult.NVRTC_SUCCESS:
                return False, log or str(res), b""
            _, size = n.nvrtcGetCUBINSize(prog)
            cubin = b" " * size
            n.nvrtcGetCUBIN(prog, cubin)
            return True, log, bytes(cubin)
        finally:
            n.nvrtcDestroyProgram(prog)


class _CtypesNvrtc:
    """NVRTC through ctypes on libnvrtc.so (e.g. the `nvidia-cuda-nvrtc` wheel torch ships)."""

    kind = "ctypes"

    def __init__(self, path: str):
        lib = ctypes.CDLL(path)
        self._lib = lib
        self.path = path
        p, sz, c = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
        lib.nvrtcCreateProgram.argtypes = [ctypes.POINTER(p), c, c, ctypes.c_int,
                                           ctypes.c_void_p, ctypes.c_void_p]
        lib.nvrtcCompileProgram.argtypes = [p, ctypes.c_int, ctypes.POINTER(c)]
        lib.nvrtcGetProgramLogSize.argtypes = [p, ctypes.POINTER(sz)]
        lib.nvrtcGetProgramLog.argtypes = [p, c]
        lib.nvrtcGetCUBINSize.argtypes = [p, ctypes.POINTER(sz)]
        lib.nvrtcGetCUBIN.argtypes = [p, c]
        lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(p)]
        lib.nvrtcGetErrorString.restype = c
        major, minor = ctypes.c_int(), ctypes.c_int()
        lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        self.version = f"{major.value}.{minor.value}"
        _preload_builtins(path, self.version)

    def compile(self, source: str, name: str, options: list[str]):
        lib = self._lib
        prog = ctypes.c_void_p()
        res = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0,
                                     None, None)
        if res != 0:
            return False, f"nvrtcCreateProgram failed: {lib.nvrtcGetErrorString(res)}", b""
        try:
            opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
            res = lib.nvrtcCompileProgram(prog, len(options), opts)
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            buf = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(prog, buf)
            log = buf.value.decode(errors="replace").rstrip()
            if res != 0:
                return False, log or lib.nvrtcGetErrorString(res).decode(), b""
            lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
            buf = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetCUBIN(prog, buf)
            return True, log, buf.raw
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


# where cuda-pathfinder looks first for NVRTC (pip wheels under site-packages), in its order
_NVRTC_WHEEL_DIRS = ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib")
_NVRTC_SONAMES = ("libnvrtc.so.13", "libnvrtc.so.12")


def _nvrtc_pathfinder_would_pick() -> Optional[str]:
    """The libnvrtc cuda-pathfinder would load, where that is plain to see without importing
    it (about 20 ms of a process's first compile): one this process has loaded already, else
    the first wheel's in its site-packages order. None: ask cuda-pathfinder."""
    loaded = _loaded_library("libnvrtc.so")
    if loaded:
        return loaded
    for base in sys.path:
        for rel in _NVRTC_WHEEL_DIRS:
            for soname in _NVRTC_SONAMES:
                p = os.path.join(base or ".", rel, soname)
                if os.path.isfile(p):
                    return os.path.abspath(p)
    return None


def _preload_builtins(libnvrtc: str, version: str):
    """Load libnvrtc-builtins.so.<version> from beside `libnvrtc` (as cuda-pathfinder does
    when it loads NVRTC): the wheels' libnvrtc has no RUNPATH, so its own dlopen of the
    builtins by name finds them only when they are loaded already ("failed to open
    libnvrtc-builtins.so.13.0" otherwise)."""
    sibling = os.path.join(os.path.dirname(os.path.realpath(libnvrtc)),
                           f"libnvrtc-builtins.so.{version}")
    if os.path.isfile(sibling):
        try:
            ctypes.CDLL(sibling, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
        except OSError:
            pass  # NVRTC's own lookup may still find them


def _libnvrtc_candidates() -> list[str]:
    out = []
    seen = _nvrtc_pathfinder_would_pick()
    if seen:
        out.append(seen)
    else:
        try:
            from cuda import pathfinder

            out.append(pathfinder.load_nvidia_dynamic_lib("nvrtc").abs_path)
        except Exception:
            pass
    for d in _wheel_dirs("lib") + [os.path.join(h, sub) for h in _cuda_homes()
                                   for sub in ("lib64", "lib", "targets/x86_64-linux/lib")]:
        out += sorted(_listdir(d, "libnvrtc.so"), reverse=True)
    return [p for p in out if p and "builtins" not in os.path.basename(p)]


@functools.lru_cache(maxsize=None)
def _find_nvrtc(prefer: str):
    if prefer == "bindings":
        try:
            return _BindingsNvrtc()
        except Exception:
            pass
    for path in _libnvrtc_candidates():
        try:
            return _CtypesNvrtc(path)
        except OSError:
            continue
    if prefer == "auto":  # "ctypes" never takes the bindings
        try:
            return _BindingsNvrtc()
        except Exception:
            pass
    return None


def nvrtc_backend(prefer: str = "auto"):
    """The NVRTC backend (`prefer`: "auto", "bindings" or "ctypes"), or None."""
    return _find_nvrtc(prefer)


def requested_compiler() -> str:
    """`TILELANG_CUDA_COMPILER`: "nvrtc", "nvcc" or "auto" (default)."""
    v = os.environ.get("TILELANG_CUDA_COMPILER", "auto").strip().lower()
    return v if v in ("nvrtc", "nvcc", "nvrtc-bindings", "nvrtc-ctypes") else "auto"


# ---- what a program entry of the disk cache depends on --------------------------------------

def compiler_files(which: str, backend) -> Optional[list]:
    """The files whose change must invalidate cubins made by `which` ("nvrtc" with its
    `backend`, or "nvcc"): the compiler itself and the CUDA headers it parsed. None when the
    NVRTC library in use cannot be named (then nothing is stamped with it)."""
    if which == "nvcc":
        lib = nvcc_path()
    else:
        lib = getattr(backend, "path", None) or _loaded_library("libnvrtc.so")
    if not lib:
        return None
    files = [os.path.realpath(lib)]
    cuda = cuda_include_dir()
    if cuda:
        files.append(os.path.join(cuda, "cuda_fp16.h"))
    return files


def file_stamps(paths) -> list:
    """[(path, size, mtime_ns)] of `paths` (None for a missing file)."""
    out = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append((p, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((p, None, None))
    return out


def _loaded_library(stem: str) -> Optional[str]:
    """The path of a shared library this process has mapped whose name starts with `stem`
    (Linux: /proc/self/maps), e.g. the libnvrtc that cuda.bindings loaded."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rsplit(None, 1)[-1] if "/" in line else ""
                if os.path.basename(path).startswith(stem):
                    return path
    except OSError:
        pass
    return None
