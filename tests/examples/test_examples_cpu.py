"""Every example runs on the CPU interpreter at its small (ragged) size and matches its torch
reference (the check is inside the example's `run`, on fresh random inputs), and every
example's CUDA programs lower and compile with NVRTC for sm_80 and sm_90a (compile only: no
GPU needed). Known compiler problems are strict xfails naming the exact error."""

from __future__ import annotations

import math

import pytest

import tilelang
from tilelang.errors import KernelValueError
from tilelang.runtime import toolkit
from tilelang.runtime.compiler import CudaCompileError, compile_cuda

from example_helpers import EXAMPLES, example_id, example_programs, load_example

DEFAULT_ARCHS = ("sm_80", "sm_90a")

# Programs that are valid (SEMANTICS.md) but that the compiler cannot build yet.
KNOWN_COMPILE_FAILURES = {}


def _example_params():
    return [pytest.param(p, id=example_id(p)) for p in EXAMPLES]


def _compile_params():
    out = []
    for p in EXAMPLES:
        archs = getattr(load_example(p), "ARCHS", DEFAULT_ARCHS)
        marks = [KNOWN_COMPILE_FAILURES[example_id(p)]] if example_id(p) in \
            KNOWN_COMPILE_FAILURES else []
        out += [pytest.param(p, a, id=f"{example_id(p)}-{a}", marks=marks) for a in archs]
    return out


def test_every_topic_has_examples():
    topics = {p.parent.name for p in EXAMPLES}
    assert {"elementwise", "gemm", "flash_attention", "flash_decoding", "deepseek_mla",
            "dequantize_gemm", "linear_attention", "sparse_attention", "convolution",
            "softmax", "norm"} <= topics
    assert len(EXAMPLES) >= 17


@pytest.mark.parametrize("path", _example_params())
def test_example_runs_on_cpu(path):
    module = load_example(path)
    cases = module.run("cpu", "small")
    assert cases, "run() returned no cases"
    for case in cases:
        assert {"name", "tilelang", "baseline", "baseline_name", "error"} <= set(case)
        assert case.get("flops") or case.get("bytes"), case["name"]
        assert math.isfinite(case["error"]) and case["error"] >= 0.0
        assert callable(case["tilelang"])


requires_nvrtc = pytest.mark.skipif(toolkit.nvrtc_backend() is None and
                                    toolkit.nvcc_path() is None,
                                    reason="neither NVRTC (pip install nvidia-cuda-nvrtc) nor "
                                           "nvcc is installed")


@requires_nvrtc
@pytest.mark.parametrize("path,arch", _compile_params())
def test_example_compiles_for_cuda(path, arch, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))  # failed sources land here
    programs = example_programs(load_example(path), "bench", arch)
    assert programs
    for name, func in programs:
        source = tilelang.lower(func, target=f"cuda -arch={arch}")
        assert "__global__" in source, name
        result = compile_cuda(source, arch, name=name, use_cache=False)
        assert result.cubin, name


def test_flash_bwd_eight_warps_lowers():
    """A fragment copy between different register layouts (gemm accumulator -> register A
    operand of the next gemm, 8 warps on 64 key rows) is staged through shared memory."""
    bwd = load_example(next(p for p in EXAMPLES if p.stem == "example_mha_bwd"))
    func = bwd.flash_bwd.get_tir(2, 4, 1024, 128, False, block_M=64, block_N=32,
                                 num_stages=2, threads=256)
    tilelang.lower(func, target="cuda -arch=sm_90a")


def test_run_all_plumbing(tmp_path):
    """benchmarks/run_all.py end to end on the CPU interpreter (--cpu): rows, markdown, chart."""
    import subprocess
    import sys

    from example_helpers import ROOT

    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "--cpu",
                           "--only", "softmax,elementwise", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = (tmp_path / "results.md").read_text()
    for kernel in ("softmax fp16", "vector add fp16", "gelu fp16", "bias+gelu fp16"):
        assert kernel in table
    assert "FAILED" not in table
    pytest.importorskip("matplotlib")
    assert (tmp_path / "speedup.png").stat().st_size > 1000


def test_autotune_benchmark_plumbing():
    """benchmarks/autotune_gemm.py --cpu: the tuning call returns the best of its configs."""
    import subprocess
    import sys

    from example_helpers import ROOT

    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "autotune_gemm.py"),
                           "--cpu"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "autotuned GEMM 64^3 over 2 configs" in proc.stdout
    assert "max error" in proc.stdout
