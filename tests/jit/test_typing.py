"""Type checkers accept the subscript spellings of lazy-JIT annotations (py.typed + stubs)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = Path(__file__).with_name("typing_sample.py")


def test_mypy_accepts_subscript_annotations(tmp_path):
    pytest.importorskip("mypy")
    env = dict(os.environ, MYPYPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-error-summary",
         "--cache-dir", str(tmp_path / "cache"), str(SAMPLE)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_still_reports_real_errors(tmp_path):
    pytest.importorskip("mypy")
    bad = tmp_path / "bad.py"
    bad.write_text("import tilelang.language as T\n\n"
                   "def f(A: T.Tensor[[int], T.float16]) -> int:\n"
                   "    return 'not an int'\n")
    env = dict(os.environ, MYPYPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--cache-dir",
         str(tmp_path / "cache"), str(bad)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 1 and "Incompatible return value" in proc.stdout


def test_pyright_accepts_subscript_annotations(tmp_path):
    exe = shutil.which("pyright")
    if exe is None:
        pytest.skip("pyright is not installed")
    (tmp_path / "pyrightconfig.json").write_text('{"extraPaths": ["%s"]}' % REPO)
    target = tmp_path / SAMPLE.name
    target.write_text(SAMPLE.read_text())
    try:
        proc = subprocess.run([exe, str(target)], capture_output=True, text=True, cwd=tmp_path,
                              timeout=300)
    except subprocess.TimeoutExpired:
        pytest.skip("pyright did not start (no network for its first-run download?)")
    if "0 errors" not in proc.stdout and " error" not in proc.stdout:
        pytest.skip(f"pyright did not run: {proc.stdout[-300:]}{proc.stderr[-300:]}")
    assert "0 errors" in proc.stdout, proc.stdout
