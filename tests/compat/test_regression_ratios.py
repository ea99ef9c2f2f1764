"""scripts/compat/regression_ratios.py: reference / ours kernel-time ratios of regression rows
measured side by side, their geometric mean and the functions below 0.95x."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _row(fn, kernels, ok=True):
    return json.dumps({"file": "x/regression_x.py", "fn": fn, "ok": ok,
                       "runs": [{"ms": 0.1, "kernels": kernels}]})


def test_ratios_geomean_and_slow_functions(tmp_path):
    (tmp_path / "profile_ref_x.jsonl").write_text("\n".join([
        _row("regression_a", [["k1", 30.0], ["k2", 10.0]]),
        _row("regression_b", [["k", 10.0], ["Memcpy HtoD", 99.0]]),
        _row("regression_c", [["k", 5.0]]),
        _row("regression_only_ref", [["k", 1.0]])]) + "\n")
    (tmp_path / "call2_profile_ours_x.jsonl").write_text("\n".join([
        _row("regression_a", [["k", 20.0]]),  # 2.0x
        _row("regression_b", [["k", 12.5]]),  # 0.8x (the memcpy is not kernel time)
        _row("regression_c", [["k", 1.0]], ok=False)]) + "\n")
    out = subprocess.run([sys.executable, str(ROOT / "scripts/compat/regression_ratios.py"),
                          str(tmp_path)], capture_output=True, text=True, check=True).stdout
    assert "2 functions on both sides: geomean 1.265x" in out  # sqrt(2.0 * 0.8)
    assert "below 0.95x: b 0.800x" in out
    assert "only_ref" not in out and " c " not in out
