"""Dump the CUDA source generated for every example program and every kernel the GPU tests
build, for sm_90a, without a GPU and without compiling it; compare two dumps.

    python scripts/dump_cuda.py dump OUT_DIR [--arch sm_90a] [--only SUBSTR,...] [--skip-fuzz]
                                             [--random-fuzz N]
    python scripts/dump_cuda.py diff BEFORE_DIR AFTER_DIR

What is dumped:
  * `examples/<dir>/<example>/<size>/<program>.cu`: every `programs(size, arch)` of every
    example at every size of its `SIZES` (default pass configs, lowered with `tilelang.lower`);
  * `pytest/<test id>/<n>_<function>.cu`: every kernel lowered while the GPU tests
    (tests/gpu, tests/examples/test_examples_gpu.py) run under the dry-run harness
    (scripts/compat/dryrun_plugin.py: CUDA tensors are `meta` tensors), with the pass configs
    and flags each test uses. NVRTC is not called: only lowering runs, so a full dump takes
    minutes, not the hour a compile of everything would;
  * `fuzz/<family>-<seed>/<arch>[-configs].cu`: every checked-in fuzz seed
    (tilelang/testing/fuzz) for sm_80 and sm_90a: the seeds tests/reliability/test_fuzz_cuda.py
    compiles and runs on the GPU (family drawn from the seed, plus its gather seeds), the first
    `FUZZ_PER_FAMILY` seeds of every family, the fragments sample of
    tests/testing/test_fuzz_fragments.py, and the varied-config cases of
    tests/testing/test_fuzz_configs.py compiled with their drawn pass configs (a rejection is
    dumped as its error message); with `--random-fuzz N`, N more seeds from 900,000 (family
    and pass configs drawn from the seed).

A change to the compiler that is meant to leave the generated code alone (compile-time work,
refactoring) must leave `diff` empty. Tests that fail in the dry run (a value read from a meta
tensor) still dump what they lowered before failing, the same before and after.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GPU_TESTS = ["tests/gpu", "tests/examples/test_examples_gpu.py"]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", name).strip("_")[:150] or "_"


# ---- examples --------------------------------------------------------------------------------

def dump_examples(out: Path, arch: str, only) -> int:
    sys.path.insert(0, str(ROOT / "tests" / "examples"))
    import tilelang
    from example_helpers import EXAMPLES, example_id, example_programs, load_example

    count = 0
    for path in EXAMPLES:
        eid = example_id(path)
        if only and not any(o in eid for o in only):
            continue
        module = load_example(path)
        for size in getattr(module, "SIZES", {"bench": None}):
            try:
                progs = example_programs(module, size, arch)
            except Exception as e:  # noqa: BLE001 - recorded, the same before and after
                progs = [("ERROR", f"{type(e).__name__}: {e}")]
            for name, func in progs:
                d = out / "examples" / eid / size
                d.mkdir(parents=True, exist_ok=True)
                if isinstance(func, str):
                    text = func
                else:
                    try:
                        text = tilelang.lower(func, target=f"cuda -arch={arch}")
                    except Exception as e:  # noqa: BLE001
                        text = f"// lowering failed: {type(e).__name__}: {e}\n"
                (d / f"{_safe(name)}.cu").write_text(text)
                count += 1
    return count


# ---- GPU tests under the dry run (this file is also the pytest plugin) ------------------------

def _install_recorder():
    """Record every lowered module under DUMP_CUDA_DIR/pytest/<test id>/ and skip NVRTC."""
    import tilelang.engine.build as build
    import tilelang.runtime as runtime
    from tilelang.runtime.compiler import CompileResult

    out = Path(os.environ["DUMP_CUDA_DIR"]) / "pytest"
    state = {"test": "collect", "n": 0}
    lower = build.lower_cuda

    def recording_lower(func, target, options):
        module = lower(func, target, options)
        d = out / _safe(state["test"])
        d.mkdir(parents=True, exist_ok=True)
        state["n"] += 1
        (d / f"{state['n']:03d}_{_safe(func.name)}.cu").write_text(module.source)
        return module

    def no_compile(source, arch, options=(), name="kernel", **kw):
        return CompileResult(b"", "", "none", False, 0.0, arch, tuple(options))

    build.lower_cuda = recording_lower
    runtime.compile_cuda = no_compile
    return state


_STATE = None


def pytest_configure(config):
    global _STATE
    if os.environ.get("DUMP_CUDA_DIR"):
        _STATE = _install_recorder()


def pytest_runtest_setup(item):
    if _STATE is not None:
        _STATE["test"], _STATE["n"] = item.nodeid, 0


def dump_tests(out: Path, arch: str, only) -> int:
    env = dict(os.environ, DUMP_CUDA_DIR=str(out), DRYRUN_ARCH=arch, DRYRUN_DEVICE="meta",
               TILELANG_DISABLE_CACHE="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "scripts" / "compat"),
                                           str(ROOT / "scripts"), str(ROOT),
                                           os.environ.get("PYTHONPATH", "")]))
    targets = [t for t in GPU_TESTS if not only or any(o in t for o in only)] or GPU_TESTS
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "dryrun_plugin", "-p", "dump_cuda",
           "-p", "no:cacheprovider", "--tb=no", "-o", "addopts=", *targets]
    if only:
        cmd += ["-k", " or ".join(only)]
    p = subprocess.run(cmd, cwd=str(ROOT), env=env, capture_output=True, text=True)
    tail = (p.stdout.strip().splitlines() or ["(no output)"])[-1]
    print(f"pytest (dry run): {tail}")
    return sum(1 for _ in (out / "pytest").rglob("*.cu")) if (out / "pytest").exists() else 0


# ---- checked-in fuzz seeds ------------------------------------------------------------------

FUZZ_PER_FAMILY = 16
FUZZ_ARCHS = ("sm_80", "sm_90a")
RANDOM_FUZZ_START = 900_000  # `--random-fuzz N`: seeds no test uses
FUZZ_DIR = re.compile(r"\S*/(fuzz_\w+\.py)")


def _test_module(relpath: str):
    """A test module imported by path (its seed lists are the checked-in seeds)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_dump_{_safe(relpath)}", ROOT / relpath)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fuzz_cases(random: int = 0) -> list:
    """(family or None, seed, pass configs) of every checked-in fuzz seed, without repeats,
    and `random` more seeds from RANDOM_FUZZ_START, each with its own drawn pass configs."""
    from tilelang.testing import fuzz

    cuda = _test_module("tests/reliability/test_fuzz_cuda.py")
    frags = _test_module("tests/testing/test_fuzz_fragments.py")
    configs = _test_module("tests/testing/test_fuzz_configs.py")
    cases = [(None, s, None) for s in sorted(set(cuda.COMPILE_SEEDS) | set(cuda.GPU_SEEDS)
                                             | set(cuda.GPU_FINDINGS))]
    cases += [("gather", s, None) for s in range(0, 4)]
    cases += [(f, s, None) for f in fuzz.FAMILIES for s in range(FUZZ_PER_FAMILY)]
    cases += [("fragments", s, None) for s in frags.SAMPLE]
    cases += [(f, s, fuzz.pass_configs_for(s)) for f, s in configs.VARIED_CASES]
    cases += [(None, s, fuzz.pass_configs_for(s))
              for s in range(RANDOM_FUZZ_START, RANDOM_FUZZ_START + random)]
    seen, out = set(), []
    for c in cases:
        key = (c[0], c[1], repr(sorted((c[2] or {}).items())))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def dump_fuzz(out: Path, only, random: int = 0) -> int:
    import tilelang
    from tilelang.testing import fuzz

    count = 0
    for family, seed, configs in fuzz_cases(random):
        cid = f"{family or 'drawn'}-{seed}"
        if only and not any(o in f"fuzz/{cid}" for o in only):
            continue
        case = fuzz.generate(seed, family)
        d = out / "fuzz" / cid
        d.mkdir(parents=True, exist_ok=True)
        for arch in FUZZ_ARCHS:
            name = arch + ("-" + _safe(fuzz.describe_configs(configs)) if configs else "")
            try:
                text = tilelang.lower(fuzz.load(case), target=f"cuda -arch={arch}",
                                      pass_configs=configs)
            except Exception as e:  # noqa: BLE001 - recorded, the same before and after
                # the program's file is in a temporary directory of its own per process
                text = FUZZ_DIR.sub(r"<fuzz dir>/\1", f"// lowering failed: {type(e).__name__}: "
                                    f"{e}\n")
            (d / f"{name}.cu").write_text(text)
            count += 1
    return count


# ---- diff ------------------------------------------------------------------------------------

def diff(before: Path, after: Path) -> int:
    a = {p.relative_to(before) for p in before.rglob("*.cu")}
    b = {p.relative_to(after) for p in after.rglob("*.cu")}
    bad = 0
    for rel in sorted(a - b):
        print(f"only in {before}: {rel}")
        bad += 1
    for rel in sorted(b - a):
        print(f"only in {after}: {rel}")
        bad += 1
    for rel in sorted(a & b):
        x, y = (before / rel).read_text(), (after / rel).read_text()
        if x != y:
            bad += 1
            print(f"--- differs: {rel}")
            for line in list(difflib.unified_diff(x.splitlines(), y.splitlines(), lineterm="",
                                                  n=1))[:40]:
                print(line)
    print(f"{len(a & b)} files compared, {bad} differ or are missing")
    return 1 if bad else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out")
    d.add_argument("--arch", default="sm_90a")
    d.add_argument("--only", default="", help="comma-separated substrings of example/test ids")
    d.add_argument("--skip-tests", action="store_true")
    d.add_argument("--skip-fuzz", action="store_true")
    d.add_argument("--random-fuzz", type=int, default=0, metavar="N",
                   help="also N generated programs no test uses (about 25 ms a program and "
                        "architecture on the development VM): a wider net for a change "
                        "meant to keep the code")
    c = sub.add_parser("diff")
    c.add_argument("before")
    c.add_argument("after")
    args = ap.parse_args(argv)
    if args.cmd == "diff":
        return diff(Path(args.before), Path(args.after))
    out = Path(args.out)
    only = [s for s in args.only.split(",") if s]
    n = dump_examples(out, args.arch, only)
    print(f"examples: {n} programs")
    if not args.skip_fuzz:
        print(f"fuzz: {dump_fuzz(out, only, args.random_fuzz)} programs")
    if not args.skip_tests:
        print(f"tests: {dump_tests(out, args.arch, only)} modules")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
