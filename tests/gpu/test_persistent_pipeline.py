"""A T.Pipelined loop inside a persistent kernel's tile loop on sm_90a (warp_specialize/__init__.py):
the TMA producer runs the tile loop too and fills the next tile's stages while the consumers
finish this one; the mbarrier phases follow a running count of iterations, so tiles whose
loops run 0, 1, 2 or 3 times (any number of stages) stay in step. Outputs NaN-poisoned,
checked against float64, with warp specialisation on and off."""

import pytest
import torch

import tilelang
from tilelang.transform.pass_config import PassConfigKey

from .epilogue_kernels import (persistent, persistent_attention, persistent_conv,
                               persistent_ragged_k, persistent_tile_load, persistent_tiles,
                               ragged_k_reference)
from .hopper import need_sm90

pytestmark = pytest.mark.gpu

WS_OFF = {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}


@pytest.mark.parametrize("ws", [True, False])
@pytest.mark.parametrize("M,N,K,stages,blocks", [
    (300, 264, 128, 2, 4), (300, 264, 128, 3, 3), (1000, 520, 96, 2, 7), (64, 128, 32, 4, 1)])
def test_ragged_trip_counts_stay_in_step(ws, M, N, K, stages, blocks):
    need_sm90()
    torch.manual_seed(M + N + K + stages)
    kern = tilelang.compile(persistent_ragged_k(M, N, K, stages=stages, blocks=blocks),
                            target="cuda", pass_configs=None if ws else WS_OFF)
    host = kern.get_host_source()
    assert ("inside for w, if" in host) == ws, host
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(K, N, device="cuda").half()
    c = torch.full((M, N), float("nan"), device="cuda")
    kern(a, b, c)
    torch.cuda.synchronize()
    assert not torch.isnan(c).any()
    torch.testing.assert_close(c.double(), ragged_k_reference(a, b, M, N), rtol=1e-3,
                               atol=1e-3)


@pytest.mark.parametrize("M,N,K,blocks", [(1000, 1000, 512, 5), (2048, 2048, 1024, 132)])
def test_persistent_gemm_warp_specialised(M, N, K, blocks):
    need_sm90()
    torch.manual_seed(blocks)
    kern = tilelang.compile(persistent(M, N, K, 128, 128, 64, 3, 256, blocks), target="cuda")
    assert "inside for w, if" in kern.get_host_source()
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(K, N, device="cuda").half()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    kern(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("M,N,K,group,blocks", [
    (1000, 1032, 520, 8, 132), (1000, 1032, 520, 3, 7), (4096, 4096, 1024, 8, 132)])
def test_t_persistent_gemm_grouped_order(M, N, K, group, blocks):
    """T.Persistent with grouped tile order, the epilogue's TMA store waited for in the next
    tile (defer_store_waits.py): every tile written once, correct at ragged sizes."""
    need_sm90()
    torch.manual_seed(M + group)
    kern = tilelang.compile(persistent_tiles(M, N, K, 128, 256, 64, 3, 256, blocks, group),
                            target="cuda")
    assert "tma_store(" in kern.get_kernel_source()
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(K, N, device="cuda").half()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    kern(a, b, c)
    torch.cuda.synchronize()
    assert not torch.isnan(c).any()
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("N,C,H,W,F,stride,blocks", [(2, 64, 9, 11, 72, 1, 5), (3, 32, 14, 14, 64, 2, 132)])
def test_persistent_convolution_im2col_producer(N, C, H, W, F, stride, blocks):
    """The TMA im2col load of a persistent convolution, issued by the producer of the tile
    loop: NaN-poisoned output against torch conv2d in float64, ragged tiles."""
    need_sm90()
    torch.manual_seed(C + blocks)
    kern = tilelang.compile(persistent_conv(N, C, H, W, F, stride=stride, blocks=blocks),
                            target="cuda")
    assert "inside for wave, if" in kern.get_host_source()
    assert "im2col" in kern.get_kernel_source()
    x = torch.randn(N, H, W, C, device="cuda").half()
    w = torch.randn(9 * C, F, device="cuda").half()
    OH, OW = (H + 2 - 3) // stride + 1, (W + 2 - 3) // stride + 1
    out = torch.full((N, OH, OW, F), float("nan"), device="cuda", dtype=torch.float16)
    kern(x, w, out)
    torch.cuda.synchronize()
    wt = w.double().reshape(3, 3, C, F).permute(3, 2, 0, 1)
    ref = torch.nn.functional.conv2d(x.double().permute(0, 3, 1, 2), wt, stride=stride,
                                     padding=1).permute(0, 2, 3, 1)
    assert not torch.isnan(out).any()
    torch.testing.assert_close(out.double(), ref, rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("blocks", [3, 2, 1])
def test_stage_read_through_registers_is_fenced_before_the_hand_back(blocks):
    """Fuzz seed 734 of the "persistent" family (H200, 2026-11-22): A goes from the stage into
    registers with ordinary loads, the tile loop reuses a stage across tiles at a position the
    first tile did not, and the next TMA load of the stage overwrote it before those loads
    had read it (a third of C wrong) until a proxy fence preceded the consumers' arrival."""
    import numpy as np

    from tilelang.testing import fuzz
    from tilelang.testing.fuzz import fam_gemm

    need_sm90()
    spec = dict(fuzz.generate(734, "persistent").spec, persistent=(blocks, 8), a_panel=False)
    case = fam_gemm.build(spec, 734)
    kernel = fuzz.compile_case(case, "cuda")
    assert "inside for" in kernel.get_host_source()
    for trial in range(4):
        inputs = case.make_inputs(np.random.default_rng(trial))
        got = fuzz.run_kernel(case, kernel, inputs, device="cuda")
        assert not fuzz.check(case, got, fuzz.expected(case, inputs)), trial


def _attention_reference(q, k, v, causal):
    q, k, v = (x.double().transpose(1, 2) for x in (q, k, v))
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1),
                          float("-inf"))
    return (torch.softmax(s, dim=-1) @ v).transpose(1, 2)


@pytest.mark.parametrize("buffers", [2, 1])
@pytest.mark.parametrize("B,H,S,D,causal,bm,threads,blocks", [
    (2, 3, 333, 64, True, 64, 128, 5), (1, 4, 520, 128, False, 128, 256, 3),
    (3, 2, 1000, 128, True, 128, 256, 7), (1, 1, 64, 64, True, 64, 128, 1),
    (2, 8, 777, 64, True, 64, 128, 132), (1, 3, 1000, 128, False, 192, 384, 4)])
def test_persistent_attention_q_loaded_by_the_producer(B, H, S, D, causal, bm, threads, blocks,
                                                        buffers, monkeypatch):
    """The producer loads each tile's Q into one of `buffers` buffers (a second one lets it
    load the next tile's Q while this tile runs; one is what a kernel gets when two do not
    fit), the consumers wait for it and hand it back after the loop: NaN-poisoned output of
    tiles with different trip counts (causal) and ragged sequences, against float64."""
    need_sm90()
    import tilelang.transform.warp_specialize as ws

    if buffers == 1:  # as if a second Q buffer did not fit in shared memory
        monkeypatch.setattr(ws, "arena_bytes", lambda ctx, allocs: 1 << 30)
        monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")  # the cache cannot see the patch
    torch.manual_seed(S + blocks)
    kern = tilelang.compile(persistent_attention(B, H, S, D, causal, bm=bm, threads=threads,
                                                 blocks=blocks), target="cuda")
    assert f"loads Q once per tile ({buffers} buffer(s))" in kern.get_host_source()
    q, k, v = (torch.randn(B, S, H, D, device="cuda").half() for _ in range(3))
    out = torch.full((B, S, H, D), float("nan"), device="cuda", dtype=torch.float16)
    kern(q, k, v, out)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    torch.testing.assert_close(out.double(), _attention_reference(q, k, v, causal), rtol=1e-2,
                               atol=1e-2)


@pytest.mark.parametrize("buffers", [2, 1])
@pytest.mark.parametrize("tiles,blocks,stages", [(13, 3, 2), (13, 1, 3), (40, 7, 2)])
def test_tile_load_of_tiles_whose_loop_runs_no_iteration(tiles, blocks, stages, buffers,
                                                         monkeypatch):
    """Tiles whose pipelined loop runs 0 to 3 times: the producer still loads X of a tile
    without iterations and the consumers still hand its buffer back, so the ring stays in
    step (a missed load or hand-back would hang the next use of the buffer)."""
    need_sm90()
    import tilelang.transform.warp_specialize as ws

    if buffers == 1:
        monkeypatch.setattr(ws, "arena_bytes", lambda ctx, allocs: 1 << 30)
        monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")  # the cache cannot see the patch
    torch.manual_seed(tiles + stages)
    kern = tilelang.compile(persistent_tile_load(tiles, blocks, stages), target="cuda")
    assert f"loads X once per tile ({buffers} buffer(s))" in kern.get_host_source()
    x = torch.randn(tiles * 64, 64, device="cuda").half()
    y = torch.randn(3 * 64, 64, device="cuda").half()
    c = torch.full((tiles * 64, 64), float("nan"), device="cuda")
    kern(x, y, c)
    torch.cuda.synchronize()
    ref = torch.zeros(tiles * 64, 64, dtype=torch.float64, device="cuda")
    for t in range(tiles):
        kt = (t + t // 4) % 4
        ysum = y.double().reshape(3, 64, 64)[:kt].sum(0)
        ref[t * 64:(t + 1) * 64] = x[t * 64:(t + 1) * 64].double() @ ysum
    assert not torch.isnan(c).any()
    torch.testing.assert_close(c.double(), ref, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("B,H,S,causal,blocks", [
    (2, 3, 333, True, 5), (1, 4, 1000, True, 7), (2, 2, 520, False, 3), (1, 2, 128, True, 1)])
def test_persistent_attention_with_the_fa3_schedule(B, H, S, causal, blocks):
    """The order/stage schedule (QK^T(k) and PV(k-1) issued together, two warpgroups taking
    turns) inside a persistent tile loop: tiles of 1 to 8 iterations in a row on one block,
    the prologue and epilogue passes per tile keeping the rings in step; NaN-poisoned,
    against float64."""
    need_sm90()
    torch.manual_seed(S + blocks)
    kern = tilelang.compile(persistent_attention(B, H, S, 128, causal, bm=128, bn=128,
                                                 threads=256, blocks=blocks, overlap=True),
                            target="cuda")
    assert "overlapped pipeline over k (inside for wave, if)" in kern.get_host_source()
    q, k, v = (torch.randn(B, S, H, 128, device="cuda").half() for _ in range(3))
    out = torch.full((B, S, H, 128), float("nan"), device="cuda", dtype=torch.float16)
    kern(q, k, v, out)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    torch.testing.assert_close(out.double(), _attention_reference(q, k, v, causal), rtol=1e-2,
                               atol=1e-2)
