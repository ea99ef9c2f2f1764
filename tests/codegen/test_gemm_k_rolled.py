"""codegen/gemm_sm80.py, experiment `mma_k_loop_rolled`: an mma.sync gemm in a kernel whose
fragments leave a thread fewer than 32 registers runs its k-steps as a loop (tl::gemm_ss
KRolled); other kernels, and every kernel without the experiment, keep the unrolled steps.
No GPU needed (tests/gpu/test_gemm_k_rolled.py runs the kernels)."""

from __future__ import annotations

import re

import pytest

import tilelang

from rolled_gemm_kernels import dq_step

SM90 = "cuda -arch=sm_90a"
EXPERIMENT = "mma_k_loop_rolled"


def _gemm_ss(src):
    return re.findall(r"tl::gemm_ss<([^>]*)>", src)


def test_fragments_near_the_budget_roll_the_k_steps(monkeypatch):
    monkeypatch.setenv("TL_EXPERIMENT", EXPERIMENT)
    (args,) = _gemm_ss(tilelang.lower(dq_step(0, keep=208), target=SM90))
    assert args.endswith(", true"), args


def test_fragments_with_room_keep_the_unrolled_steps(monkeypatch):
    monkeypatch.setenv("TL_EXPERIMENT", EXPERIMENT)
    (args,) = _gemm_ss(tilelang.lower(dq_step(0, keep=64), target=SM90))
    assert not args.endswith(", true"), args


def test_without_the_experiment_nothing_rolls():
    (args,) = _gemm_ss(tilelang.lower(dq_step(0, keep=208), target=SM90))
    assert not args.endswith(", true"), args


@pytest.mark.parametrize("keep", [208, 64])
def test_compiles_for_sm90a(monkeypatch, keep):
    monkeypatch.setenv("TL_EXPERIMENT", EXPERIMENT)
    kern = tilelang.compile(dq_step(0, keep=keep), target=SM90)
    assert "tl::gemm_ss<" in kern.get_kernel_source()
