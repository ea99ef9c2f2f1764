"""Configuration read from the environment, in one place.

TILELANG_CACHE_DIR        where compiled kernels are cached (default ~/.tilelang/cache; empty
                          means the default)
TILELANG_CACHE_MAX_ENTRIES, TILELANG_CACHE_MAX_SIZE   the kernel cache's cap (20000, 4G)
TILELANG_DISABLE_CACHE    1 disables the disk cache
TILELANG_DEFAULT_TARGET   target used when none is given ("auto", "cpu", "cuda", ...);
                          the reference's spelling TILELANG_TARGET is read when it is unset
TILELANG_DUMP_IR          1 prints the IR after every pass
TILELANG_VERBOSE          1 prints what the compiler does (pipeline steps, fallbacks)
TILELANG_AUTO_TUNING_*    autotuner: DISABLE_CACHE, CPU_COUNTS, CPU_UTILITIES, MAX_CPU_COUNT
TILELANG_JIT_DIAGNOSTICS  1 logs each JIT phase (lower, compile) with its time (jit/diagnostics.py)
TILELANG_NVRTC_PCH        0 turns off NVRTC's precompiled headers within a process
                          (runtime/pch.py; on by default)

`env` also carries the reference's attribute names (`env.TILELANG_CACHE_DIR`, `env.CUDA_HOME`,
`env.TILELANG_AUTO_TUNING_CPU_COUNTS`, `env.get_default_target()`, ...) as strings read live
from the environment; assigning one (`env.TILELANG_PRINT_ON_COMPILATION = "0"`) overrides it in
this process, as in the reference. Variables without an effect here are listed in
docs/compatibility.md.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class EnvVar:
    """A reference-style setting: the environment variable `key` (else `default`), read on
    every access, overridable by assignment on `env`."""

    def __init__(self, key: str, default=None):
        self.key = key
        self.default = default
        self.forced = None

    def get(self):
        if self.forced is not None:
            return self.forced
        return os.environ.get(self.key, self.default)

    def __get__(self, instance, owner):
        return self.get() if instance is not None else self

    def __set__(self, instance, value):
        self.forced = value


def _find_cuda_home() -> str:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        return home
    nvcc = shutil.which("nvcc")
    if nvcc and "cuda" in nvcc.lower():
        return str(Path(nvcc).parent.parent)
    return "/usr/local/cuda" if os.path.isdir("/usr/local/cuda") else ""


class Environment:
    """Live view of the settings (environment variables are read on every access)."""

    # ---- reference attribute names (strings, as there) ---------------------------------------
    CUDA_HOME = _find_cuda_home()
    ROCM_HOME = ""
    TILELANG_PACKAGE_PATH = Path(__file__).resolve().parent
    TILELANG_TMP_DIR = EnvVar("TILELANG_TMP_DIR",
                              os.path.join(os.path.expanduser("~/.tilelang/cache"), "tmp"))
    TILELANG_PRINT_ON_COMPILATION = EnvVar("TILELANG_PRINT_ON_COMPILATION", "1")
    TILELANG_DISABLE_CACHE = EnvVar("TILELANG_DISABLE_CACHE", "0")
    TILELANG_CLEAR_CACHE = EnvVar("TILELANG_CLEAR_CACHE", "0")
    TILELANG_CLEANUP_TEMP_FILES = EnvVar("TILELANG_CLEANUP_TEMP_FILES", "0")
    TILELANG_AUTO_TUNING_DISABLE_CACHE = EnvVar("TILELANG_AUTO_TUNING_DISABLE_CACHE", "0")
    TILELANG_AUTO_TUNING_CPU_UTILITIES = EnvVar("TILELANG_AUTO_TUNING_CPU_UTILITIES", "0.9")
    TILELANG_AUTO_TUNING_CPU_COUNTS = EnvVar("TILELANG_AUTO_TUNING_CPU_COUNTS", "-1")
    TILELANG_AUTO_TUNING_MAX_CPU_COUNT = EnvVar("TILELANG_AUTO_TUNING_MAX_CPU_COUNT", "-1")
    TILELANG_DEFAULT_EXECUTION_BACKEND = EnvVar("TILELANG_EXECUTION_BACKEND", "auto")
    TILELANG_DEFAULT_VERBOSE = EnvVar("TILELANG_VERBOSE", "0")
    CUTLASS_INCLUDE_DIR = EnvVar("TL_CUTLASS_PATH", None)
    COMPOSABLE_KERNEL_INCLUDE_DIR = EnvVar("TL_COMPOSABLE_KERNEL_PATH", None)
    TILELANG_TEMPLATE_PATH = EnvVar("TL_TEMPLATE_PATH", None)
    TVM_PYTHON_PATH = EnvVar("TVM_IMPORT_PYTHON_PATH", None)
    TVM_LIBRARY_PATH = EnvVar("TVM_LIBRARY_PATH", None)
    SKIP_LOADING_TILELANG_SO = EnvVar("SKIP_LOADING_TILELANG_SO", "0")

    @property
    def TILELANG_DEFAULT_TARGET(self) -> str:  # noqa: N802 - reference attribute name
        return self.default_target

    def get_default_target(self) -> str:
        return self.default_target

    def get_default_execution_backend(self) -> str:
        return self.TILELANG_DEFAULT_EXECUTION_BACKEND

    def get_default_verbose(self) -> bool:
        return self.verbose

    def is_cache_globally_disabled(self) -> bool:
        return _flag("TILELANG_DISABLE_CACHE")

    def is_autotune_cache_disabled(self) -> bool:
        return _flag("TILELANG_AUTO_TUNING_DISABLE_CACHE")

    TILELANG_JIT_DIAGNOSTICS = EnvVar("TILELANG_JIT_DIAGNOSTICS", "0")
    # seconds an nvcc run may take (empty or 0: no limit); NVRTC compiles in this process
    # and is not bounded by it
    TILELANG_COMPILE_TIMEOUT_SECONDS = EnvVar("TILELANG_COMPILE_TIMEOUT_SECONDS", "")

    def get_compile_timeout_seconds(self) -> float | None:
        """TILELANG_COMPILE_TIMEOUT_SECONDS as a number of seconds; None for no limit."""
        text = str(self.TILELANG_COMPILE_TIMEOUT_SECONDS).strip()
        if not text:
            return None
        try:
            seconds = float(text)
        except ValueError:
            seconds = math.nan
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"TILELANG_COMPILE_TIMEOUT_SECONDS must be empty or a finite "
                             f"number of seconds >= 0 (0: no limit), got {text!r}")
        return seconds or None

    def is_jit_diagnostics_enabled(self) -> bool:
        return str(self.TILELANG_JIT_DIAGNOSTICS).strip().lower() in ("1", "true", "yes", "on")

    def is_print_on_compilation_enabled(self) -> bool:
        return str(self.TILELANG_PRINT_ON_COMPILATION).lower() in ("1", "true", "yes", "on")

    def is_light_import(self) -> bool:
        return False

    # ---- this project's settings ---------------------------------------------------------------

    _cache_override = None

    @property
    def cache_dir(self) -> Path:
        # an empty value is unset, not Path("") (the current directory); an assignment to
        # env.TILELANG_CACHE_DIR wins over the environment in this process (as in the reference)
        given = (self._cache_dir_override if self._cache_dir_override is not None
                 else os.environ.get("TILELANG_CACHE_DIR", "")).strip()
        return Path(given).expanduser() if given else Path.home() / ".tilelang" / "cache"

    _cache_dir_override = None

    @property
    def TILELANG_CACHE_DIR(self) -> str:  # noqa: N802 - reference attribute name
        return str(self.cache_dir)

    @TILELANG_CACHE_DIR.setter
    def TILELANG_CACHE_DIR(self, value) -> None:  # noqa: N802 - reference attribute name
        self._cache_dir_override = None if value is None else str(value)

    @property
    def cache_enabled(self) -> bool:
        if self._cache_override is not None:
            return self._cache_override
        return not _flag("TILELANG_DISABLE_CACHE")

    @property
    def default_target(self) -> str:
        return (os.environ.get("TILELANG_DEFAULT_TARGET") or os.environ.get("TILELANG_TARGET")
                or "auto")

    @property
    def experiments(self) -> frozenset:
        """Names listed in TL_EXPERIMENT (comma-separated): temporary switches that select
        the other variant of a code-generation choice, for an A/B timing of both in one GPU
        run (part of the program cache's key); each is removed once measured."""
        raw = os.environ.get("TL_EXPERIMENT", "")
        return frozenset(n.strip() for n in raw.split(",") if n.strip())

    @property
    def dump_ir(self) -> bool:
        return _flag("TILELANG_DUMP_IR")

    @property
    def verbose(self) -> bool:
        return _flag("TILELANG_VERBOSE")

    def disable_cache(self):
        Environment._cache_override = False

    def enable_cache(self):
        Environment._cache_override = True

    def is_cache_enabled(self) -> bool:
        return self.cache_enabled


env = Environment()


def disable_cache():
    env.disable_cache()


def enable_cache():
    env.enable_cache()


def is_cache_enabled() -> bool:
    return env.cache_enabled


# Module-level names of the reference.
CUDA_HOME = env.CUDA_HOME
ROCM_HOME = env.ROCM_HOME
