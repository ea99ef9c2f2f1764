"""TILELANG_JIT_DIAGNOSTICS: each JIT phase logs its start, end and time, or its failure."""

import logging

import pytest

import tilelang
import tilelang.language as T
from tilelang.jit.diagnostics import jit_phase


@pytest.fixture
def records(caplog, monkeypatch):
    monkeypatch.setattr(logging.getLogger("tilelang"), "propagate", True)
    caplog.set_level(logging.INFO, logger="tilelang.jit.diagnostics")
    return caplog


def test_phase_logs_start_done_and_context(records):
    with jit_phase("unit", enabled=True, kernel="k", target="cuda -arch=sm_90a"):
        pass
    text = [r.getMessage() for r in records.records]
    assert text[0] == "TileLang JIT phase start: unit kernel='k', target='cuda -arch=sm_90a'"
    assert text[1].startswith("TileLang JIT phase done: unit elapsed=")
    assert "kernel='k'" in text[1]


def test_phase_failure_is_logged_and_reraised(records):
    with pytest.raises(ValueError, match="boom"):
        with jit_phase("unit", enabled=True, backend="nvrtc"):
            raise ValueError("boom")
    failed = [r for r in records.records if "failed" in r.getMessage()]
    assert failed and "backend='nvrtc'" in failed[0].getMessage() and failed[0].exc_info


def test_silent_unless_enabled(records, monkeypatch):
    monkeypatch.delenv("TILELANG_JIT_DIAGNOSTICS", raising=False)
    with jit_phase("unit"):
        pass
    assert not records.records


def test_environment_variable_turns_compile_phases_on(records, monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_JIT_DIAGNOSTICS", "1")
    # a fresh kernel cache: a kernel found on disk (an earlier run's) skips the compile phase
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))

    @T.prim_func
    def diag_probe(A: T.Tensor((32,), T.float32)):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                A[i] = A[i] + 1.0

    tilelang.compile(diag_probe, target="cuda -arch=sm_90a")
    text = [r.getMessage() for r in records.records]
    for phase in ("lower", "compile"):
        assert any(m.startswith(f"TileLang JIT phase start: {phase} ") and "diag_probe" in m
                   for m in text), phase
        assert any(m.startswith(f"TileLang JIT phase done: {phase} ") for m in text), phase
