"""FlashAttention-3-style overlap on the GPU (sm_90a): T.Pipelined(order=, stage=, group=) with
asynchronous wgmma (examples/flash_attention/example_mha_fwd_pipelined.py and a two-gemm chain
whose blocks run 0, 1, 2, ... iterations). Outputs are NaN-poisoned and compared with float64
references; the plain-loop kernel must give the same answer."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "examples"))
from example_helpers import load_example  # noqa: E402
sys.path.insert(0, str(ROOT / "tests" / "transform"))
from overlap_kernels import gemm_chain, gemm_chain_ref  # noqa: E402


def _example():
    return load_example(ROOT / "examples" / "flash_attention" / "example_mha_fwd_pipelined.py")


from .hopper import need_sm90 as _need_sm90  # noqa: E402


@pytest.mark.parametrize("seq_len", [64, 100, 128, 257, 1000, 2048])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("cfg", [dict(block_M=128, block_N=128, threads=256),
                                 dict(block_M=64, block_N=64, threads=128),
                                 dict(block_M=128, block_N=64, threads=256, num_stages=3)])
def test_flash_overlap_matches_reference(seq_len, causal, cfg):
    _need_sm90()
    ex = _example()
    B, H, D = 2, 3, 128 if cfg["block_M"] == 128 else 64
    torch.manual_seed(seq_len + 7 * causal)
    q, k, v = (torch.randn(B, seq_len, H, D, device="cuda", dtype=torch.float16)
               for _ in range(3))
    func = ex.flash_attention_fwd_pipelined.get_tir(B, H, seq_len, D, causal, **cfg)
    kern = tilelang.compile(func, target="cuda")
    out = torch.full_like(q, float("nan"))
    kern(q, k, v, out)
    torch.cuda.synchronize()
    ref = ex.ref_program(q, k, v, causal)
    assert not out.isnan().any()
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < 5e-3, err
    # the schedule only moves work between iterations: the same bits as the plain loop
    plain = tilelang.compile(ex.flash_attention_fwd_pipelined.get_tir(
        B, H, seq_len, D, causal, overlap=False, **cfg), target="cuda")
    out2 = torch.full_like(q, float("nan"))
    plain(q, k, v, out2)
    torch.cuda.synchronize()
    assert torch.equal(out, out2)


@pytest.mark.parametrize("M,N", [(64, 64), (200, 300), (512, 1000), (640, 130)])
@pytest.mark.parametrize("stage,num_stages", [(None, 2), ([-1, 1, 1, -1, 2], 3)])
def test_chain_with_zero_one_and_many_iterations(M, N, stage, num_stages):
    """Block b runs min(b, key tiles) iterations: 0 for block 0, 1 for block 1, ..."""
    _need_sm90()
    torch.manual_seed(M * 7 + N)
    q, k, v = (torch.randn(n, 64, device="cuda", dtype=torch.float16) for n in (M, N, N))
    ref = gemm_chain_ref(q, k, v)
    outs = []
    for overlap in (True, False):
        kern = tilelang.compile(gemm_chain(M, N, 64, overlap=overlap, stage=stage,
                                           num_stages=num_stages), target="cuda")
        out = torch.full((M, 64), float("nan"), device="cuda")
        kern(q, k, v, out)
        torch.cuda.synchronize()
        assert not out.isnan().any(), overlap
        torch.testing.assert_close(out.double(), ref, rtol=1e-2, atol=1e-2 * (
            1 + ref.abs().max().item()))
        outs.append(out)
    assert torch.equal(*outs)


def test_user_async_gemms_in_a_plain_loop():
    """T.gemm(..., wg_wait=-1) in a plain pipelined loop: the compiler places the waits."""
    _need_sm90()
    torch.manual_seed(3)
    q, k, v = (torch.randn(n, 64, device="cuda", dtype=torch.float16) for n in (300, 500, 500))
    kern = tilelang.compile(gemm_chain(300, 500, 64, overlap=False, wg_wait=-1), target="cuda")
    out = torch.full((300, 64), float("nan"), device="cuda")
    kern(q, k, v, out)
    torch.cuda.synchronize()
    ref = gemm_chain_ref(q, k, v)
    torch.testing.assert_close(out.double(), ref, rtol=1e-2, atol=1e-2 * (
        1 + ref.abs().max().item()))


@pytest.mark.parametrize("seq_len", [256, 1024, 2048])
@pytest.mark.parametrize("causal", [False, True])
def test_derived_schedule_on_reference_style_flash(seq_len, causal):
    """A FlashAttention loop written without an annotation, the way the reference's examples
    write it, gets FlashAttention-3's schedule and the warpgroup ping-pong derived
    (overlap_schedule.auto_schedule): same answer as SDPA in float64."""
    _need_sm90()
    from .kernels import flash_fwd

    B, H, D = 2, 3, 128
    torch.manual_seed(seq_len + causal)
    q, k, v = (torch.randn(B, seq_len, H, D, device="cuda", dtype=torch.float16)
               for _ in range(3))
    kern = tilelang.compile(flash_fwd(B, H, seq_len, D, causal, 128, 128, 2, 256),
                            target="cuda")
    # causal: the mask written before the scores gemm is computed on diagonal tiles only
    # (unswitch_masks), so the causal loop gets the schedule too where it is known to run
    # 8 times or more (seq_len // 128 blocks bound it)
    derived = "FlashAttention-3's schedule, derived" in kern.get_host_source()
    assert derived == (not causal or seq_len // 128 >= 8)
    out = torch.full_like(q, float("nan"))
    kern(q, k, v, out)
    torch.cuda.synchronize()
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(t.transpose(1, 2).double() for t in (q, k, v)), is_causal=causal).transpose(1, 2)
    assert not out.isnan().any()
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < 5e-3, err
