"""Cold compile time of a few kernels, split into Python lowering, the NVRTC front end, NVVM,
ptxas, and the rest; no GPU needed (issue 5: a wgmma+TMA GEMM for sm_90a in <= 0.5 s).

    python benchmarks/compile_time.py [--runs 5] [--only gemm_sm90,flash_sm90] [--sass]
                                      [--json out.json]

For each kernel, `--runs` fresh Python processes each `import tilelang` and then time the
process's first `tilelang.compile(func, target=...)` with the disk cache off ("first"): what
a user waits for on a new kernel in a new process. The same process then compiles the kernel
`--runs` more times ("again": lowering and NVRTC already loaded, cache still off). Medians are
printed. The NVRTC phases come from NVRTC's own `--time` report over `--runs` compiles of the
generated source with the options tilelang uses: "front end" (CUDA C++ parsing, including
tilelang's and CUDA's headers), "NVVM" (LLVM optimisation, PTX generation) and "ptxas" (PTX ->
SASS). "first" minus lowering minus NVRTC is the rest (loading NVRTC, the kernel wrapper).

`--sass` also prints the kernel's SASS instruction mix (cuobjdump from PATH, CUDA_HOME/bin or
TILELANG_CUOBJDUMP), registers and local-memory bytes, to check that a compile-time change
left the machine code alone.

Python bytecode: `--bytecode warm` (default) gives the children a private pycache (filled
by one discarded child first), like an installed package; `--bytecode none` makes every child
compile tilelang's modules from source (a checkout with PYTHONDONTWRITEBYTECODE=1): the
modules the first compile imports lazily then cost ~0.1 s more.
"""

from __future__ import annotations

import argparse
import json
import os
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

KERNELS = {
    # name: (description, target)
    "vector_add": ("vector add 2^20 fp32, block 1024", "cuda -arch=sm_90a"),
    "gemm_sm90": ("GEMM 4096^3 fp16, 128/256/64 s3 t256 (wgmma + TMA)", "cuda -arch=sm_90a"),
    "flash_sm90": ("FlashAttention fwd B8 H32 S4096 D128, 128/128 s2 t256 (wgmma + TMA)",
                   "cuda -arch=sm_90a"),
    "gemm_sm80": ("GEMM 4096^3 fp16, 128/128/32 s3 t128 (mma.sync, cp.async)", "cuda -arch=sm_80"),
}


def program(name):
    """The PrimFunc of one benchmark kernel (the examples' own builders)."""
    if name == "vector_add":
        from tests.gpu import kernels as K

        return K.vector_add(1 << 20, block=1024)
    if name.startswith("gemm"):
        sys.path.insert(0, str(ROOT / "examples" / "gemm"))
        import example_gemm

        if name == "gemm_sm90":
            return example_gemm.matmul.get_tir(4096, 4096, 4096, block_M=128, block_N=256,
                                               block_K=64, num_stages=3, threads=256)
        return example_gemm.matmul.get_tir(4096, 4096, 4096, block_M=128, block_N=128,
                                           block_K=32, num_stages=3, threads=128)
    if name == "flash_sm90":
        sys.path.insert(0, str(ROOT / "examples" / "flash_attention"))
        import example_mha_fwd

        return example_mha_fwd.flash_attention_fwd.get_tir(8, 32, 4096, 128, False, block_M=128,
                                                           block_N=128, num_stages=2,
                                                           threads=256)
    raise KeyError(name)


# ---- child: one fresh process ----------------------------------------------------------------

def child(name: str, again: int) -> dict:
    os.environ["TILELANG_CACHE_DIR"] = tempfile.mkdtemp(prefix="tl-compile-time-")
    t0 = time.perf_counter()
    import tilelang

    import_s = time.perf_counter() - t0
    tilelang.disable_cache()
    func = program(name)
    target = KERNELS[name][1]
    rows = []
    for _ in range(1 + again):
        t0 = time.perf_counter()
        k = tilelang.compile(func, target=target)
        total = time.perf_counter() - t0
        a = k.adapter
        assert not a.compiled.cache_hit
        rows.append({"total": total, "lower": a.lower_seconds, "nvrtc": a.compiled.seconds})
    shutil.rmtree(os.environ["TILELANG_CACHE_DIR"], ignore_errors=True)
    out = {"import": import_s, "first": rows[0], "again": rows[1:],
           "compiler": a.compiled.compiler, "options": list(a.compiled.options),
           "source": a.source, "arch": a.compiled.arch, "cubin": a.compiled.cubin.hex()}
    return out


# ---- parent -----------------------------------------------------------------------------------

def run_child(name: str, again: int, pycache: str, write: bool) -> dict:
    env = dict(os.environ)
    env["PYTHONPYCACHEPREFIX"] = pycache
    if write:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    p = subprocess.run([sys.executable, __file__, "--child", name, "--again", str(again)],
                       capture_output=True, text=True, env=env, cwd=str(ROOT))
    if p.returncode != 0:
        raise RuntimeError(f"{name}: child failed\n{p.stdout}\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def nvrtc_phases(source: str, arch: str, options: list, runs: int) -> dict:
    """Median per phase (ms) of NVRTC's own `--time` report for `source`."""
    from tilelang.runtime import toolkit

    backend = toolkit.nvrtc_backend()
    samples = []
    with tempfile.TemporaryDirectory() as d:
        for i in range(runs):
            path = os.path.join(d, f"t{i}.csv")
            ok, log, _ = backend.compile(source, "kernel.cu", [*options, f"--time={path}"])
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", default="")
    ap.add_argument("--sass", action="store_true")
    ap.add_argument("--bytecode", choices=("warm", "none"), default="warm",
                    help="children import from a warm private pycache, or compile from source")
    ap.add_argument("--json", default="")
    ap.add_argument("--child", default="")
    ap.add_argument("--again", type=int, default=3)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.again)))
        return 0
    names = [n for n in KERNELS if not args.only or n in args.only.split(",")]
    pycache = tempfile.mkdtemp(prefix="tl-pycache-")
    warm = args.bytecode == "warm"
    if warm:  # fill the private pycache once
        run_child(names[0], 0, pycache, True)
    print(f"bytecode: {args.bytecode}; NVRTC {_nvrtc_version()}")
    report = {}
    hdr = (f"{'kernel':11s} {'first':>7s} {'again':>7s} | {'lower':>6s} {'nvrtc':>6s} "
           f"{'rest':>6s} | {'front':>6s} {'NVVM':>6s} {'ptxas':>6s}   (ms, medians)")
    print(hdr)
    for name in names:
        kids = [run_child(name, args.runs if i == 0 else 0, pycache, warm)
                for i in range(args.runs)]
        first = [k["first"] for k in kids]
        again = kids[0]["again"]
        med = lambda rows, key: statistics.median(r[key] for r in rows) * 1e3  # noqa: E731
        f_total, f_lower, f_nvrtc = (med(first, k) for k in ("total", "lower", "nvrtc"))
        a_total = med(again, "total") if again else float("nan")
        ph = nvrtc_phases(kids[0]["source"], kids[0]["arch"], kids[0]["options"], args.runs)
        row = {"first_ms": f_total, "first_lower_ms": f_lower, "first_nvrtc_ms": f_nvrtc,
               "first_rest_ms": f_total - f_lower - f_nvrtc, "again_ms": a_total,
               "again_lower_ms": med(again, "lower") if again else None,
               "again_nvrtc_ms": med(again, "nvrtc") if again else None,
               "import_ms": statistics.median(k["import"] for k in kids) * 1e3,
               "phases_ms": ph, "description": KERNELS[name][0], "target": KERNELS[name][1],
               "source_lines": kids[0]["source"].count("\n")}
        print(f"{name:11s} {f_total:7.0f} {a_total:7.0f} | {f_lower:6.0f} {f_nvrtc:6.0f} "
              f"{f_total - f_lower - f_nvrtc:6.0f} | {ph['front end']:6.0f} {ph['NVVM']:6.0f} "
              f"{ph['ptxas']:6.0f}", flush=True)
        if args.sass:
            s = sass_summary(bytes.fromhex(kids[0]["cubin"]))
            row["sass"] = s
            mix = s.get("mix")
            print(f"    regs {s['regs']} local {s['local_bytes']}  instructions {s.get('instructions', '?')}  "
                  + (" ".join(f"{k}={v}" for k, v in mix.items() if v) if mix else
                     s.get("sass", "")), flush=True)
        report[name] = row
    shutil.rmtree(pycache, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


def _nvrtc_version() -> str:
    from tilelang.runtime import toolkit

    b = toolkit.nvrtc_backend()
    return f"{b.version} ({b.kind})" if b is not None else "missing"


if __name__ == "__main__":
    raise SystemExit(main())
