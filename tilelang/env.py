"""Configuration read from the environment, in one place.

TILELANG_CACHE_DIR        where compiled kernels are cached (default ~/.tilelang/cache)
TILELANG_DISABLE_CACHE    1 disables the disk cache
TILELANG_DEFAULT_TARGET   target used when none is given ("auto", "cpu", "cuda", ...)
TILELANG_DUMP_IR          1 prints the IR after every pass
TILELANG_VERBOSE          1 prints what the compiler does (pipeline steps, fallbacks)
"""

from __future__ import annotations

import os
from pathlib import Path


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class Environment:
    """Live view of the settings (environment variables are read on every access)."""

    _cache_override = None

    @property
    def cache_dir(self) -> Path:
        return Path(os.environ.get("TILELANG_CACHE_DIR",
                                   Path.home() / ".tilelang" / "cache")).expanduser()

    @property
    def TILELANG_CACHE_DIR(self) -> str:  # noqa: N802 - reference attribute name
        return str(self.cache_dir)

    @property
    def cache_enabled(self) -> bool:
        if self._cache_override is not None:
            return self._cache_override
        return not _flag("TILELANG_DISABLE_CACHE")

    @property
    def default_target(self) -> str:
        return os.environ.get("TILELANG_DEFAULT_TARGET", "auto")

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
