"""Consumer warpgroups taking turns to issue wgmma (transform/pingpong.py) on the GPU (sm_90a):
FlashAttention-3's schedule (examples/flash_attention/example_mha_fwd_pipelined.py) with 2
and 3 consumer warpgroups, ragged and causal, and a two-gemm chain whose
blocks run 0, 1, 2, ... iterations (a turn left unbalanced would hang or corrupt the next
block). Outputs are NaN-poisoned; the turns only reorder when warpgroups issue, so the result
must be bit-identical to the kernel compiled without them."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "transform"))
sys.path.insert(0, str(ROOT / "tests" / "examples"))
from example_helpers import load_example  # noqa: E402
from overlap_kernels import gemm_chain, gemm_chain_ref  # noqa: E402

from .hopper import need_sm90  # noqa: E402

OFF = {"tl.disable_warpgroup_pingpong": True}


def _run(func, configs, *inputs, out_like):
    kern = tilelang.compile(func, target="cuda", pass_configs=configs)
    out = torch.full_like(out_like, float("nan"))
    kern(*inputs, out)
    torch.cuda.synchronize()
    return kern, out


@pytest.mark.parametrize("seq_len", [64, 100, 257, 1000])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("cfg", [dict(block_M=128, block_N=128, num_stages=2, threads=256),
                                 dict(block_M=192, block_N=128, num_stages=2, threads=384),
                                 dict(block_M=128, block_N=64, num_stages=3, threads=256)])
def test_attention_with_turns_matches_reference(cfg, seq_len, causal):
    need_sm90()
    ex = load_example(ROOT / "examples" / "flash_attention" / "example_mha_fwd_pipelined.py")
    B, H, D = 2, 3, 128
    torch.manual_seed(seq_len + 11 * causal)
    q, k, v = (torch.randn(B, seq_len, H, D, device="cuda", dtype=torch.float16)
               for _ in range(3))
    func = ex.flash_attention_fwd_pipelined.get_tir(B, H, seq_len, D, causal, **cfg)
    kern, out = _run(func, None, q, k, v, out_like=q)
    assert "wg_turn_wait" in kern.get_kernel_source()
    assert not out.isnan().any()
    ref = ex.ref_program(q, k, v, causal)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < 5e-3, err
    kern_off, out_off = _run(func, OFF, q, k, v, out_like=q)
    assert "wg_turn" not in kern_off.get_kernel_source()
    assert torch.equal(out, out_off)


@pytest.mark.parametrize("M,N", [(128, 64), (300, 500), (1024, 1000)])
def test_chain_with_zero_one_and_many_iterations(M, N):
    """Block b runs min(b, key tiles) iterations: 0 for block 0, 1 for block 1, ..."""
    need_sm90()
    torch.manual_seed(M + 3 * N)
    q, k, v = (torch.randn(n, 64, device="cuda", dtype=torch.float16) for n in (M, N, N))
    func = gemm_chain(M, N, 64, block_M=128, threads=256)
    out_like = torch.empty(M, 64, device="cuda")
    kern, out = _run(func, None, q, k, v, out_like=out_like)
    assert "wg_turn_wait" in kern.get_kernel_source()
    assert not out.isnan().any()
    ref = gemm_chain_ref(q, k, v, block_M=128)
    torch.testing.assert_close(out.double(), ref, rtol=1e-2,
                               atol=1e-2 * (1 + ref.abs().max().item()))
    _, out_off = _run(func, OFF, q, k, v, out_like=out_like)
    assert torch.equal(out, out_off)
