"""Known compiler defects that generated programs hit, recognised by their error text.

Each entry names the defect, the regular expression of the error it produces and the xfail
test in tests/reliability/test_known_bugs.py that reproduces it minimally. The seeded CI fuzz
tests mark a case that fails this way as an expected failure (and pass it as soon as the defect
is fixed); the device script counts such failures apart from new findings.
"""

from __future__ import annotations

import re

KNOWN = (
    ("lower-rank-layout",
     r"is read across threads in this T\.Parallel loop|register slot differs between threads",
     "test_fill_then_reduce_then_row_broadcast / test_copied_row_vector_broadcast / "
     "test_reduce_into_temporary_then_combine / test_unit_height_tile"),
    ("pipelined-reduce", r"reductions on pipelined copy destinations",
     "test_reduce_of_a_pipelined_shared_tile"),
    ("atomic-tile-start-point", r"used as a scalar value; index it",
     "test_tile_atomic_add_with_a_start_point_destination"),
)


def known_bug(exc_or_text) -> str | None:
    """The name of the known defect that produced this error, or None."""
    text = exc_or_text if isinstance(exc_or_text, str) else f"{type(exc_or_text).__name__}: " \
                                                           f"{exc_or_text}"
    for name, pattern, _ in KNOWN:
        if re.search(pattern, text):
            return name
    return None
