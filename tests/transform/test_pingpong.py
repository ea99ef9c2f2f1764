"""Consumer warpgroups taking turns to issue wgmma (transform/pingpong.py): where the turns go
in the generated CUDA, that every named barrier is balanced, and when the pass stays away.
No GPU needed (tests/gpu/test_pingpong.py runs the kernels)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import tilelang
from tilelang.ir import nodes as ir

from overlap_kernels import gemm_chain
from transform_helpers import SM80, SM90, externs, nodes, requires_compiler, run_passes

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "examples"))
from example_helpers import load_example  # noqa: E402

OFF = {"tl.disable_warpgroup_pingpong": True}


def _example(name):
    return load_example(ROOT / "examples" / "flash_attention" / f"{name}.py")


def _mha(causal=False, **cfg):
    cfg = cfg or dict(block_M=128, block_N=128, num_stages=2, threads=256)
    return _example("example_mha_fwd").flash_attention_fwd.get_tir(2, 4, 1000, 128, causal,
                                                                   **cfg)


def _turn_calls(src):
    return re.findall(r"tl::wg_turn_(\w+)<(\d+), (\d+)>\(\)", src)


def _bursts(src):
    """The text between each turn wait and the pass that follows it."""
    out, pos = [], 0
    while True:
        i = src.find("tl::wg_turn_wait", pos)
        if i < 0:
            return out
        j = src.index("tl::wg_turn_pass", i)
        out.append(src[i:j])
        pos = j


def _pipelined(causal=False, **cfg):
    cfg = cfg or dict(block_M=128, block_N=128, num_stages=2, threads=256)
    ex = _example("example_mha_fwd_pipelined")
    return ex.flash_attention_fwd_pipelined.get_tir(2, 4, 1000, 128, causal, **cfg)


def _no_barrier_in_a_turn(src):
    for b in _bursts(src):
        assert "named_barrier" not in b and "__syncthreads" not in b, b


def test_fa3_schedule_takes_turns():
    src = tilelang.lower(_pipelined(), target=SM90)
    calls = _turn_calls(src)
    kinds = [c[0] for c in calls]
    # the first turn is handed out once, before anything else; the last one taken at the end
    assert kinds[0] == "start" and kinds[-1] == "finish"
    assert kinds.count("start") == kinds.count("finish") == 1
    # prologue S(0), the steady loop's burst, epilogue P(n-1) V(n-1)
    assert kinds.count("wait") == kinds.count("pass") == 3
    assert {(c[1], c[2]) for c in calls} == {("2", "2")}
    for b in _bursts(src):
        # issued without waiting inside the turn: the waits come after the pass
        assert "wgmma_wait" not in b
        assert all(re.search(r", -1(, true)?$", g)
                   for g in re.findall(r"tl::wgmma_gemm_\w+<([^>]*)>", b))
        assert "exp2" not in b and "shfl" not in b  # the softmax runs outside any turn
    _no_barrier_in_a_turn(src)


def test_fa3_schedule_issues_both_gemms_in_one_turn():
    """order/stage schedule: S(k) and P(k-1) V(k-1) are one burst, the rescale of O between."""
    ex = _example("example_mha_fwd_pipelined")
    src = tilelang.lower(ex.programs("bench")[0][1], target=SM90)
    loop = src[src.index("for (int k = 1"):]
    burst = _bursts(loop)[0]
    assert burst.count("tl::wgmma_gemm") == 2
    assert "wgmma_gemm_ss" in burst and "wgmma_gemm_rs" in burst
    assert "acc_o[" in burst  # the rescale of O rides inside the turn
    assert "named_barrier" not in burst and "__syncthreads" not in burst


def test_every_barrier_balanced_on_every_path():
    """Warpgroup w waits on barrier 2+w and passes to 2+(w+1)%n the same number of times;
    start adds one pass to barrier 2 and finish one wait on it."""
    k, _ = run_passes(gemm_chain(300, 500, 64, block_M=128, threads=256), "pingpong",
                      target=SM90)
    names = externs(k.body, "tl::wg_turn")
    assert names.count("tl::wg_turn_wait<2, 2>") == names.count("tl::wg_turn_pass<2, 2>") > 0
    assert names.count("tl::wg_turn_start<2, 2>") == 1
    assert names.count("tl::wg_turn_finish<2, 2>") == 1
    # every gemm of the consumers is inside a turn and asynchronous
    gemms = nodes(k.body, ir.Gemm)
    assert gemms and all(g.wg_wait == -1 for g in gemms)


def test_three_warpgroups_rotate():
    src = tilelang.lower(_pipelined(block_M=192, block_N=128, num_stages=2, threads=384),
                         target=SM90)
    assert {(c[1], c[2]) for c in _turn_calls(src)} == {("2", "3")}
    _no_barrier_in_a_turn(src)


@pytest.mark.parametrize("causal", [False, True])
def test_no_consumer_barrier_inside_a_turn(causal):
    """The Q tile's barrier before the first S = Q K^T goes before the turn is taken: the
    other warpgroups are waiting for the turn and would never reach it."""
    for cfg in (dict(), dict(block_M=128, block_N=64, num_stages=3, threads=256)):
        src = tilelang.lower(_pipelined(causal, **cfg), target=SM90)
        assert "wg_turn_wait" in src
        _no_barrier_in_a_turn(src)


@pytest.mark.parametrize("why,func,target,configs", [
    ("turned off", lambda: _pipelined(), SM90, OFF),
    ("sm_80 has no wgmma", lambda: _pipelined(), SM80, None),
    # without the derived overlap schedule (overlap_schedule.auto_schedule), the plain loop
    # issues a gemm on each side of the softmax
    ("a burst on each side of the softmax", lambda: _mha(), SM90,
     {"tl.disable_wgmma_overlap": True}),
    ("one consumer warpgroup", lambda: _pipelined(block_M=64, block_N=64, num_stages=2,
                                                  threads=128), SM90, None),
    ("one consumer warpgroup", lambda: _mha(block_M=64, block_N=64, num_stages=2,
                                            threads=128), SM90, None),
    ("no warp specialisation", lambda: _mha(block_M=128, block_N=64, num_stages=1,
                                            threads=256), SM90, None),
])
def test_left_alone(why, func, target, configs):
    src = tilelang.lower(func(), target=target, pass_configs=configs)
    assert "wg_turn" not in src, why


def test_gemm_main_loop_left_alone():
    """A loop that only accumulates keeps its warpgroups free-running."""
    from tests.gpu.kernels import gemm

    src = tilelang.lower(gemm(1024, 1024, 1024, 128, 256, 64, threads=256, num_stages=3),
                         target=SM90)
    assert "wgmma" in src and "wg_turn" not in src


@requires_compiler
def test_verbose_note(capsys):
    tilelang.compile(_pipelined(), target=SM90, verbose=True)
    assert "warpgroup ping-pong: 2 consumer warpgroups" in capsys.readouterr().err


@requires_compiler
@pytest.mark.parametrize("causal", [False, True])
def test_compiles_for_sm90a(causal):
    kern = tilelang.compile(_pipelined(causal), target=SM90)
    assert "wg_turn_wait" in kern.get_kernel_source()
    assert kern.n_spills == 0
