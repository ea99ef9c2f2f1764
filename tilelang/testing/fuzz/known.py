"""What the fuzzer expects besides correct results: open compiler defects, and programs the
compiler is meant to refuse.

`KNOWN` lists open defects that generated programs hit, each with the regular expression of
the error it produces and the xfail test in tests/reliability/test_known_bugs.py that
reproduces it minimally. The seeded CI fuzz tests mark a case that fails this way as an
expected failure (and pass it as soon as the defect is fixed); the device script counts such
failures apart from new findings. A fixed defect leaves this table (its test stays, without
the xfail marker), so that a regression is reported instead of excused. Empty: the lower-rank
layout, pipelined-reduce and tile-atomic start-point defects are fixed (the last lower-rank
case, fuzz seed 140992, in the fifth session).

`UNSUPPORTED` lists the rejections a valid generated program may get because the target or
the compiler does not support what it asks for. Any other located rejection of a generated
program (they are all valid TileLang) is a defect: the device script reports it as a
finding ("rejected_valid").
"""

from __future__ import annotations

import re

KNOWN: tuple = ()

UNSUPPORTED = (
    ("float64-gemm", r"T\.gemm on (the CUDA cores \()?float64 operands.*takes A and B from shared",
     "float64 gemms run on the CUDA cores, whose gemm reads both operands from shared memory "
     "(both targets refuse register operands)"),
    ("fp8-before-sm89", r"needs FP8 tensor cores \(sm_89 or newer\)",
     "FP8 mma exists from sm_89 on"),
    ("shared-memory-limit", r"kernel needs \d+ bytes of shared memory but sm_\w+ allows",
     "the plain gemm family draws tiles and stages without bounding their bytes (its recorded "
     "seeds keep their programs; the odd-tile and persistent families fit theirs): a draw "
     "larger than the target's shared memory is a program no GPU can run"),
)


def _match(table, exc_or_text) -> str | None:
    """The name of the first entry of `table` whose pattern the error's text matches."""
    text = exc_or_text if isinstance(exc_or_text, str) else \
        f"{type(exc_or_text).__name__}: {exc_or_text}"
    return next((name for name, pattern, _ in table if re.search(pattern, text)), None)


def known_bug(exc_or_text) -> str | None:
    """The name of the known defect that produced this error, or None."""
    return _match(KNOWN, exc_or_text)


def expected_rejection(exc_or_text) -> str | None:
    """The name of the unsupported feature this rejection is about, or None (a defect)."""
    return _match(UNSUPPORTED, exc_or_text)
