"""Helpers of the example tests: the list of example scripts, loading one by path (as a module,
once per session), and the CUDA programs an example compiles for an architecture."""

from __future__ import annotations

import functools
import importlib.util
import inspect
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*/example_*.py"))


def example_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


@functools.lru_cache(maxsize=None)
def load_example(path: Path):
    """Import an example script as a module (once per test session)."""
    spec = importlib.util.spec_from_file_location(f"examples_{path.parent.name}_{path.stem}",
                                                  path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def example_programs(module, size: str, arch: str):
    """The (name, prim_func) pairs an example compiles, for `arch` when it cares."""
    if "arch" in inspect.signature(module.programs).parameters:
        return module.programs(size, arch=arch)
    return module.programs(size)
