"""Compile time of the examples' kernels and of programs written the reference's way: cold
(a new kernel in a new process), again (the same process compiling it once more) and warm
(a new process that finds it in the disk cache); no GPU needed (issue 5, issue 23).

    python benchmarks/compile_time.py [--runs 5] [--only aw_flash,gemm_sm90] [--modes cold,warm]
                                      [--sass] [--bytecode warm|none] [--pch on|off]
                                      [--gc collect|leave] [--driver-cache off|on]
                                      [--clock wall|cpu] [--json out.json]

Every number comes from fresh Python processes ("children", `--runs` of them per kernel and
mode); medians are printed, in ms:

  import   `import tilelang` in the child.
  drv      the child initialising the CUDA driver (cuInit), before timing, where there is one:
           on a machine with a GPU, NVRTC 13 goes through the driver and its first compile
           in a process would otherwise pay the driver's start-up (about 0.2 s on the H200
           machine), which a program running kernels pays anyway.
  gc       the garbage collection the child owes once it has imported the program's module
           (which imports torch): the first full collection after a big import walks the
           whole heap (torch's: about 80 ms on a 2-core VM). It lands in whatever code
           allocates next, the compiler's or the user's, so by default (`--gc collect`) the
           child runs it before timing and reports its length here; `--gc leave` leaves it to
           fall where it falls (in the first trace or lowering, usually).
  cold     the child's first kernel with the disk caches off (tilelang's, and the CUDA
           driver's: where a driver is installed NVRTC 13 keeps device code in the driver's
           cache, ~/.nv/ComputeCache, and a later process compiling the same kernel skips
           NVVM and ptxas; `--driver-cache on` leaves it on): `trace` (running the kernel
           builder: a `@tilelang.jit` factory's `get_tir`, a `@T.prim_func`, a lazy kernel's
           `get_tir`) plus `tilelang.compile(func, target=...)`, split into lowering (the
           Python passes and code generation), NVRTC (includes loading NVRTC: the first use
           in a process) and the rest (the kernel wrapper).
  again    the same child compiling the same program `--runs` more times (cache still off):
           from the third compile on, NVRTC reads the headers from the precompiled header
           the second made (runtime/pch.py: a process's later kernels of one header set;
           `--pch off` turns it off).
  phases   NVRTC's own `--time` report for the generated source, `--runs` compiles with its
           precompiled header (unless `--pch off`): front end (C++ parsing: the kernel, and
           tilelang's and CUDA's headers without PCH), NVVM (LLVM optimisation, PTX), ptxas
           (PTX -> SASS).
  warm     a child whose cache directory an earlier child filled: trace + compile of the same
           kernel, a program-cache hit (engine/program_cache.py: no lowering, no NVRTC; the
           cubin is read from disk; a `*` after the number marks a child that lowered the
           program again and only found the cubin on disk, as trees before the program cache
           did). This first kernel of the process also pays
           for importing the runtime and the simplifier (once per process); `next` is the
           same child loading it once more (trace, key, disk read: what each further kernel
           of a process costs).

`--sass` prints each kernel's SASS instruction mix (cuobjdump from PATH, CUDA_HOME/bin or
TILELANG_CUOBJDUMP), registers and local-memory bytes: a compile-time change must leave them
alone. `--bytecode warm` (default) gives the children a private pycache filled by one
discarded child first, like an installed package; `--bytecode none` makes every child compile
tilelang's modules from source (a checkout with PYTHONDONTWRITEBYTECODE=1).

Kernels: `vector_add`, `gemm_sm90`, `flash_sm90` and `gemm_sm80` are the examples' own
programs (with their factories' pass configs); `aw_*` are benchmarks/as_written.py's programs
written the way the reference's users write them (seed-style GEMM, linear layer with bias, a
GEMM with symbolic M/N/K, FlashAttention forward as the reference's examples write it, causal,
one stage with 128 threads); `lazy_gemm` is a GEMM in the lazy-JIT style (`T.const` sizes,
`T.empty` output) specialised with `get_tir(M=..., N=..., K=...)`.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SM90, SM80 = "cuda -arch=sm_90a", "cuda -arch=sm_80"

KERNELS = {
    # name: (description, target)
    "vector_add": ("vector add 2^20 fp32, block 1024", SM90),
    "gemm_sm90": ("example GEMM 4096^3 fp16, 128/256/64 s3 t256 (wgmma + TMA)", SM90),
    "flash_sm90": ("example FlashAttention fwd B8 H32 S4096 D128, 128/128 s2 t256", SM90),
    "gemm_sm80": ("example GEMM 4096^3 fp16, 128/128/32 s3 t128 (mma.sync, cp.async)", SM80),
    "aw_gemm": ("as written: GEMM 4096^3 128x128x32 s3 t128", SM90),
    "aw_linear": ("as written: linear+bias 1024^3 64x64x32 s2 t128", SM90),
    "aw_dynamic": ("as written: GEMM symbolic M/N/K 128x128x32 s3 t128", SM90),
    "aw_flash": ("as written: FlashAttention fwd 128x128 s2 t256", SM90),
    "aw_flash_causal": ("as written: FlashAttention fwd causal 128x128 s2 t256", SM90),
    "aw_flash_s1": ("as written: FlashAttention fwd 128x128 s1 t128", SM90),
    "lazy_gemm": ("lazy JIT: GEMM 4096^3 128x128x32 s3 t128", SM90),
}


def kernel_module(name):
    """Import the module that defines kernel `name` (not timed: it is the user's program)."""
    if name == "vector_add":
        from tests.gpu import kernels

        return kernels
    if name.startswith("gemm_") or name == "flash_sm90":
        folder, module = ("gemm", "example_gemm") if name.startswith("gemm_") else \
            ("flash_attention", "example_mha_fwd")
        sys.path.insert(0, str(ROOT / "examples" / folder))
        return __import__(module)
    if name == "lazy_gemm":
        return sys.modules[__name__]
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import as_written

    return as_written


def program(name):
    """(PrimFunc, compile options) of one benchmark kernel, traced now."""
    m = kernel_module(name)
    if name == "vector_add":
        return m.vector_add(1 << 20, block=1024), {}
    if name.startswith("gemm_"):
        cfg = dict(block_M=128, block_N=256, block_K=64, num_stages=3, threads=256) \
            if name == "gemm_sm90" else \
            dict(block_M=128, block_N=128, block_K=32, num_stages=3, threads=128)
        return _factory(m.matmul, 4096, 4096, 4096, **cfg)
    if name == "flash_sm90":
        return _factory(m.flash_attention_fwd, 8, 32, 4096, 128, False, block_M=128,
                        block_N=128, num_stages=2, threads=256)
    if name == "lazy_gemm":
        gemm = _lazy_gemm()
        return gemm.get_tir(M=4096, N=4096, K=4096, block_M=128, block_N=128, block_K=32), \
            _options(gemm.options)
    builders = {
        "aw_gemm": lambda: m.gemm(4096, 4096, 4096, 128, 128, 32, 3, 128),
        "aw_linear": lambda: m.linear_bias(1024, 1024, 1024, 64, 64, 32, 2, 128),
        "aw_dynamic": lambda: m.gemm_dynamic(128, 128, 32, 3, 128),
        "aw_flash": lambda: m.flash_fwd(8, 32, 4096, 128, False, 128, 128, 2, 256),
        "aw_flash_causal": lambda: m.flash_fwd(8, 32, 4096, 128, True, 128, 128, 2, 256),
        "aw_flash_s1": lambda: m.flash_fwd(8, 32, 4096, 128, False, 128, 128, 1, 128),
    }
    return builders[name](), {}


def _factory(factory, *args, **kwargs):
    return factory.get_tir(*args, **kwargs), _options(factory.options)


def _options(options):
    """A factory's compile options, less the target (the benchmark names it)."""
    return {k: v for k, v in options.items() if k in ("pass_configs", "compile_flags", "out_idx")
            and v is not None}


def _lazy_gemm():
    import tilelang
    import tilelang.language as T

    @tilelang.lazy_jit
    def gemm(A, B, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
        M, N, K = T.const("M, N, K")
        A: T.Tensor((M, K), dtype)
        B: T.Tensor((K, N), dtype)
        C = T.empty((M, N), dtype)
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])
        return C

    return gemm


# ---- children: one fresh process each --------------------------------------------------------

def child(name: str, mode: str, again: int, collect: bool = True) -> dict:
    if mode == "imports":  # fill the private pycache: the modules every kernel needs
        import tilelang.codegen.module  # noqa: F401
        import tilelang.engine.pipeline  # noqa: F401
        import tilelang.engine.program_cache  # noqa: F401
        import tilelang.runtime  # noqa: F401

        for n in name.split(","):
            program(n)
        return {}
    if mode == "cold":
        os.environ["TILELANG_DISABLE_CACHE"] = "1"
    t0 = time.perf_counter()
    import tilelang

    import_s = time.perf_counter() - t0
    kernel_module(name)
    t0 = time.perf_counter()
    _init_driver()
    drv_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    if collect:
        gc.collect()
    gc_s = time.perf_counter() - t0
    target = KERNELS[name][1]
    rows = []
    for _ in range(1 + (again if mode == "cold" else 1 if mode == "warm" else 0)):
        t0, c0 = time.perf_counter(), time.process_time()
        func, options = program(name)
        t1, c1 = time.perf_counter(), time.process_time()
        k = tilelang.compile(func, target=target, **options)
        t2, c2 = time.perf_counter(), time.process_time()
        a = k.adapter
        program_hit = getattr(a, "program_cache_hit", False)  # (older trees: no such cache)
        if mode == "cold":
            assert not a.compiled.cache_hit and not program_hit
        elif mode == "warm":
            assert a.compiled.cache_hit, f"{name}: the warm child compiled the kernel again"
        rows.append({"trace": t1 - t0, "compile": t2 - t1, "lower": a.lower_seconds,
                     "nvrtc": 0.0 if program_hit else a.compiled.seconds,
                     "program_hit": program_hit,
                     "trace_cpu": c1 - c0, "compile_cpu": c2 - c1})
    out = {"import": import_s, "drv": drv_s, "gc": gc_s, "first": rows[0], "again": rows[1:]}
    if mode == "cold":
        out.update(compiler=a.compiled.compiler, options=list(a.compiled.options),
                   source=a.source, arch=a.compiled.arch, cubin=a.compiled.cubin.hex())
    return out


def _init_driver():
    """cuInit where a CUDA driver and a GPU are present (not timed: see `drv`), straight
    through ctypes: importing tilelang's runtime here would take its modules' imports out of
    the timed compile, which a program pays there."""
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1").cuInit(0)
    except (OSError, AttributeError):
        pass  # no driver or no GPU: NVRTC does not start one either


# ---- parent -----------------------------------------------------------------------------------

def run_child(name: str, mode: str, again: int, pycache: str, write: bool,
              cache_dir: str, pch: bool = True, collect: bool = True) -> dict:
    env = dict(os.environ)
    if not pch:
        env["TILELANG_NVRTC_PCH"] = "0"
    env["PYTHONPYCACHEPREFIX"] = pycache
    env["TILELANG_CACHE_DIR"] = cache_dir
    env.pop("TILELANG_DISABLE_CACHE", None)
    if write:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    p = subprocess.run([sys.executable, __file__, "--child", name, "--mode", mode,
                        "--again", str(again), "--gc", "collect" if collect else "leave"],
                       capture_output=True, text=True, env=env, cwd=str(ROOT))
    if p.returncode != 0:
        raise RuntimeError(f"{name} ({mode}): child failed\n{p.stdout}\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def nvrtc_phases(source: str, arch: str, options: list, runs: int, pch: bool = True) -> dict:
    """Median per phase (ms) of NVRTC's own `--time` report for `source` (with `pch`: its
    headers from a precompiled header this process made first, as runtime/pch.py does)."""
    from tilelang.runtime import toolkit

    backend = toolkit.nvrtc_backend()
    if backend is None:
        return {"front end": float("nan"), "NVVM": float("nan"), "ptxas": float("nan")}
    samples = []
    with tempfile.TemporaryDirectory() as d:
        extra = []
        if pch and _pch_applies(source, backend):
            made = os.path.join(d, "headers.pch")
            ok, log, _ = backend.compile(source, "kernel.cu", [*options, f"--create-pch={made}"])
            if ok and os.path.exists(made):
                extra = [f"--use-pch={made}"]
        for i in range(runs):
            path = os.path.join(d, f"t{i}.csv")
            ok, log, _ = backend.compile(source, "kernel.cu",
                                         [*options, *extra, f"--time={path}"])
            if not ok:
                raise RuntimeError(log)
            phases = {}
            with open(path) as f:
                for line in f.read().splitlines()[1:]:
                    parts = [x.strip() for x in line.split(",")]
                    if len(parts) >= 3:
                        phases[parts[1]] = phases.get(parts[1], 0.0) + float(parts[2])
            samples.append(phases)
    names = {"CUDA C++ Frontend": "front end", "NVVM Optimizer": "NVVM",
             "PTX Translation": "ptxas"}
    return {short: statistics.median(s.get(long, 0.0) for s in samples)
            for long, short in names.items()}


def _pch_applies(source: str, backend) -> bool:
    try:
        from tilelang.runtime import pch
    except ImportError:  # trees without precompiled headers
        return False
    return pch.enabled() and pch.nvrtc_new_enough(backend.version) and \
        pch.header_prefix(source) is not None


def cuobjdump_path():
    for cand in (os.environ.get("TILELANG_CUOBJDUMP"), shutil.which("cuobjdump")):
        if cand and os.access(cand, os.X_OK):
            return cand
    from tilelang.runtime import toolkit

    for h in toolkit._cuda_homes():
        p = os.path.join(h, "bin", "cuobjdump")
        if os.access(p, os.X_OK):
            return p
    return None


_OPS = ("HGMMA", "HMMA", "LDSM", "STSM", "UTMALDG", "UTMASTG", "LDGSTS", "LDG", "STG", "LDS",
        "STS", "LDL", "STL", "BAR", "SYNCS", "WARPGROUP", "SHFL", "MUFU", "FFMA", "FMUL", "FADD",
        "BRA")


def sass_summary(cubin: bytes) -> dict:
    from tilelang.runtime.cubin_info import resource_usage

    info = {"regs": {k: v[0] for k, v in resource_usage(cubin).items()},
            "local_bytes": {k: v[1] for k, v in resource_usage(cubin).items()}}
    tool = cuobjdump_path()
    if tool is None:
        info["sass"] = "cuobjdump not found (set TILELANG_CUOBJDUMP)"
        return info
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        sass = subprocess.run([tool, "--dump-sass", f.name], capture_output=True,
                              text=True).stdout
    finally:
        os.unlink(f.name)
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(?:\.|\s|;)",
                     sass)
    counts = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    info["instructions"] = len(ops)
    info["mix"] = {op: sum(c for o, c in counts.items() if o == op or
                           (op in ("BAR", "SYNCS", "WARPGROUP") and o.startswith(op)))
                   for op in _OPS}
    info["all_ops"] = counts
    return info


def machine() -> str:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.+)", f.read())
            cpu = m.group(1).strip() if m else cpu
    except OSError:
        pass
    return f"{platform.node()}: {cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", default="", help="comma-separated kernel names (default: all)")
    ap.add_argument("--modes", default="cold,warm")
    ap.add_argument("--sass", action="store_true")
    ap.add_argument("--bytecode", choices=("warm", "none"), default="warm",
                    help="children import from a warm private pycache, or compile from source")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="print wall-clock times (default) or the child's CPU time for trace "
                         "and compile (steadier on a loaded machine; counts NVRTC, which runs "
                         "in the child, but not nvcc; lowering, NVRTC and rest stay wall-clock)")
    ap.add_argument("--pch", choices=("on", "off"), default="on",
                    help="NVRTC precompiled headers within a process (runtime/pch.py): on "
                         "(default) or off (TILELANG_NVRTC_PCH=0 in the children)")
    ap.add_argument("--gc", choices=("collect", "leave"), default="collect",
                    help="the child collects the garbage its imports left before timing "
                         "(default; the `gc` column says how long that took) or leaves it")
    ap.add_argument("--driver-cache", choices=("off", "on"), default="off",
                    help="compile with the CUDA driver's device-code cache off "
                         "(CUDA_CACHE_DISABLE=1, default) or on")
    ap.add_argument("--json", default="")
    ap.add_argument("--child", default="")
    ap.add_argument("--mode", default="cold")
    ap.add_argument("--again", type=int, default=3)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.mode, args.again, args.gc == "collect")))
        return 0
    if args.driver_cache == "off":  # read when the driver starts: this process's (phases)
        os.environ["CUDA_CACHE_DISABLE"] = "1"  # and the children's
    names = [n for n in KERNELS if not args.only or n in args.only.split(",")]
    modes = args.modes.split(",")
    pycache = tempfile.mkdtemp(prefix="tl-pycache-")
    cache_root = tempfile.mkdtemp(prefix="tl-compile-time-cache-")
    warm_bc = args.bytecode == "warm"
    if warm_bc:  # fill the private pycache once (every module the children import)
        run_child(names[0], "cold", 0, pycache, True, os.path.join(cache_root, "fill"))
        run_child(names[0], "fill", 0, pycache, True, os.path.join(cache_root, "fill"))
        run_child(",".join(names), "imports", 0, pycache, True, os.path.join(cache_root, "fill"))
    print(f"{machine()}\nNVRTC {_nvrtc_version()}; bytecode: {args.bytecode}; "
          f"medians of {args.runs} processes; ms ({args.clock} clock); NVRTC precompiled "
          f"headers {args.pch}; garbage collected before timing: {args.gc == 'collect'}; "
          f"driver's device-code cache: {args.driver_cache}")
    print(f"{'kernel':16s} {'import':>6s} {'drv':>4s} {'gc':>4s} | {'cold':>6s} {'trace':>5s} "
          f"{'lower':>6s} {'nvrtc':>6s} {'rest':>5s} {'again':>6s} | {'front':>5s} {'NVVM':>5s} "
          f"{'ptxas':>5s} | {'warm':>5s} {'trace':>5s} {'load':>5s} {'next':>5s}")
    report = {}
    cpu = args.clock == "cpu"
    use_pch = args.pch == "on"
    collect = args.gc == "collect"

    def med(rows, key):
        if cpu and key in ("trace", "compile"):
            key += "_cpu"
        return statistics.median(r[key] for r in rows) * 1e3

    for name in names:
        row = {"description": KERNELS[name][0], "target": KERNELS[name][1]}
        cells = {}
        if "cold" in modes:
            kids = [run_child(name, "cold", args.runs if i == 0 else 0, pycache, warm_bc,
                              os.path.join(cache_root, "off"), use_pch, collect)
                    for i in range(args.runs)]
            first = [k["first"] for k in kids]
            again = kids[0]["again"]
            trace, comp = med(first, "trace"), med(first, "compile")
            lower, nvrtc = med(first, "lower"), med(first, "nvrtc")
            rest = statistics.median(r["compile"] - r["lower"] - r["nvrtc"] for r in first) * 1e3
            ph = nvrtc_phases(kids[0]["source"], kids[0]["arch"], kids[0]["options"],
                              args.runs, use_pch)
            row.update(cold_ms=trace + comp, cold_trace_ms=trace, cold_compile_ms=comp,
                       cold_lower_ms=lower, cold_nvrtc_ms=nvrtc,
                       cold_rest_ms=rest,
                       again_ms=med(again, "compile") if again else None,
                       import_ms=statistics.median(k["import"] for k in kids) * 1e3,
                       gc_ms=statistics.median(k["gc"] for k in kids) * 1e3,
                       drv_ms=statistics.median(k["drv"] for k in kids) * 1e3,
                       phases_ms=ph, source_lines=kids[0]["source"].count("\n"))
            cells.update(import_=row["import_ms"], gc=row["gc_ms"], drv=row["drv_ms"],
                         cold=trace + comp, trace=trace, lower=lower,
                         nvrtc=nvrtc, rest=rest,
                         again=row["again_ms"] or float("nan"), front=ph["front end"],
                         nvvm=ph["NVVM"], ptxas=ph["ptxas"])
            if args.sass:
                row["sass"] = sass_summary(bytes.fromhex(kids[0]["cubin"]))
        if "warm" in modes:
            d = os.path.join(cache_root, name)
            run_child(name, "fill", 0, pycache, warm_bc, d)
            kids = [run_child(name, "warm", 0, pycache, warm_bc, d, use_pch, collect)
                    for _ in range(args.runs)]
            first = [k["first"] for k in kids]
            w_trace, w_load = med(first, "trace"), med(first, "compile")
            nxt = [k["again"][0] for k in kids]
            w_next = med(nxt, "trace") + med(nxt, "compile")
            row.update(warm_ms=w_trace + w_load, warm_trace_ms=w_trace, warm_load_ms=w_load,
                       warm_next_ms=w_next,
                       warm_program_hit=all(r["program_hit"] for r in first + nxt))
            row.setdefault("import_ms", statistics.median(k["import"] for k in kids) * 1e3)
            cells.update(warm=w_trace + w_load, w_trace=w_trace, w_load=w_load, w_next=w_next)
            row.setdefault("gc_ms", statistics.median(k["gc"] for k in kids) * 1e3)
            row.setdefault("drv_ms", statistics.median(k["drv"] for k in kids) * 1e3)
            cells.setdefault("drv", row["drv_ms"])
            cells.setdefault("import_", row["import_ms"])
            cells.setdefault("gc", row["gc_ms"])
        nan = float("nan")
        c = lambda k: cells.get(k, nan)  # noqa: E731
        print(f"{name:16s} {c('import_'):6.0f} {c('drv'):4.0f} {c('gc'):4.0f} | "
              f"{c('cold'):6.0f} {c('trace'):5.0f} {c('lower'):6.0f} {c('nvrtc'):6.0f} "
              f"{c('rest'):5.0f} {c('again'):6.0f} | "
              f"{c('front'):5.0f} {c('nvvm'):5.0f} {c('ptxas'):5.0f} | {c('warm'):5.1f} "
              f"{c('w_trace'):5.1f} {c('w_load'):5.1f} {c('w_next'):5.1f}"
              f"{'' if row.get('warm_program_hit', True) else ' *'}", flush=True)
        s = row.get("sass")
        if s:
            mix = s.get("mix")
            print(f"    regs {s['regs']} local {s['local_bytes']}  instructions "
                  f"{s.get('instructions', '?')}  "
                  + (" ".join(f"{k}={v}" for k, v in mix.items() if v) if mix else
                     s.get("sass", "")), flush=True)
        report[name] = row
    shutil.rmtree(pycache, ignore_errors=True)
    shutil.rmtree(cache_root, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "nvrtc": _nvrtc_version(), "clock": args.clock,
                       "pch": args.pch, "gc": args.gc, "driver_cache": args.driver_cache,
                       "kernels": report},
                      f, indent=1)
    return 0


def _nvrtc_version() -> str:
    from tilelang.runtime import toolkit

    b = toolkit.nvrtc_backend()
    return f"{b.version} ({b.kind})" if b is not None else "missing (nvcc used)"


if __name__ == "__main__":
    raise SystemExit(main())
