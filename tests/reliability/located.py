"""What the rejection suites (test_rejections.py, test_adversarial_programs.py) share: the
lines a kernel builder marks with `# <-`, building for a target, and the checks every located
rejection must pass."""

from __future__ import annotations

import inspect

import tilelang


def marked_lines(fn) -> list:
    """The line numbers of `fn`'s source that carry a `# <-` mark."""
    lines, first = inspect.getsourcelines(fn)
    return [first + i for i, line in enumerate(lines) if "# <-" in line]


def build_for(func, target):
    """Compile for the interpreter (`cpu`), or lower for a CUDA target (no GPU needed)."""
    if target == "cpu":
        return tilelang.compile(func, target="cpu")
    return tilelang.lower(func, target=target)


def check_located(err, words, filename: str, lineno: int):
    """The message names every word; the error points at `filename:lineno` and shows it."""
    text = str(err)
    for w in words:
        assert w in text, f"the message does not name {w!r}:\n{text}"
    assert err.loc is not None, f"no source location:\n{text}"
    assert err.loc.filename == filename, f"points at {err.loc}, not at the kernel:\n{text}"
    assert err.loc.lineno == lineno, f"points at the wrong line:\n{text}"
    assert err.loc.source_line.strip() in text  # the rendered error shows the user's line
