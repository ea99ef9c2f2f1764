"""What the autotuner prints: one line per skipped configuration (with the reason) and a summary.

Reasons are one line: the exception type and the first line of its message (compiler errors put
the problem on their first line and the source excerpt below), cut at 240 characters.
"""

from __future__ import annotations

_MAX = 240


def reason_of(exc: BaseException, with_type: bool = True) -> str:
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    if with_type:
        first = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return first if len(first) <= _MAX else first[: _MAX - 3] + "..."


def skip_line(name: str, record) -> str:
    return f"[autotune] {name}: skipped config {record.index} {record.config}: " \
           f"{record.status}: {record.reason}"


def print_summary(name: str, records, ref_latency=None, write=None):
    """Print "N configurations: k ok, ... ; best ..." for one tuning run."""
    if write is None:
        from .tuner import _write as write
    ok = [r for r in records if r.status == "ok"]
    counts: dict = {}
    for r in records:
        if r.status != "ok":
            counts[r.status] = counts.get(r.status, 0) + 1
    skipped = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    line = f"[autotune] {name}: {len(records)} configurations, {len(ok)} ok"
    if skipped:
        line += f", skipped {skipped}"
    if ok:
        best = min(ok, key=lambda r: r.latency)
        line += f"; best config {best.index} {best.config}: {best.latency:.4g} ms"
        if ref_latency is not None and ref_latency == ref_latency:
            line += f" (reference program: {ref_latency:.4g} ms)"
    write(line)
