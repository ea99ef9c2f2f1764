"""The autotuner's disk cache: one JSON file per tuning problem under
`tilelang.env.env.cache_dir / "autotune"`, written atomically (temporary file + rename).

The key is a SHA-256 of: the kernel factory's source (plus the simple values it reads from its
closure and module globals), the call's arguments (tensors by dtype and shape), the device name
and compute capability (or "cpu"), the compile options that change code (target, out_idx,
pass_configs, flags) and the package version. The configuration list is deliberately *not* part
of the key: editing the list of candidates reuses the stored winner.

Configurations are stored as JSON with tuples tagged; values JSON cannot hold are stored by
`repr`. A stored configuration is matched against the current configuration list when loaded,
and only a configuration of that list is ever used.

The directory follows the kernel cache's rules (`tilelang.cache.files`: this user's, 0700,
entries read only from regular files of bounded size); an entry that is not what `store` writes
(wrong types, JSON nested without end, another key) is a miss with a warning.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import os
import textwrap
import time
import warnings
from pathlib import Path
from typing import Optional

from ..cache import files

FORMAT = 1
_SIMPLE = (int, float, str, bool, type(None))


# ---- normalising values for keys and storage ---------------------------------------------------
def normalize_value(value):
    """A JSON-friendly, order-stable description of a call argument: tensors by dtype/shape,
    dtypes by name, containers recursively."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        torch = None
    if torch is not None and isinstance(value, torch.Tensor):
        return ["tensor", str(value.dtype), list(value.shape)]
    if isinstance(value, bool) or isinstance(value, _SIMPLE):
        return value
    if isinstance(value, (list, tuple)):
        return [type(value).__name__] + [normalize_value(v) for v in value]
    if isinstance(value, dict):
        return {"__dict__": sorted((str(k), normalize_value(v)) for k, v in value.items())}
    if torch is not None and isinstance(value, torch.dtype):
        return str(value)
    name = getattr(value, "name", None)
    if type(value).__name__ == "DType" and isinstance(name, str):
        return name
    return repr(value)


def encode_config(value):
    """Config value -> JSON (tuples tagged, unknown objects by repr)."""
    if isinstance(value, bool) or isinstance(value, _SIMPLE):
        if isinstance(value, float) and value != value:
            return {"__repr__": "nan"}
        return value
    if isinstance(value, tuple):
        return {"__tuple__": [encode_config(v) for v in value]}
    if isinstance(value, list):
        return [encode_config(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"__dict__": {k: encode_config(v) for k, v in value.items()}}
    return {"__repr__": repr(value)}


def encode_config_dict(config: dict) -> dict:
    return {str(k): encode_config(v) for k, v in config.items()}


def find_config(stored, candidates) -> Optional[dict]:
    """The configuration among `candidates` that `stored` (encoded) denotes, or None: a stored
    configuration is only ever a pointer into the current list, never run on its own (a
    planted or stale entry cannot make us compile a configuration nobody asked for)."""
    for cfg in candidates or ():
        if encode_config_dict(cfg) == stored:
            return cfg
    return None


# ---- the key ------------------------------------------------------------------------------------
def _code_names(code, seen=None) -> set:
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _code_names(const)
    return names


def function_fingerprint(fn) -> dict:
    """What identifies a kernel factory: its source and the simple values it reads from its
    closure and globals (so `BLOCK = 64` at module level is part of the key)."""
    fn = inspect.unwrap(getattr(fn, "func", fn))
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        source = repr(getattr(fn, "__qualname__", fn)) + (
            hashlib.sha256(code.co_code).hexdigest() if code is not None else "")
    closure = {}
    code = getattr(fn, "__code__", None)
    for name, cell in zip(getattr(code, "co_freevars", ()), getattr(fn, "__closure__", None) or ()):
        try:
            closure[name] = normalize_value(cell.cell_contents)
        except ValueError:  # empty cell
            closure[name] = None
    globals_used = {}
    fn_globals = getattr(fn, "__globals__", {})
    for name in sorted(_code_names(code) if code is not None else ()):
        value = fn_globals.get(name)
        if isinstance(value, _SIMPLE) and value is not None:
            globals_used[name] = value
    return {"name": getattr(fn, "__qualname__", repr(fn)), "source": source,
            "closure": closure, "globals": globals_used}


def device_description(kind: str) -> str:
    """"cpu" or the GPU's name and compute capability."""
    if kind == "cpu":
        return "cpu"
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"{torch.cuda.get_device_name()} sm_{major}{minor}"
    except Exception:
        pass
    return kind


def make_key(fn, call_args: tuple, call_kwargs: dict, compile_key: dict, device: str,
             extra: Optional[dict] = None) -> str:
    from .. import __version__

    data = {
        "format": FORMAT,
        "version": __version__,
        "function": function_fingerprint(fn),
        "args": normalize_value(tuple(call_args)),
        "kwargs": normalize_value(dict(call_kwargs)),
        "compile": compile_key,
        "device": device,
        "extra": extra or {},
    }
    text = json.dumps(data, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


# ---- the files ----------------------------------------------------------------------------------
MAX_ENTRY_BYTES = 64 << 20  # a record per configuration: far below this for any real list
MAX_ENTRIES = 10_000
_NUMBER = (int, float)


def cache_dir() -> Path:
    from ..env import env

    return Path(env.cache_dir) / "autotune"


def _private_cache_dir() -> Path:
    """cache_dir(), created or checked under the kernel cache's rules (tilelang.cache.files):
    its root and itself 0700, this user's, no one else's to write."""
    d = cache_dir()
    files.private_dir(d.parent)
    return files.private_dir(d)


def cache_enabled() -> bool:
    from ..env import env

    disabled = os.environ.get("TILELANG_AUTO_TUNING_DISABLE_CACHE", "0").strip().lower()
    return env.is_cache_enabled() and disabled not in ("1", "true", "yes", "on")


def path_for(key: str) -> Path:
    return cache_dir() / f"{key}.json"


def _is_number(x, optional=False, finite=True) -> bool:
    if x is None:
        return optional
    return isinstance(x, _NUMBER) and not isinstance(x, bool) and (
        not finite or math.isfinite(x))


def _problem(data, key: str) -> Optional[str]:
    """What is wrong with a decoded entry (None: nothing)."""
    if not isinstance(data, dict):
        return "not a JSON object"
    if data.get("format") != FORMAT:
        return f"format {data.get('format')!r}, not {FORMAT} (another version wrote it)"
    if data.get("key") != key:
        return "written for another key"
    best = data.get("best")
    if not isinstance(best, dict) or not isinstance(best.get("config"), dict):
        return "'best' is not an object with a 'config' object"
    if not _is_number(best.get("latency")) or not _is_number(best.get("ref_latency"),
                                                              optional=True):
        return "'best' has a latency that is not a finite number"
    records = data.get("records", [])
    if not isinstance(records, list):
        return "'records' is not a list"
    for r in records:
        if not (isinstance(r, dict) and isinstance(r.get("config"), dict)
                and isinstance(r.get("status", ""), str)
                and isinstance(r.get("reason", ""), str)
                and _is_number(r.get("latency"), optional=True, finite=False)):
            return "a record is not an object with a config, a status and a latency"
    return None


def load(key: str) -> Optional[dict]:
    """The stored entry for `key`, or None: missing, or damaged (with a warning)."""
    path = path_for(key)
    try:
        _private_cache_dir()
        raw = files.read_entry(path, MAX_ENTRY_BYTES)
        if raw is None:
            return None
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
            raise files.DamagedEntry(f"{path} is not JSON") from None
        problem = _problem(data, key)
        if problem:
            raise files.DamagedEntry(f"{path}: {problem}")
    except files.DamagedEntry as e:
        warnings.warn(f"tilelang: ignoring a damaged autotuning cache entry ({e}); tuning again",
                      RuntimeWarning, stacklevel=2)
        return None
    except OSError as e:  # UnsafePath included: the directory is not ours to trust
        _warn_unusable(e)
        return None
    files.touch(path)
    return data


_warned: set = set()


def _warn_unusable(e: OSError):
    if str(e) not in _warned:
        _warned.add(str(e))
        warnings.warn(f"tilelang: the autotuning cache is not used: {e}", RuntimeWarning,
                      stacklevel=3)


def store(key: str, data: dict) -> Path:
    """Write the entry atomically: readers see the old file or the new one, never a part. An
    OSError (UnsafePath included) says why nothing was written."""
    d = _private_cache_dir()
    data = dict(data, format=FORMAT, key=key, created=time.time())
    text = json.dumps(data, indent=1, sort_keys=True, default=repr)
    path = files.write_atomic(d, f"{key}.json", text.encode())
    files.evict(d, ".json", MAX_ENTRIES, MAX_ENTRIES * (1 << 20))
    return path


def clear() -> int:
    """Delete every stored tuning result; returns how many files were removed."""
    if not cache_dir().exists():
        return 0
    try:
        d = _private_cache_dir()  # never another user's directory (nor through a link)
    except OSError:
        return 0
    return files.remove_entries(d, ".json")
