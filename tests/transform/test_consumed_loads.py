"""analysis/consumed_loads.py and its use by warp_specialize (TL_EXPERIMENT=
no_consumed_release_fence): no proxy fence before a stage's hand-back when every ordinary load
of the stage feeds a register-operand wgmma issued before it; the fence stays otherwise and
without the experiment. No GPU needed (tests/gpu/test_consumed_loads.py runs the kernels)."""

from __future__ import annotations

import pytest

import tilelang

from consumed_loads_kernels import score_step
from transform_helpers import SM90, requires_compiler

EXPERIMENT = "no_consumed_release_fence"


def _loop_before_hand_back(src):
    consumer = src[src.index("thread_group: ('consumer'"):]
    loop = consumer[consumer.index("for (int k = 0;"):]
    return loop[:loop.index("tl::mbarrier_arrive((&empty_bar")]


@pytest.mark.parametrize("masked", [False, True])
def test_loads_feeding_a_wgmma_need_no_fence(monkeypatch, masked):
    monkeypatch.setenv("TL_EXPERIMENT", EXPERIMENT)
    loop = _loop_before_hand_back(tilelang.lower(score_step(512, masked=masked), target=SM90))
    assert "l_s[" in loop and "wgmma_gemm_rs" in loop  # the stage read, then the wgmma
    assert "fence_proxy_async" not in loop, loop


@pytest.mark.parametrize("masked", [False, True])
def test_without_the_experiment_the_fence_stays(masked):
    loop = _loop_before_hand_back(tilelang.lower(score_step(512, masked=masked), target=SM90))
    assert loop.rindex("l_s[") < loop.index("tl::fence_proxy_async();"), loop


def test_loads_no_wgmma_consumes_keep_the_fence(monkeypatch):
    """L also goes into an accumulator read only after the loop: the instruction adding it may
    run after the hand-back, so its load must be fenced."""
    monkeypatch.setenv("TL_EXPERIMENT", EXPERIMENT)
    loop = _loop_before_hand_back(tilelang.lower(score_step(512, also_sum=True), target=SM90))
    assert loop.rindex("l_s[") < loop.index("tl::fence_proxy_async();"), loop


@requires_compiler
def test_compiles_for_sm90a(monkeypatch):
    monkeypatch.setenv("TL_EXPERIMENT", EXPERIMENT)
    kern = tilelang.compile(score_step(512, masked=True), target=SM90)
    assert "fence_proxy_async" in kern.get_kernel_source()  # the K tile's, before the loop
