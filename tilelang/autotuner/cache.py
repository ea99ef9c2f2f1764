"""The autotuner's disk cache: one JSON file per tuning problem under
`tilelang.env.env.cache_dir / "autotune"`, written atomically (temporary file + rename).

The key is a SHA-256 of: the kernel factory's source (plus the simple values it reads from its
closure and module globals), the call's arguments (tensors by dtype and shape), the device name
and compute capability (or "cpu"), the compile options that change code (target, out_idx,
pass_configs, flags) and the package version. The configuration list is deliberately *not* part
of the key: editing the list of candidates reuses the stored winner.

Configurations are stored as JSON with tuples tagged; values JSON cannot hold are stored by
`repr` and are matched against the current configuration list when loaded.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Optional

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


class Undecodable(ValueError):
    pass


def decode_config(value):
    if isinstance(value, list):
        return [decode_config(v) for v in value]
    if isinstance(value, dict):
        if "__tuple__" in value:
            return tuple(decode_config(v) for v in value["__tuple__"])
        if "__dict__" in value:
            return {k: decode_config(v) for k, v in value["__dict__"].items()}
        raise Undecodable(value.get("__repr__", repr(value)))
    return value


def encode_config_dict(config: dict) -> dict:
    return {str(k): encode_config(v) for k, v in config.items()}


def find_config(stored: dict, candidates) -> Optional[dict]:
    """The configuration `stored` (encoded) denotes: the equal one among `candidates` when there
    is one (keeps non-JSON values intact), else the decoded dict (None if undecodable)."""
    for cfg in candidates or ():
        if encode_config_dict(cfg) == stored:
            return cfg
    try:
        return {k: decode_config(v) for k, v in stored.items()}
    except Undecodable:
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
def cache_dir() -> Path:
    from ..env import env

    return Path(env.cache_dir) / "autotune"


def cache_enabled() -> bool:
    from ..env import env

    disabled = os.environ.get("TILELANG_AUTO_TUNING_DISABLE_CACHE", "0").strip().lower()
    return env.is_cache_enabled() and disabled not in ("1", "true", "yes", "on")


def path_for(key: str) -> Path:
    return cache_dir() / f"{key}.json"


def load(key: str) -> Optional[dict]:
    """The stored entry for `key`, or None (missing, unreadable or of another format)."""
    path = path_for(key)
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key:
        return None
    return data


def store(key: str, data: dict) -> Path:
    """Write the entry atomically: readers see the old file or the new one, never a part."""
    path = path_for(key)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    data = dict(data, format=FORMAT, key=key, created=time.time())
    fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True, default=repr)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def clear() -> int:
    """Delete every stored tuning result; returns how many files were removed."""
    n = 0
    d = cache_dir()
    if d.is_dir():
        for p in d.glob("*.json"):
            try:
                p.unlink()
                n += 1
            except OSError:
                pass
    return n
