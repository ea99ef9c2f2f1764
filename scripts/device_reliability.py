#!/usr/bin/env python
"""Reliability run on a GPU machine: differential fuzzing against the interpreter and a numpy
oracle under a time budget, then resource growth measurements. Prints a summary, writes JSON
and the source of every finding under $OUT (or --out).

    python scripts/device_reliability.py                      # everything, ~8 minutes
    python scripts/device_reliability.py --sections fuzz --fuzz-seconds 300 --workers 8
    python scripts/device_reliability.py --sections resources --kernels 500 --calls 1000000
    python scripts/device_reliability.py --dry-run            # plumbing check without a GPU
    python scripts/device_reliability.py --sections fuzz --fuzz-cases 200   # a fixed set of seeds
    python scripts/device_reliability.py --sections fuzz --vary-configs   # also vary pass configs
    python scripts/device_reliability.py --sections fuzz --family fragments   # one family only

Fuzz: W worker processes share the GPU; worker w takes seeds start+w, start+w+W, ... Each case
is compiled for the GPU, run on the GPU and on the interpreter with the same inputs, and both
are compared with the oracle (tilelang.testing.fuzz). A worker that stops reporting for
--case-timeout seconds is killed (the case counts as a hang) and restarted after that seed; a
worker that dies (segfault, sticky CUDA error) is restarted the same way. Outcomes: ok,
rejected (a located compile error for a feature fuzz/known.py lists as unsupported),
rejected_valid (any other located refusal: a finding), known (an open defect listed in
fuzz/known.py), crash (internal
error while compiling), nvrtc (generated CUDA does not compile), gpu_error (launch or run-time
CUDA error), mismatch_gpu / mismatch_interp / mismatch_both, disagree (GPU and interpreter
differ though each is within the oracle's bounds), hang, died, harness (a bug in the fuzzer).
With --vary-configs each case is compiled with its seed's pass configs
(`fuzz.pass_configs_for(seed)`: defaults for about half, else 1-3 optimisation switches turned
off); every finding names its configs and the command that reproduces it, and the summary
counts the cases that ran with non-default configs.

Resources (a fresh process): compile, call once and drop K distinct kernels (cache disabled),
sampling host RSS, device free memory and torch's allocated bytes every 50; then 10^6 calls of
one kernel (fast path); then an output allocation that cannot succeed (torch's OOM error must
reach the caller and the kernel must keep working).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

MISMATCH_KINDS = ("mismatch_gpu", "mismatch_interp", "mismatch_both", "disagree")
FINDING_KINDS = ("crash", "nvrtc", "gpu_error", "hang", "died", "harness",
                 "rejected_valid") + MISMATCH_KINDS


# ==== one fuzz case ============================================================================

def run_one(seed: int, device_target: str, dry_run: bool, vary_configs: bool = False,
            family: str | None = None) -> dict:
    """Outcome of one case: {"seed", "family", "outcome", "detail", "features", "configs",
    "seconds"}; "configs" is the `describe_configs` line of the pass configs the device kernel
    was compiled with ("defaults" unless `vary_configs`). `family`: that family's program of
    the seed (None: the family drawn from the seed)."""
    import numpy as np

    from tilelang.testing import fuzz
    from tilelang.testing.fuzz.known import known_bug

    t0 = time.time()
    configs = fuzz.pass_configs_for(seed) if vary_configs else {}
    res = {"seed": seed, "family": "?", "outcome": "harness", "detail": "", "features": [],
           "configs": fuzz.describe_configs(configs), "asked_family": family}
    try:
        case = fuzz.generate(seed, family)
        res.update(family=case.family, features=list(case.features))
        inputs = case.make_inputs(np.random.default_rng(seed))
        want = fuzz.expected(case, inputs)
    except Exception:  # noqa: BLE001
        res["detail"] = traceback.format_exc()[-2000:]
        return res
    try:
        kernel = fuzz.compile_case(case, device_target, configs)
    except Exception as e:  # noqa: BLE001
        res["outcome"] = _compile_outcome(e, known_bug)
        res["detail"] = f"{type(e).__name__}: {e}"[:3000]
        res["seconds"] = time.time() - t0
        return res
    try:
        cpu = fuzz.run_case(case, "cpu", inputs)
    except Exception as e:  # noqa: BLE001
        res["outcome"] = "known" if known_bug(e) else "crash"
        res["detail"] = f"interpreter: {type(e).__name__}: {e}"[:3000]
        return res
    if dry_run:  # no GPU: the "device" result is the interpreter, compiled with `configs`
        gpu = fuzz.run_kernel(case, kernel, inputs, device="cpu")
    else:
        try:
            gpu = fuzz.run_kernel(case, kernel, inputs, device="cuda")
        except Exception as e:  # noqa: BLE001
            res["outcome"] = "gpu_error"
            res["detail"] = f"{type(e).__name__}: {e}"[:3000]
            return res
    bad_gpu = fuzz.check(case, gpu, want, "gpu vs oracle: ")
    bad_cpu = fuzz.check(case, cpu, want, "interpreter vs oracle: ")
    if bad_gpu and bad_cpu:
        res["outcome"] = "mismatch_both"
    elif bad_gpu:
        res["outcome"] = "mismatch_gpu"
    elif bad_cpu:
        res["outcome"] = "mismatch_interp"
    else:
        dis = fuzz.agree(gpu, cpu, want, "gpu vs interpreter: ")
        res["outcome"] = "disagree" if dis else "ok"
        bad_gpu = dis
    res["detail"] = "\n".join(bad_gpu + bad_cpu)[:3000]
    res["seconds"] = time.time() - t0
    return res


def _compile_outcome(exc, known_bug) -> str:
    from tilelang.runtime.compiler import CudaCompileError
    from tilelang.testing import fuzz
    from tilelang.testing.fuzz.known import expected_rejection

    if known_bug(exc):
        return "known"
    if isinstance(exc, CudaCompileError):
        return "nvrtc"
    kind = fuzz.classify(exc)
    if kind == "rejected" and not expected_rejection(exc):
        return "rejected_valid"  # generated programs are valid: refusing one is a defect
    return kind


def fuzz_worker(args):
    """Process seeds of one stride until the deadline, one JSON line per event."""
    os.environ.setdefault("TILELANG_CACHE_DIR", tempfile.mkdtemp(prefix="tl-fuzz-cache-"))
    import warnings

    warnings.simplefilter("ignore")
    target = "cpu" if args.dry_run else "cuda"
    seed = args.seed_start + args.worker_id
    with open(args.results, "a", buffering=1) as out:
        # --fuzz-cases bounds the seeds (start .. start+N-1) so a run covers the same cases
        # however loaded the machine is; the deadline still bounds the time
        while time.time() < args.deadline and (args.fuzz_cases <= 0 or
                                               seed < args.seed_start + args.fuzz_cases):
            out.write(json.dumps({"seed": seed, "outcome": "start"}) + "\n")
            if seed == args.debug_hang_seed:  # exercises the watchdog (tests of this script)
                time.sleep(3600)
            if seed == args.debug_die_seed:
                os._exit(9)
            res = run_one(seed, target, args.dry_run, args.vary_configs, args.family)
            out.write(json.dumps(res) + "\n")
            if res["outcome"] == "gpu_error":  # the CUDA context may be unusable now
                return 3
            seed += args.workers
    return 0


# ==== the fuzz driver ============================================================================

def _read_lines(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip().endswith("}")]
    except FileNotFoundError:
        return []


def run_fuzz(args, out_dir) -> dict:
    work = tempfile.mkdtemp(prefix="tl-fuzz-")
    deadline = time.time() + args.fuzz_seconds
    workers = {}

    def spawn(w, start_seed):
        path = os.path.join(work, f"w{w}_{start_seed}.jsonl")
        cmd = [sys.executable, os.path.abspath(__file__), "--fuzz-worker", "--worker-id",
               str(start_seed - args.seed_start), "--workers", str(args.workers),
               "--seed-start", str(args.seed_start), "--deadline", str(deadline),
               "--results", path, "--fuzz-cases", str(args.fuzz_cases),
               "--debug-hang-seed", str(args.debug_hang_seed),
               "--debug-die-seed", str(args.debug_die_seed)] + (
                   ["--dry-run"] if args.dry_run else []) + (
                   ["--vary-configs"] if args.vary_configs else []) + (
                   ["--family", args.family] if args.family else [])
        # worker id is recomputed from the start seed so a restart continues the stride
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(path + ".err", "w"),
                             cwd=ROOT)
        workers[w] = (p, path)

    for w in range(args.workers):
        spawn(w, args.seed_start + w)
    results, restarts = [], 0
    while workers:
        time.sleep(1.0)
        for w, (p, path) in list(workers.items()):
            lines = _read_lines(path)
            done = p.poll() is not None
            last = lines[-1] if lines else None
            stuck = (last is not None and last.get("outcome") == "start" and
                     time.time() - os.path.getmtime(path) > args.case_timeout)
            if not done and not stuck:
                continue
            if stuck:
                p.kill()
                p.wait()
            results += [r for r in lines if r.get("outcome") != "start"]
            del workers[w]
            if last is not None and last.get("outcome") == "start":
                results.append({"seed": last["seed"], "family": "?",
                                "asked_family": args.family,
                                "outcome": "hang" if stuck else "died",
                                "detail": _tail(path + ".err"), "features": [],
                                "configs": _configs_of(last["seed"], args.vary_configs)})
                nxt = last["seed"] + args.workers
            elif last is not None and last.get("outcome") == "gpu_error":
                nxt = last["seed"] + args.workers
            else:
                continue  # finished its share before the deadline
            in_budget = args.fuzz_cases <= 0 or nxt < args.seed_start + args.fuzz_cases
            if time.time() < deadline - 5 and in_budget:
                restarts += 1
                spawn(w, nxt)
    return summarize_fuzz(results, restarts, out_dir)


def _configs_of(seed, vary_configs) -> str:
    from tilelang.testing import fuzz

    return fuzz.describe_configs(fuzz.pass_configs_for(seed) if vary_configs else {})


def repro_command(r) -> str:
    """The command line that reruns finding `r` on a GPU with the configs it ran with."""
    return (f"python scripts/fuzz_family.py {r.get('asked_family') or 'auto'} {r['seed']} 1 "
            f"--configs '{r.get('configs', 'defaults')}'")


def _tail(path, n=3000):
    try:
        with open(path) as f:
            return f.read()[-n:]
    except OSError:
        return ""


def summarize_fuzz(results, restarts, out_dir) -> dict:
    from collections import Counter

    from tilelang.testing import fuzz

    counts = Counter(r["outcome"] for r in results)
    fams = Counter((r["family"], r["outcome"]) for r in results)
    feats = Counter(f for r in results if r["outcome"] == "ok" for f in r.get("features", []))
    findings = [r for r in results if r["outcome"] in FINDING_KINDS]
    find_dir = os.path.join(out_dir, "findings")
    os.makedirs(find_dir, exist_ok=True)
    for r in findings:
        try:
            case = fuzz.generate(r["seed"], r.get("asked_family"))
            r["family"] = case.family
            path = fuzz.write_source(case, find_dir)
            with open(path, "a") as f:
                f.write(f"\n# seed {r['seed']}: {r['outcome']}; pass configs: "
                        f"{r.get('configs', 'defaults')}\n# reproduce: {repro_command(r)}\n")
                f.write("".join(f"# {ln}\n" for ln in str(r.get("detail", "")).splitlines()))
        except Exception:  # noqa: BLE001
            pass
    rejected = Counter(r["detail"].split("\n")[0][:160] for r in results
                       if r["outcome"] in ("rejected", "rejected_valid", "known"))
    return {"cases": len(results), "outcomes": dict(counts), "worker_restarts": restarts,
            "configs": _config_counts(results),
            "by_family": {f"{f}:{o}": n for (f, o), n in sorted(fams.items())},
            "ok_features": dict(feats.most_common()),
            "rejections": dict(rejected.most_common(20)),
            "findings": [{"seed": r["seed"], "family": r.get("family"), "outcome": r["outcome"],
                          "asked_family": r.get("asked_family"),
                          "configs": r.get("configs", "defaults"), "detail": r.get("detail")}
                         for r in findings]}


def _config_counts(results) -> dict:
    """How many cases ran with non-default pass configs, their outcomes, and how often each
    switch was on."""
    from collections import Counter

    from tilelang.testing import fuzz

    varied = [r for r in results if r.get("configs", "defaults") != "defaults"]
    switches = Counter(k for r in varied for k in fuzz.parse_configs(r["configs"]))
    return {"non_default": len(varied),
            "non_default_outcomes": dict(Counter(r["outcome"] for r in varied)),
            "by_switch": dict(switches.most_common())}


# ==== resources ==================================================================================

def _rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def resources_worker(args) -> dict:
    os.environ["TILELANG_DISABLE_CACHE"] = "1"
    import gc

    import torch

    import tilelang
    import tilelang.language as T

    dev = "cpu" if args.dry_run else "cuda"
    target = "cpu" if args.dry_run else "cuda"

    def mem():
        gc.collect()
        if dev == "cpu":
            return {"rss_mb": round(_rss_mb(), 1)}
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        return {"rss_mb": round(_rss_mb(), 1), "device_used_mb": round((total - free) / 2 ** 20, 1),
                "torch_allocated_mb": round(torch.cuda.memory_allocated() / 2 ** 20, 3)}

    def make(i):
        @T.prim_func
        def scale(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
            with T.Kernel(2, threads=128) as bx:
                S = T.alloc_shared((32, 64), "float32")
                T.copy(A[bx * 32, 0], S)
                for r, c in T.Parallel(32, 64):
                    S[r, c] = S[r, c] * float(i) + 1.0
                T.copy(S, B[bx * 32, 0])
        return scale

    out = {"compile": [], "kernels": args.kernels}
    x = torch.randn(64, 64, device=dev)
    finalizers, wrong = [], 0
    t0 = time.time()
    for i in range(args.kernels):
        k = tilelang.compile(make(i), out_idx=-1, target=target)
        y = k(x)
        if i % 25 == 0 and not torch.allclose(y, x * float(i) + 1.0, rtol=1e-5, atol=1e-5):
            wrong += 1
        finalizers += [fn._finalizer for fn in getattr(k.adapter, "functions", [])]
        del k, y
        if i == 9 or (i + 1) % 50 == 0:
            out["compile"].append({"kernels": i + 1, "seconds": round(time.time() - t0, 1),
                                   **mem()})
    out["compile_wrong_results"] = wrong
    out["modules_still_loaded"] = sum(f.alive for f in finalizers)
    out["modules_created"] = len(finalizers)
    first, last = out["compile"][0], out["compile"][-1]
    n = max(last["kernels"] - first["kernels"], 1)
    out["compile_growth_per_kernel_kb"] = {
        k: round((last[k] - first[k]) * 1024 / n, 2) for k in first if k.endswith("_mb")}

    k = tilelang.compile(make(3), out_idx=-1, target=target)
    for _ in range(1000):
        k(x)
    before = mem()
    t0 = time.time()
    calls = args.calls if dev == "cuda" else min(args.calls, 20_000)
    for _ in range(calls):
        k(x)
    if dev == "cuda":
        torch.cuda.synchronize()
    secs = time.time() - t0
    after = mem()
    y = k(x)
    out["calls"] = {"n": calls, "seconds": round(secs, 2), "us_per_call": round(secs / calls * 1e6, 2),
                    "before": before, "after": after,
                    "correct": bool(torch.allclose(y, x * 3.0 + 1.0, rtol=1e-5, atol=1e-5))}

    m = T.dynamic("m", "int64")

    @T.prim_func
    def outer(A: T.Tensor((m,), "float32"), C: T.Tensor((m, m), "float32")):
        with T.Kernel(1, threads=32):
            C[0, 0] = A[0]
    ko = tilelang.compile(outer, out_idx=-1, target=target)
    try:
        ko(torch.zeros(2 ** 21, device=dev))
        out["oom"] = "no error raised"
    except Exception as e:  # noqa: BLE001
        out["oom"] = f"{type(e).__module__}.{type(e).__name__}"
    out["oom_then_works"] = float(ko(torch.ones(3, device=dev))[0, 0]) == 1.0
    out["final"] = mem()
    return out


def run_resources(args) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--resources-worker", "--kernels",
           str(args.kernels), "--calls", str(args.calls)] + (["--dry-run"] if args.dry_run else [])
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"error": f"exit {p.returncode}", "stderr": p.stderr[-4000:]}


# ==== main =========================================================================================

def print_summary(summary: dict):
    print("\n==== tilelang reliability run ====")
    print(f"device: {summary.get('device')}   total {summary.get('seconds')} s")
    fz = summary.get("fuzz")
    if fz:
        cf = fz.get("configs", {})
        print(f"\nfuzz: {fz['cases']} cases, worker restarts {fz['worker_restarts']}, "
              f"{cf.get('non_default', 0)} with non-default pass configs")
        for k, v in sorted(fz["outcomes"].items(), key=lambda kv: -kv[1]):
            print(f"  {k:16s} {v}")
        if fz["findings"]:
            print("  findings (sources under findings/):")
            for r in fz["findings"][:40]:
                head = str(r["detail"]).splitlines()[0][:150] if r["detail"] else ""
                print(f"    seed {r['seed']:6d} {r['family']:7s} {r['outcome']:15s} "
                      f"[{r.get('configs', 'defaults')}] {head}")
                print(f"      reproduce: {repro_command(r)}")
        if cf.get("non_default"):
            print(f"  non-default configs: outcomes {cf['non_default_outcomes']}; "
                  f"switches {cf['by_switch']}")
        print("  most common rejections:")
        for msg, n in list(fz["rejections"].items())[:8]:
            print(f"    {n:4d}  {msg}")
    rs = summary.get("resources")
    if rs:
        print("\nresources:")
        if "error" in rs:
            print("  ERROR", rs["error"], rs.get("stderr", "")[-1500:])
        else:
            for row in rs["compile"]:
                print(f"  after {row['kernels']:4d} kernels: " +
                      ", ".join(f"{k}={v}" for k, v in row.items() if k != "kernels"))
            print(f"  growth per kernel (KiB): {rs['compile_growth_per_kernel_kb']}")
            print(f"  modules still loaded after drop: {rs['modules_still_loaded']} of "
                  f"{rs['modules_created']}; wrong results: {rs['compile_wrong_results']}")
            c = rs["calls"]
            print(f"  {c['n']} calls: {c['us_per_call']} us/call, before {c['before']}, "
                  f"after {c['after']}, correct={c['correct']}")
            print(f"  impossible output allocation: {rs['oom']}; kernel works after: "
                  f"{rs['oom_then_works']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sections", default="fuzz,resources")
    ap.add_argument("--fuzz-seconds", type=float, default=240)
    ap.add_argument("--fuzz-cases", type=int, default=0,
                    help="run exactly the seeds start .. start+N-1 (within --fuzz-seconds); "
                         "0: as many as the time allows")
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--seed-start", type=int, default=0)
    ap.add_argument("--case-timeout", type=float, default=120)
    ap.add_argument("--kernels", type=int, default=500)
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--out", default=os.environ.get("OUT") or "reliability_out")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU: the device side is the interpreter (checks the plumbing)")
    ap.add_argument("--vary-configs", action="store_true",
                    help="compile each fuzz case with its seed's pass configs "
                         "(tilelang.testing.fuzz.pass_configs_for)")
    ap.add_argument("--family", default=None,
                    help="fuzz only this family's programs (e.g. fragments; default: the "
                         "family drawn from each seed)")
    ap.add_argument("--fuzz-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--resources-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker-id", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--results", default="", help=argparse.SUPPRESS)
    ap.add_argument("--debug-hang-seed", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--debug-die-seed", type=int, default=-1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.fuzz_worker:
        sys.exit(fuzz_worker(args))
    if args.resources_worker:
        print(json.dumps(resources_worker(args)))
        return
    t0 = time.time()
    os.makedirs(args.out, exist_ok=True)
    summary = {"device": _device_name(args.dry_run)}
    sections = args.sections.split(",")
    if "fuzz" in sections:
        summary["fuzz"] = run_fuzz(args, args.out)
    if "resources" in sections:
        summary["resources"] = run_resources(args)
    summary["seconds"] = round(time.time() - t0, 1)
    with open(os.path.join(args.out, "reliability_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print_summary(summary)
    findings = summary.get("fuzz", {}).get("findings", [])
    sys.exit(1 if findings or "error" in summary.get("resources", {}) else 0)


def _device_name(dry_run):
    if dry_run:
        return "dry run (interpreter as the device)"
    import torch

    if not torch.cuda.is_available():
        sys.exit("no CUDA GPU visible; use --dry-run to check the script without one")
    return f"{torch.cuda.get_device_name()} (sm_{''.join(map(str, torch.cuda.get_device_capability()))})"


if __name__ == "__main__":
    main()
