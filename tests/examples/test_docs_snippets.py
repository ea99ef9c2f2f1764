"""Every code block of README.md and docs/*.md runs as written, so the docs cannot drift.

A ```python block runs as its own file (kernels need a source file) in a fresh process, on the
CPU interpreter here and on the GPU where there is one; a traceback or a non-zero exit fails
it. A block that is not a Python program says why on the line before its fence:

    <!-- docs-test: skip REASON -->

with REASON one of `SKIP_REASONS`. The test counts the opt-outs per reason (`EXPECTED_SKIPS`),
so a new one is a deliberate change of this file; and it fails on an indented code block,
which could hide a program from it.
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys

import pytest

from example_helpers import ROOT

DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
MARKER = re.compile(r"^\s*<!-- docs-test: skip (\w+) -->\s*$")
SKIP_REASONS = {
    "shell": "commands for a shell (install steps and scripts; CI runs its own)",
    "output": "what a program prints or raises, shown as text",
    "diagram": "a drawing of the compiler's structure",
    "gpu": "a program that needs a CUDA GPU",
}
EXPECTED_SKIPS = {
    "shell": 8,    # README: CPU torch, quickstart, tests; debugging: TILELANG_DUMP_IR;
                   # reliability: a fuzz case's source, reproducing findings, the GPU parts
    "output": 4,   # debugging: a compiler error and a warning; profiling: an
                   # assert_allclose failure and the autotuner's report lines
    "diagram": 1,  # architecture: the pipeline
    "gpu": 0,
}


def _blocks():
    """(doc name, line, language, code, skip reason or None) for every fenced block."""
    out = []
    for path in DOCS:
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            m = re.match(r"^(\s*)```(\w*)", lines[i])
            if not m:
                i += 1
                continue
            indent, lang, start = len(m.group(1)), m.group(2), i
            body = []
            i += 1
            while not re.match(r"^\s*```\s*$", lines[i]):
                body.append(lines[i][indent:])
                i += 1
            prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
            skip = MARKER.match(prev)
            out.append((path.name, start + 1, lang, "\n".join(body) + "\n",
                        skip.group(1) if skip else None))
            i += 1
    return out


def _indented_blocks():
    """Indented code blocks: a line indented 4+ spaces after a blank line, outside fences and
    not continuing a list item."""
    found = []
    for path in DOCS:
        fenced, prev, context = False, "", ""
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.match(r"^\s*```", line):
                fenced = not fenced
            elif (not fenced and not prev.strip() and line.startswith("    ") and line.strip()
                  and not re.match(r"^\s*([*+-]|\d+\.)\s", context)):
                found.append(f"{path.name}:{n}: {line.strip()}")
            if line.strip() and not line.startswith("    "):
                context = line
            prev = line
    return found


BLOCKS = _blocks()
RUN = [pytest.param(code, id=f"{doc}:{line}") for doc, line, lang, code, skip in BLOCKS
       if skip is None]


def test_every_block_runs_or_says_why_not():
    problems = []
    for doc, line, lang, code, skip in BLOCKS:
        if skip is not None and skip not in SKIP_REASONS:
            problems.append(f"{doc}:{line}: unknown reason {skip!r} (one of {list(SKIP_REASONS)})")
        if skip is None and lang != "python":
            problems.append(f"{doc}:{line}: a ```{lang or '(no language)'} block is not run: "
                            "make it a ```python program or mark it with a reason")
    problems += [f"{where}: indented code block; fence it" for where in _indented_blocks()]
    assert not problems, "\n".join(problems)
    counts = collections.Counter(skip for *_, skip in BLOCKS if skip is not None)
    assert dict(counts) == {k: v for k, v in EXPECTED_SKIPS.items() if v}, counts
    assert len(RUN) >= 20  # README 1, tutorial 6, debugging 4, lazy_jit 3, layouts 3, profiling 3


@pytest.mark.parametrize("code", RUN)
def test_block_runs(code, tmp_path):
    path = tmp_path / "snippet.py"
    path.write_text(code)
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=600)  # the timeout guards a hang
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-4000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]


def test_docs_name_only_files_that_exist():
    """Links, and the names of documents (`*.md`), point at files of the repository: a page that
    cites a document its readers do not have is drift too."""
    missing = []
    for path in DOCS:
        text = path.read_text()
        names = set(re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text))
        names |= set(re.findall(r"(?<![\w/.-])([\w./-]+\.md)\b", text))
        for name in names:
            if name.startswith(("http://", "https://")):
                continue
            bases = (path.parent, ROOT, ROOT / "docs")
            if not any((base / name).exists() for base in bases):
                missing.append(f"{path.name}: {name}")
    assert not missing, "\n".join(sorted(missing))
