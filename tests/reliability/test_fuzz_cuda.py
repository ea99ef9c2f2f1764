"""Seeded fuzzing of the CUDA backend.

Without a GPU: every checked-in program (the first seeds and every finding below) either lowers
and compiles with NVRTC (or nvcc) for sm_80 and sm_90a, or is rejected with a located error that points into the program's own source (never an
internal error, never CUDA that NVRTC refuses). With a GPU (`-m gpu`): the same programs run on
the device and on the interpreter with the same inputs and must agree with each other and with
the numpy oracle.

`GPU_FINDINGS` holds the seeds of programs the device fuzzer (scripts/device_reliability.py)
found miscompiled; they stay here as regression tests (CPU: interpreter against oracle; GPU:
the full comparison).
"""

from __future__ import annotations

import numpy as np
import pytest

import tilelang
from tilelang.errors import KernelError
from tilelang.runtime import compile_cuda, toolkit
from tilelang.runtime.compiler import CudaCompileError
from tilelang.testing import fuzz
from tilelang.testing.fuzz.known import expected_rejection, known_bug

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")

# seed -> an internal error the device fuzzer saw while lowering (now a located rejection)
LOWERING_FINDINGS: dict = {
    51350: "float64 T.gemm with A in a fragment: layout inference asked for an mma.sync operand "
           "layout before the dtype check and raised a bare ValueError (H200, 2026-11-22; "
           "also seeds 53386, 53791)",
}
GPU_SEEDS = range(0, 60)
# seed -> what the device fuzzer saw (filled in from device runs; see docs/reliability.md)
GPU_FINDINGS: dict = {
    472: "vectorised stores written back after a later statement of the same iteration read "
         "the element (H200, 2026-11-21)",
    1103: "same defect, int32 bitwise chain",
    640: "warp specialisation multi-buffered a shared tile that a reduction reads whole: "
         "the kernel referenced an undefined buffer (NVRTC error)",
    62946: "float8_e5m2 gemm on wgmma off by ~2^-14 relative: Hopper's FP8 accumulation "
           "precision, not a miscompile; the oracle's tolerance now models it (also 61731, "
           "62103, 62399, 64703; H200, 2026-11-22)",
    120696: "float16 2*x^3 for |x| ~ 0.01 lands among the subnormals: GPU and interpreter agree, "
            "the oracle's relative-only rounding bound missed one subnormal step; the bound now "
            "adds the subnormal spacing (H200, 2026-11-22)",
    140992: "a loop reading two lower-rank fragments (R[i], C[j]) extended R's layout, under "
            "which threads read C elements they do not hold: rejected as 'read across threads' "
            "(counted as the known lower-rank-layout defect); the loop now extends the one "
            "both can be read under (H200, 2026-11-22, fifth session)",
    192554: "a gather whose 4-lane vectors span two rows of X (row 2m + k // 2): the vector's "
            "bounds check looked at the first lane's row only, so the last lanes read past X "
            "instead of zeros; every row a vector touches is bounded now (also 192125; H200, "
            "2026-11-22, sixth session)",
    192125: "same defect, bfloat16, rows of four",
}
# every checked-in seed builds: the first 14, and every finding
COMPILE_SEEDS = sorted(set(range(0, 14)) | set(LOWERING_FINDINGS) | set(GPU_FINDINGS))


def _rejected_at_users_line(case, exc: KernelError):
    assert expected_rejection(exc), \
        f"a valid program was refused (not an unsupported feature in fuzz/known.py):\n{exc}" \
        f"\n\n{case.source}"
    loc = exc.loc
    assert loc is not None, f"rejection without a source location:\n{exc}"
    assert loc.filename.endswith(f"fuzz_{case.name}.py"), \
        f"the error points at {loc}, not at the program:\n{exc}"
    n_lines = case.source.count("\n")
    assert 1 <= loc.lineno <= n_lines, f"line {loc.lineno} is outside the program:\n{exc}"


@requires_compiler
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("seed", COMPILE_SEEDS)
def test_compiles_or_is_rejected_at_the_users_line(seed, arch):
    _compiles_or_is_rejected(fuzz.generate(seed), arch)


@requires_compiler
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("seed", range(0, 4))
def test_gathers_compile(seed, arch):
    _compiles_or_is_rejected(fuzz.generate(seed, "gather"), arch)


def _compiles_or_is_rejected(case, arch):
    try:
        func = fuzz.load(case)
        source = tilelang.lower(func, target=f"cuda -arch={arch}")
    except Exception as e:  # noqa: BLE001 - sorted below
        if fuzz.classify(e) == "rejected":
            _rejected_at_users_line(case, e)
            return
        bug = known_bug(e)
        if bug:
            pytest.xfail(f"known defect {bug}")
        raise AssertionError(f"internal error lowering a valid program for {arch}: "
                             f"{type(e).__name__}: {e}\n\n{case.source}") from e
    try:
        compile_cuda(source, arch, name=func.name)
    except CudaCompileError as e:
        bug = known_bug(e)
        if bug:
            pytest.xfail(f"known defect {bug}")
        raise AssertionError(f"the generated CUDA does not compile for {arch}:\n{e}\n\n"
                             f"{case.source}") from e


@pytest.mark.parametrize("seed", sorted(GPU_FINDINGS) or [0])
def test_gpu_findings_hold_on_the_interpreter(seed):
    case = fuzz.generate(seed)
    inputs = case.make_inputs(np.random.default_rng(seed))
    try:
        got = fuzz.run_case(case, "cpu", inputs)
    except KernelError as e:
        if known_bug(e):
            pytest.xfail(f"known defect {known_bug(e)}")
        raise
    assert not fuzz.check(case, got, fuzz.expected(case, inputs))


@pytest.mark.gpu
@pytest.mark.parametrize("seed", sorted(set(GPU_SEEDS) | set(GPU_FINDINGS)))
def test_gpu_matches_interpreter_and_oracle(seed):
    case = fuzz.generate(seed)
    inputs = case.make_inputs(np.random.default_rng(seed))
    want = fuzz.expected(case, inputs)
    try:
        kernel = fuzz.compile_case(case, "cuda")
    except Exception as e:  # noqa: BLE001 - sorted below
        if known_bug(e):
            pytest.xfail(f"known defect {known_bug(e)}")
        if fuzz.classify(e) == "rejected":
            _rejected_at_users_line(case, e)
            return
        raise
    gpu = fuzz.run_kernel(case, kernel, inputs, device="cuda")
    try:
        cpu = fuzz.run_case(case, "cpu", inputs)
    except KernelError as e:
        if known_bug(e):
            pytest.xfail(f"known defect {known_bug(e)} (interpreter)")
        raise
    problems = (fuzz.check(case, gpu, want, "gpu vs oracle: ")
                + fuzz.check(case, cpu, want, "interpreter vs oracle: ")
                + fuzz.agree(gpu, cpu, want, "gpu vs interpreter: "))
    assert not problems, "\n".join(problems) + "\n\n" + case.source
