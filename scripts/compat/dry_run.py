"""Runs the reference TileLang's GPU test files here, without a GPU: every kernel is compiled
for sm_90a and nothing executes (see dryrun_plugin.py). A fast local measure of how much of a
corpus of programs written for the reference this project accepts and builds.

    python scripts/compat/dry_run.py EXAMPLES_OR_TESTING_DIR OUT.jsonl [substring ...]
    python scripts/compat/dry_run.py --scripts EXAMPLES_DIR OUT.jsonl [substring ...]

`--scripts` runs every `example_*.py` as a program (its `__main__`, default arguments)
instead of the test files: the "every example builds" measure.

One pytest process per test file (JOBS at a time, PER_FILE_S seconds each); OUT gets one JSON
line per test: outcome, the kernels built, and for a failure the error, where it was raised and
whether it is the project's (a tilelang error or a failed build) or the harness's (meta tensors
have no values).
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))


SCRIPT_RUNNER = """
import json, runpy, sys, traceback
import dryrun_plugin as P
sys.argv = [sys.argv[1]]
row = {"test": sys.argv[0], "outcome": "passed"}
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as e:
    if e.code not in (0, None):
        row.update(outcome="failed", error=f"SystemExit: {e.code}")
except BaseException as e:
    frames = traceback.extract_tb(e.__traceback__)
    row.update(outcome="failed", error=f"{type(e).__name__}: {str(e)[:1000]}",
               where=f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "",
               project=type(e).__module__.startswith("tilelang") or any(
                   not b["ok"] for b in P._builds))
row["builds"] = list(P._builds)
P._record(row)
"""


def run_file(path, per_file_s, script=False):
    d, f = os.path.split(path)
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl", delete=False) as log:
        env = dict(os.environ, DRYRUN_LOG=log.name,
                   PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
        cmd = [sys.executable, "-c", SCRIPT_RUNNER, f] if script else \
            [sys.executable, "-m", "pytest", "-q", "-p", "dryrun_plugin", "-p",
             "no:cacheprovider", "--tb=no", f]
        try:
            p = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True,
                               timeout=per_file_s)
            tail = (p.stdout.strip().splitlines() or [""])[-1]
        except subprocess.TimeoutExpired:
            tail = "timeout"
        rows = [json.loads(line) for line in open(log.name) if line.strip()]
    os.unlink(log.name)
    if not rows:
        rows = [{"test": f, "outcome": "failed", "error": tail, "project": None, "builds": []}]
    for r in rows:
        r["file"] = os.path.relpath(path)
    return rows, tail


def main():
    args = sys.argv[1:]
    script = args[:1] == ["--scripts"]
    if script:
        args = args[1:]
    root, out = args[0], args[1]
    subs = args[2:]
    pattern = "example_*.py" if script else "test_*.py"
    files = sorted(glob.glob(os.path.join(root, "**", pattern), recursive=True))
    if subs:
        files = [f for f in files if any(s in f for s in subs)]
    per = int(os.environ.get("PER_FILE_S", "300"))
    with ThreadPoolExecutor(int(os.environ.get("JOBS", "2"))) as ex, open(out, "w") as fo:
        for rows, tail in ex.map(lambda f: run_file(f, per, script), files):
            for r in rows:
                fo.write(json.dumps(r) + "\n")
            fo.flush()
            print(f"{rows[0]['file']}: {tail}", flush=True)


if __name__ == "__main__":
    main()
