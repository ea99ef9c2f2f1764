"""On the GPU: the lowering choices of tests/transform/test_perf_attn_lowering.py compute what
the programs say (consecutive tile loads waited for once, a rounded-up layout storing whole
vectors past ragged rows, and FlashAttention with one full barrier per tile of a stage).
Outputs are NaN-poisoned; inputs fresh random; sizes ragged."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "transform"))
from test_perf_attn_lowering import (column_parts_load, ragged_row_store,  # noqa: E402
                                     two_tile_loads)

from . import kernels as K  # noqa: E402
from .hopper import need_sm90  # noqa: E402


@pytest.mark.parametrize("M,D,threads", [(128, 64, 128), (64, 192, 256)])
def test_consecutive_tile_loads(M, D, threads):
    k = tilelang.compile(two_tile_loads(M, D, threads), target="cuda")
    a, b = (torch.randn(M, D, device="cuda", dtype=torch.float16) for _ in range(2))
    out = torch.full_like(a, float("nan"))
    k(a, b, out)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a + b)


@pytest.mark.parametrize("M,D,tail,threads", [(64, 512, 64, 256), (32, 128, 32, 128)])
def test_disjoint_parts_of_one_tile(M, D, tail, threads):
    k = tilelang.compile(column_parts_load(M, D, tail, threads), target="cuda")
    a = torch.randn(M, D + tail, device="cuda", dtype=torch.float16)
    b = torch.randn(M, D, device="cuda", dtype=torch.float16)
    out = torch.full_like(a, float("nan"))
    k(a, b, out)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a + torch.nn.functional.pad(b, (0, tail)))


@pytest.mark.parametrize("rows", [100, 128, 1])
def test_rounded_up_layout_store(rows):
    k = tilelang.compile(ragged_row_store(rows=rows), target="cuda")
    x = torch.randn(rows, 192, device="cuda", dtype=torch.float16)
    out = torch.full_like(x, float("nan"))
    k(x, out)
    torch.cuda.synchronize()
    assert torch.equal(out, x)


# (the kernel masks only the causal case: ragged lengths with it)
@pytest.mark.parametrize("seq_len,causal", [(64, False), (256, False), (1024, False),
                                            (100, True), (257, True), (1000, True)])
@pytest.mark.parametrize("stages", [2, 3])
def test_flash_with_tile_barriers(seq_len, causal, stages):
    need_sm90()
    B, H, D = 2, 3, 64
    func = K.flash_fwd(B, H, seq_len, D, is_causal=causal, block_M=64, block_N=64,
                       num_stages=stages)
    kern = tilelang.compile(func, target="cuda", pass_configs={"tl.ws_tile_barriers": True})
    assert "K_shared_full" in kern.get_kernel_source()
    torch.manual_seed(seq_len + 7 * causal + stages)
    q, k, v = (torch.randn(B, seq_len, H, D, device="cuda", dtype=torch.float16)
               for _ in range(3))
    out = torch.full_like(q, float("nan"))
    kern(q, k, v, out)
    torch.cuda.synchronize()
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2).double(), k.transpose(1, 2).double(), v.transpose(1, 2).double(),
        is_causal=causal).transpose(1, 2)
    assert not out.isnan().any()
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < 5e-3, err


@pytest.mark.parametrize("n", [1, 3, 8])
def test_stores_read_by_wgmma_every_iteration(n):
    """A tile stored every iteration and read by that iteration's wgmma (one proxy fence per
    iteration, before the wgmma; none at the barrier before the stores)."""
    need_sm90()
    sys.path.insert(0, str(ROOT / "tests" / "transform"))
    from test_insert_sync import store_then_wgmma

    k = tilelang.compile(store_then_wgmma(n), target="cuda")
    a, b = (torch.randn(64, 64, device="cuda", dtype=torch.float16) for _ in range(2))
    c = torch.full((64, 64), float("nan"), device="cuda")
    k(a, b, c)
    torch.cuda.synchronize()
    ref = sum(((a * (i + 1)).double() @ b.double()) for i in range(n))
    torch.testing.assert_close(c.double(), ref, rtol=2e-3, atol=2e-2)
