"""A fuzz case: one generated tile program, how to feed it, and what it must compute.

A `Case` is pure data plus two callables:
  * `source`: a self-contained Python module text defining `@T.prim_func main` (sizes are
    literals, so the text alone reproduces the program: save it, import it, compile it);
  * `params`: every parameter of `main` in order, with its role: "in" (random input), "inout"
    (random initial value, compared afterwards: atomics accumulate into it) or "out" (filled with
    poison before the run, compared afterwards);
  * `make_inputs(rng)` -> {name: numpy array} for every parameter (outputs get poison);
  * `oracle(arrays)` -> {name: (expected float64/int64 array, tolerance array)} for every "out" and
    "inout" parameter, computed with numpy from the description alone, never by running the
    interpreter or the compiler.

Guarantees: `load(case)` writes the source to a private temporary directory and imports it (so
errors point at a real file and line, and `inspect` can read the kernel); `check(case, got,
expected)` returns a list of human-readable mismatch descriptions (empty when everything agrees).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

# what an output holds before the kernel runs, so elements nobody wrote show up
POISON_FLOAT = np.nan
POISON_INT = -12345

# machine epsilon (unit roundoff, 2^-mantissa) of the dtypes the generator uses
EPS = {"float64": 2.0 ** -52, "float32": 2.0 ** -23, "float16": 2.0 ** -10,
       "bfloat16": 2.0 ** -7, "float8_e4m3": 2.0 ** -3, "float8_e5m2": 2.0 ** -2}
# spacing of the subnormals: below the smallest normal a rounding errs by up to this much in
# absolute terms, not EPS relative (seed 120696: 2 * x^3 in float16 for |x| ~ 0.01)
TINY = {"float64": 2.0 ** -1074, "float32": 2.0 ** -149, "float16": 2.0 ** -24,
        "bfloat16": 2.0 ** -133, "float8_e4m3": 2.0 ** -9, "float8_e5m2": 2.0 ** -16}
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8")


@dataclass
class Param:
    name: str
    shape: tuple
    dtype: str
    role: str = "in"  # "in" | "inout" | "out"


@dataclass
class Case:
    family: str
    seed: int
    source: str
    params: list
    make_inputs: Callable = field(repr=False)
    oracle: Callable = field(repr=False)
    spec: dict = field(default_factory=dict)
    # features the program uses (for coverage summaries): {"gemm", "atomic", "pipelined", ...}
    features: tuple = ()

    @property
    def name(self) -> str:
        return f"{self.family}_{self.seed}"

    def describe(self) -> str:
        sig = ", ".join(f"{p.name}{list(p.shape)}:{p.dtype}:{p.role}" for p in self.params)
        return f"{self.name} ({sig}) spec={self.spec}"


# ---- numpy <-> torch ---------------------------------------------------------------------------

def torch_dtype(name: str):
    import torch

    special = {"float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}
    return special[name] if name in special else getattr(torch, name)


def to_torch(arr: np.ndarray, dtype: str, device="cpu"):
    """A torch tensor of `dtype` holding `arr` (values must already be representable)."""
    import torch

    t = torch.from_numpy(np.ascontiguousarray(arr))
    return t.to(device=device, dtype=torch_dtype(dtype)).contiguous()


def to_numpy(t) -> np.ndarray:
    """float64 (floats) or int64 (ints) copy of a tensor."""
    import torch

    t = t.detach().cpu()
    if t.dtype.is_floating_point:
        return t.to(torch.float64).numpy()
    return t.to(torch.int64).numpy()


def round_to(x, dtype: str) -> np.ndarray:
    """float64 values rounded to `dtype` (round to nearest even, via torch's casts) and back."""
    import torch

    if dtype == "float64":
        return np.asarray(x, dtype=np.float64)
    t = torch.from_numpy(np.array(x, dtype=np.float64))
    if dtype in ("float8_e4m3", "float8_e5m2"):
        return t.to(torch.float32).to(torch_dtype(dtype)).to(torch.float64).numpy()
    return t.to(torch_dtype(dtype)).to(torch.float64).numpy()


def poison(shape, dtype: str) -> np.ndarray:
    if dtype in INT_DTYPES:
        return np.full(shape, POISON_INT if dtype != "uint8" else 77, np.int64)
    return np.full(shape, POISON_FLOAT, np.float64)


def random_values(rng, shape, dtype: str, lo=-2.0, hi=2.0) -> np.ndarray:
    """Values exactly representable in `dtype`, as float64 / int64."""
    if dtype in INT_DTYPES:
        return rng.integers(int(lo), int(hi) + 1, size=shape).astype(np.int64)
    if dtype in ("float8_e4m3", "float8_e5m2"):
        return rng.integers(-8, 9, size=shape).astype(np.float64) / 4.0  # exact in both fp8
    return round_to(rng.uniform(lo, hi, size=shape), dtype)


# ---- loading ---------------------------------------------------------------------------------

_DIR = None


def source_dir() -> str:
    global _DIR
    if _DIR is None:
        _DIR = tempfile.mkdtemp(prefix="tilelang-fuzz-")
    return _DIR


def write_source(case: Case, directory: str | None = None) -> str:
    path = os.path.join(directory or source_dir(), f"fuzz_{case.name}.py")
    with open(path, "w") as f:
        f.write(case.source)
    return path


def load(case: Case):
    """The `main` prim_func of the case (its source written to a file and imported)."""
    path = write_source(case)
    modname = f"_tilelang_fuzz_{case.name}_{abs(hash(case.source)) % 10 ** 8}"
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.modules.pop(modname, None)
    return mod.main


# ---- comparing -------------------------------------------------------------------------------

def check(case: Case, got: dict, expected: dict, label="") -> list:
    """Mismatch descriptions of `got` ({name: array}) against `expected`
    ({name: (value, tolerance)}); NaN matches NaN, inf matches inf of the same sign."""
    problems = []
    for name, (want, tol) in expected.items():
        have = np.asarray(got[name])
        if have.shape != want.shape:
            problems.append(f"{label}{name}: shape {have.shape} != expected {want.shape}")
            continue
        bad = ~_close(have, want, tol)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            problems.append(
                f"{label}{name}: {int(bad.sum())}/{bad.size} elements differ; first at {idx}: "
                f"got {have[idx]!r}, expected {want[idx]!r} (tolerance "
                f"{np.broadcast_to(tol, want.shape)[idx]:.3g})")
    return problems


def _close(have, want, tol):
    have = have.astype(np.float64)
    want = want.astype(np.float64)
    tol = np.broadcast_to(np.asarray(tol, np.float64), want.shape)
    both_nan = np.isnan(have) & np.isnan(want)
    with np.errstate(invalid="ignore"):
        same_inf = np.isinf(want) & (have == want)
        diff = np.abs(have - want)
        ok = diff <= tol
    return both_nan | same_inf | (ok & ~np.isnan(diff))


def agree(a: dict, b: dict, expected: dict, label="") -> list:
    """Mismatches between two runs (GPU against interpreter) of the same inputs, within the
    oracle's rounding bounds (`expected` as returned by `case.oracle`)."""
    return check(None, a, {k: (np.asarray(b[k]), tol) for k, (_, tol) in expected.items()},
                 label)


def pick(rng, seq):
    """One element of `seq`, drawn uniformly (the families' choices)."""
    return seq[int(rng.integers(len(seq)))]


def kernel_source(params, lines, indent="    ") -> str:
    """The program text: `@T.prim_func def main(<params as T.Tensor>)` with the body `lines`
    (each indented once more)."""
    sig = ", ".join(f'{p.name}: T.Tensor({p.shape}, "{p.dtype}")' for p in params)
    src = ["import tilelang.language as T", "", "", "@T.prim_func", f"def main({sig}):"]
    return "\n".join(src + [indent + ln for ln in lines]) + "\n"


def pipelined_gemm_head(s: dict, M, N, K) -> list:
    """The first lines of a tiled GEMM-shaped kernel (the gather and conv2d families): the
    launch over (N / bn, M / bm), the A_s / W_s tiles and the cleared accumulator, and the
    `for ko in T.Pipelined(...)` header; the caller appends the loop body."""
    bm, bn, bk, dt, i1 = s["bm"], s["bn"], s["bk"], s["dt"], "    "
    return [f"with T.Kernel(T.ceildiv({N}, {bn}), T.ceildiv({M}, {bm}), "
            f"threads={s['threads']}) as (bx, by):",
            i1 + f'A_s = T.alloc_shared(({bm}, {bk}), "{dt}")',
            i1 + f'W_s = T.alloc_shared(({bk}, {bn}), "{dt}")',
            i1 + f'acc = T.alloc_fragment(({bm}, {bn}), "float32")',
            i1 + "T.clear(acc)",
            i1 + f"for ko in T.Pipelined(T.ceildiv({K}, {bk}), num_stages={s['stages']}):"]


def default_inputs(params):
    """`make_inputs` drawing every input with `random_values`' default range."""
    return lambda rng: {p.name: random_values(rng, p.shape, p.dtype) for p in params
                        if p.role == "in"}
