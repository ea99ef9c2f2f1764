"""Warp-specialised loops hand each TMA stage back right after its last reader (sm_90a
builds), and a single-stage loop whose tiles are first read at different statements gets
one TMA ring per tile; the CPU interpreter still computes the same programs as torch."""

import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import tilelang

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stage_release_kernels import flash_bshd, fp8_two_level  # noqa: E402

SM90 = "cuda -arch=sm_90a"


def _regions(src):
    producer = src[src.index("thread_group: ('producer'"):src.index("thread_group: ('consumer'")]
    consumer = src[src.index("thread_group: ('consumer'"):]
    return producer, consumer


@pytest.mark.parametrize("causal", [False, True])
def test_single_stage_flash_gets_a_ring_per_tile(causal):
    """Over fewer blocks than SMs (3 x 2 here) each block has an SM to itself and the producer
    warpgroup is the faster way to overlap; tl.disable_warp_specialized=False asks for it on
    any grid."""
    small = tilelang.compile(flash_bshd(1, 2, 333, 128, causal, 128, 128, 1, 128), target=SM90)
    assert "one TMA ring per tile" in small.get_host_source()
    kern = tilelang.compile(flash_bshd(4, 8, 1000, 128, causal, 128, 128, 1, 128), target=SM90,
                            pass_configs={"tl.disable_warp_specialized": False})
    src = kern.get_kernel_source()
    assert "single-stage loop over k: one TMA ring per tile (k_s, v_s)" in kern.get_host_source()
    assert "__launch_bounds__(256, 1)" in src
    producer, consumer = _regions(src)
    # the producer refills K as soon as it is free, then V
    order = [producer.index(x) for x in (
        "mbarrier_wait((&k_s_empty[0])", "tl::tma_load((&K_desc), (&k_s_full[0])",
        "mbarrier_wait((&v_s_empty[0])", "tl::tma_load((&V_desc), (&v_s_full[0])")]
    assert order == sorted(order), producer
    loop = consumer[consumer.index("for (int k = 0;"):]
    # the consumers wait for K just before Q K^T and hand it back right after; V is waited for
    # only before P V (the softmax runs while it arrives) and handed back after it
    marks = [loop.index(x) for x in (
        "mbarrier_wait((&k_s_full[0])", "wgmma_gemm_ss<", "mbarrier_arrive((&k_s_empty[0]))",
        "tl::exp2(", "mbarrier_wait((&v_s_full[0])", "wgmma_gemm_rs<",
        "mbarrier_arrive((&v_s_empty[0]))")]
    assert marks == sorted(marks), loop
    assert "cp_async" not in loop


@pytest.mark.parametrize("causal", [False, True])
def test_single_stage_flash_issues_each_load_after_its_last_reader(causal):
    """The default for one stage over more blocks than SMs (4 x 8 x 8 here): no producer
    warpgroup; K of k+1 is issued right after Q K^T reads K, V of k+1 right after P V, each
    waited for just before its gemm (one cp.async group in flight behind it)."""
    kern = tilelang.compile(flash_bshd(4, 8, 1000, 128, causal, 128, 128, 1, 128), target=SM90)
    src = kern.get_kernel_source()
    assert "thread_group" not in src and "mbarrier" not in src
    assert "single-stage loop over k: each tile's next load issued after its last reader " \
           "(k_s, v_s)" in kern.get_host_source()
    loop = src[src.index("for (int k = 0;"):]
    marks = [loop.index(x) for x in (
        "tl::cp_async_wait<1>()", "wgmma_gemm_ss<", "tl::cp_async_zfill<16>((&k_s[",
        "tl::exp2(", "tl::cp_async_wait<1>()", "wgmma_gemm_rs<", "tl::cp_async_zfill<16>((&v_s[")]
    assert marks[:4] == sorted(marks[:4]), loop
    second = loop.index("tl::cp_async_wait<1>()", marks[0] + 1)
    assert marks[3] < second < marks[5] < marks[6], loop
    # every thread is done with the tile before it is overwritten
    assert "__syncthreads" in loop[marks[1]:marks[2]] and "__syncthreads" in loop[marks[5]:marks[6]]


def test_single_stage_tiles_read_together_keep_the_plain_loop():
    """A GEMM's A and B are both first needed by its one gemm: with one stage nothing could
    overlap the loads, so no producer warpgroup is added."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))
    from kernels import gemm

    kern = tilelang.compile(gemm(256, 256, 256, 128, 128, 64, num_stages=1, threads=128),
                            target=SM90)
    assert "thread_group" not in kern.get_kernel_source()
    assert "warp-specialised" not in kern.get_host_source()


def test_stage_goes_back_before_the_accumulator_promotion():
    kern = tilelang.compile(fp8_two_level(256, 256, 512), target=SM90)
    _, consumer = _regions(kern.get_kernel_source())
    loop = consumer[consumer.index("for (int k = 0;"):]
    gemm = loop.index("wgmma_gemm_ss<")
    release = loop.index("tl::mbarrier_arrive((&empty_bar[")
    promote = loop.index("if (((k + 1) & 1) == 0)")
    assert gemm < release < promote, loop
    assert loop.count("mbarrier_arrive") == 1


def test_plain_gemm_loop_is_unchanged():
    """The gemm is the loop's last statement: the stage still goes back at the end."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))
    from kernels import gemm

    src = tilelang.lower(gemm(512, 512, 512, 128, 128, 64, num_stages=3, threads=256),
                         target=SM90)
    _, consumer = _regions(src)
    loop = consumer[consumer.index("for (int k = 0;"):]
    body = loop[:loop.index("\n    }\n")]
    assert re.search(r"wgmma_gemm_ss<[^;]*;\s*tl::mbarrier_arrive\(\(&empty_bar", body), body


def _attention_ref(q, k, v, causal):
    d = q.shape[-1]
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d)
    if causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    s = np.exp(s - s.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", s, v)


@pytest.mark.parametrize("causal", [False, True])
def test_interpreter_agrees_on_the_single_stage_flash(causal):
    rng = np.random.default_rng(7 + causal)
    B, H, S, D = 1, 2, 80, 32
    kern = tilelang.compile(flash_bshd(B, H, S, D, causal, 32, 32, 1, 128), target="cpu")
    q, k, v = (rng.standard_normal((B, S, H, D)).astype(np.float16) for _ in range(3))
    import torch

    out = torch.full((B, S, H, D), float("nan"), dtype=torch.float16)
    kern(*(torch.from_numpy(x) for x in (q, k, v)), out)
    ref = _attention_ref(*(x.astype(np.float64) for x in (q, k, v)), causal)
    err = np.linalg.norm(out.numpy().astype(np.float64) - ref) / np.linalg.norm(ref)
    assert err < 5e-3, err


def test_interpreter_agrees_on_the_two_level_fp8_gemm():
    import torch

    M, N, K = 40, 72, 224  # ragged tiles, 7 iterations: a promotion after the loop too
    kern = tilelang.compile(fp8_two_level(M, N, K, 32, 32, 32, 3, 2), target="cpu")
    g = torch.Generator().manual_seed(3)
    a = (torch.randn(M, K, generator=g) * 4).to(torch.float8_e4m3fn)
    b = (torch.randn(N, K, generator=g) * 4).to(torch.float8_e4m3fn)
    c = torch.full((M, N), float("nan"))
    kern(a, b, c)
    ref = a.double() @ b.double().t()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    assert err < 1e-5, err
