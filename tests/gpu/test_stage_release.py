"""On the GPU: warp-specialised loops that hand TMA stages back right after their last reader
(single-stage FlashAttention with one ring per tile; an FP8 GEMM promoting its accumulator
after the stage went back). Fresh random inputs, outputs poisoned with NaN, ragged sizes,
float64 references."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
from stage_release_kernels import flash_bshd, fp8_two_level  # noqa: E402

sys.path.pop(0)

pytestmark = pytest.mark.gpu

from .hopper import need_sm90  # noqa: E402


@pytest.mark.parametrize("seq_len", [256, 333, 1000])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_M,block_N,dim,threads", [(128, 128, 128, 128), (64, 64, 64, 128),
                                                         (128, 64, 64, 256)])
@pytest.mark.parametrize("schedule", ["cp.async", "warp-specialised"])
def test_single_stage_flash_bshd(seq_len, causal, block_M, block_N, dim, threads, schedule):
    need_sm90()
    B, H = 2, 3
    ws = schedule == "warp-specialised"
    kern = tilelang.compile(flash_bshd(B, H, seq_len, dim, causal, block_M, block_N, 1, threads),
                            target="cuda",
                            pass_configs={"tl.disable_warp_specialized": not ws})
    assert ("one TMA ring per tile" if ws else "next load issued after its last reader") \
        in kern.get_host_source()
    for seed in range(2):  # the general call path, then the generated fast path
        torch.manual_seed(100 * seed + seq_len + causal)
        q, k, v = (torch.randn(B, seq_len, H, dim, device="cuda", dtype=torch.float16)
                   for _ in range(3))
        out = torch.full_like(q, float("nan"))
        kern(q, k, v, out)
        torch.cuda.synchronize()
        ref = torch.nn.functional.scaled_dot_product_attention(
            *(t.transpose(1, 2).double() for t in (q, k, v)), is_causal=causal).transpose(1, 2)
        assert not out.isnan().any()
        err = ((out.double() - ref).norm() / ref.norm()).item()
        assert err < 5e-3, err


@pytest.mark.parametrize("M,N,K,interval", [(1024, 1024, 8192, 2), (1000, 936, 4160, 2),
                                            (264, 392, 1088, 3)])
@pytest.mark.parametrize("dtype", ["float8_e4m3", "float8_e5m2"])
def test_fp8_two_level_accumulation(M, N, K, interval, dtype):
    need_sm90()
    tdt = {"float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}[dtype]
    kern = tilelang.compile(fp8_two_level(M, N, K, interval=interval, dtype=dtype),
                            target="cuda")
    assert "warp-specialised pipeline" in kern.get_host_source()
    gen = torch.Generator(device="cuda").manual_seed(M + K)
    a = (torch.randn(M, K, generator=gen, device="cuda") * 4).to(tdt)
    b = (torch.randn(N, K, generator=gen, device="cuda") * 4).to(tdt)
    c = torch.full((M, N), float("nan"), device="cuda")
    kern(a, b, c)
    torch.cuda.synchronize()
    ref = a.double() @ b.double().t()
    assert not c.isnan().any()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    assert err < 2e-3, err
