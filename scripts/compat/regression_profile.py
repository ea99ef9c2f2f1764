"""Where the time of the reference's regression kernels goes, on whichever `tilelang` is
importable: for every `regression_*` function, the timed call's GPU time (the shared timer of
`shared/compat/regression_perf.py`), the host time of one call with the GPU idle, the kernels
it launched with their durations (torch.profiler), and the CUDA source of every kernel it built.
Run it for the project and for the reference on one GPU, then compare side by side.

    python scripts/compat/regression_profile.py REGRESSION_PERF_PY EXAMPLES OUT_DIR LABEL [substr ...]

REGRESSION_FNS=a,b (environment) keeps only the functions whose names contain one of them.
Writes OUT_DIR/profile_LABEL.jsonl and OUT_DIR/src_LABEL/<function>__<n>.cu.
"""
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

PER_FILE_S = int(os.environ.get("PER_FILE_S", "150"))


def _load(path):
    spec = importlib.util.spec_from_file_location("regression_perf", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _profile_call(fn):
    """(host µs of one call with the GPU idle, [(kernel, µs)] of one call)."""
    import torch

    hosts = []
    for _ in range(30):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        hosts.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
    kernels = {}
    for ev in prof.events():
        if ev.device_type.name == "CUDA":
            kernels.setdefault(ev.name[:80], []).append(ev.device_time)
    return statistics.median(hosts), [(k, round(sum(v) / 5, 2)) for k, v in kernels.items()]


def worker(perf_py, path, out_dir, label):
    rp = _load(perf_py)
    records = []

    def profiled(timer, own=False):
        """`timer` (fn, ...) -> ms, also recording one profiled call of `fn`."""
        def timed(fn, *a, **kw):
            ms = timer(fn, *a, **kw)
            try:
                host_us, kernels = _profile_call(fn)
            except Exception as e:  # noqa: BLE001 - profiling is best effort
                host_us, kernels = None, [("profiler failed", str(e)[:100])]
            row = {"ms": ms, "host_us": host_us, "kernels": kernels}
            if own:
                row["own_timer"] = kw.get("backend", "event")
            records.append(row)
            return ms
        return timed

    rp._time_gpu = profiled(rp._time_gpu)
    # functions that time themselves with the module-level `tilelang.profiler.do_bench(fn, ...)`
    # (each implementation's own CUPTI timer): keep its number, profile one call of `fn` too
    prof_mod = importlib.import_module("tilelang.profiler")
    prof_mod.do_bench = profiled(prof_mod.do_bench, own=True)
    built = []
    jk = importlib.import_module("tilelang.jit.kernel")

    init = jk.JITKernel.__init__

    def recording_init(self, *a, **kw):
        init(self, *a, **kw)
        built.append(self)

    jk.JITKernel.__init__ = recording_init
    d, f = os.path.split(os.path.abspath(path))
    sys.path.insert(0, d)
    os.chdir(d)
    sys.argv = [f]
    rel = os.path.join(os.path.basename(d), f)
    src_dir = os.path.join(out_dir, f"src_{label}")
    os.makedirs(src_dir, exist_ok=True)
    try:
        calls = rp._patch()
        mod = importlib.import_module(f[:-3])
    except BaseException as e:  # noqa: BLE001
        print(json.dumps({"file": rel, "fn": "<import>", "ok": False, "error": rp._err(e)[:300]}))
        return
    wanted = [w for w in os.environ.get("REGRESSION_FNS", "").split(",") if w]
    for name in sorted(n for n in dir(mod) if n.startswith("regression_")):
        if wanted and not any(w in name for w in wanted):
            continue
        calls.clear()
        records.clear()
        built.clear()
        try:
            getattr(mod, name)()
            row = {"file": rel, "fn": name, "ok": True, "runs": list(records)}
        except BaseException as e:  # noqa: BLE001
            row = {"file": rel, "fn": name, "ok": False, "error": rp._err(e)[:300]}
        for i, k in enumerate(built):
            try:
                with open(os.path.join(src_dir, f"{name}__{i}.cu"), "w") as fh:
                    fh.write(k.get_kernel_source())
            except Exception:  # noqa: BLE001
                pass
        print(json.dumps(row), flush=True)


def driver(perf_py, root, out_dir, label, picks):
    files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(root) for f in fs
                   if f.startswith("regression_") and f.endswith(".py"))
    if picks:
        files = [f for f in files if any(p in f for p in picks)]
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"profile_{label}.jsonl"), "w") as fh:
        for path in files:
            try:
                r = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", perf_py,
                                    path, out_dir, label], capture_output=True, text=True,
                                   timeout=PER_FILE_S)
                lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
                if not lines:
                    lines = [json.dumps({"file": path, "ok": False,
                                         "error": (r.stderr.strip().splitlines() or ["?"])[-1]})]
            except subprocess.TimeoutExpired:
                lines = [json.dumps({"file": path, "ok": False, "error": "timeout"})]
            for l in lines:
                fh.write(l + "\n")
                fh.flush()  # rows survive a driver killed by an outer timeout
                print(l[:300], flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        worker(*sys.argv[2:6])
    else:
        driver(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
