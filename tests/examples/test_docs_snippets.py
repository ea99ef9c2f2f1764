"""Every ```python block of docs/tutorial.md and docs/debugging.md runs as written (each as its
own file, since kernels need a source file), on the CPU interpreter here and on the GPU where
there is one. A block that prints a traceback or exits non-zero fails the test."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from example_helpers import ROOT

DOCS = ("tutorial.md", "debugging.md")


def _blocks():
    out = []
    for doc in DOCS:
        text = (ROOT / "docs" / doc).read_text()
        for n, m in enumerate(re.finditer(r"```python\n(.*?)```", text, re.S)):
            line = text[:m.start()].count("\n") + 1
            out.append(pytest.param(m.group(1), id=f"{doc}:{line}"))
    return out


def test_docs_have_snippets():
    assert len(_blocks()) >= 8


@pytest.mark.parametrize("code", _blocks())
def test_snippet_runs(code, tmp_path):
    path = tmp_path / "snippet.py"
    path.write_text(code)
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-4000:])
