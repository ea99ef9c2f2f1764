"""FP8 T.gemm on wgmma (sm_90a) on the GPU: e4m3 / e5m2 operands (and their mixes), SS and RS
forms, the 128/64/32-byte swizzles, ragged M/N/K; fresh random inputs, poisoned outputs, and a
float64 reference from the dequantised inputs (the products of fp8 values are exact, so the
only error left is fp32 accumulation order)."""

import os
import sys

import pytest
import torch

import tilelang

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "codegen"))
from fp8_kernels import fp8_gemm, fp8_gemm_two_level  # noqa: E402  (shared with the CPU codegen tests)

sys.path.pop(0)

pytestmark = pytest.mark.gpu

TORCH = {"float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}
E4, E5 = "float8_e4m3", "float8_e5m2"


from .hopper import need_sm90 as _need_sm90  # noqa: E402


def _fp8(shape, dtype, gen):
    # spread over the fp8 range, including values near its largest finite magnitude
    x = torch.randn(shape, generator=gen, device="cuda") * 4
    return x.to(TORCH[dtype])


def _run(M, N, K, seed, wgmma_name, **kw):
    _need_sm90()
    func = fp8_gemm(M, N, K, **kw)
    kernel = tilelang.compile(func, target="cuda")
    assert wgmma_name in kernel.get_kernel_source()
    _check_against_torch(kernel, M, N, K, kw.get("a_dtype", E4), kw.get("b_dtype", E4), seed)


def _check_against_torch(kernel, M, N, K, a_dtype, b_dtype, seed):
    """Run `kernel` (A M x K, B N x K, C = A @ B^T in fp32) on fresh inputs, C poisoned."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = _fp8((M, K), a_dtype, gen)
    b = _fp8((N, K), b_dtype, gen)
    c = torch.full((M, N), float("nan"), device="cuda")
    kernel(a, b, c)
    torch.cuda.synchronize()
    ref = a.double() @ b.double().t()
    assert not torch.isnan(c).any(), "output not fully written"
    err = ((c.double() - ref).norm() / ref.norm()).item()
    # Hopper's FP8 tensor cores keep about 14 bits while accumulating (measured on an H200:
    # 1.4e-4..3.5e-4 here); a wrong layout or descriptor gives errors of order 1
    assert err < 2e-3, f"relative error {err:.2e}"
    torch.testing.assert_close(c.double(), ref, rtol=1e-3, atol=4e-3 * ref.abs().max().item())


@pytest.mark.parametrize("a_dtype,b_dtype", [(E4, E4), (E5, E5), (E4, E5), (E5, E4)])
def test_fp8_types_ragged(a_dtype, b_dtype):
    _run(200, 136, 272, 1, "wgmma_gemm_ss", a_dtype=a_dtype, b_dtype=b_dtype)


@pytest.mark.parametrize("block_K,stages", [(64, 3), (32, 4), (256, 2)])
def test_fp8_swizzle_widths(block_K, stages):
    # 64 B and 32 B rows use the 64B / 32B swizzles; 256 B rows are two 128B column blocks
    _run(320, 264, 528, 2, "wgmma_gemm_ss", block_K=block_K, num_stages=stages)


def test_fp8_two_warpgroups_wide_n():
    # the example's bench tile: 128 x 256, one m64n256k32 wgmma per warpgroup and k step
    _run(392, 520, 400, 3, "wgmma_gemm_ss", block_N=256, threads=256)


@pytest.mark.parametrize("threads,block_N", [(128, 128), (256, 256)])
def test_fp8_a_from_registers(threads, block_N):
    _run(264, 392, 336, 4, "wgmma_gemm_rs", a_in_registers=True, threads=threads,
         block_N=block_N, b_dtype=E5)


@pytest.mark.parametrize("M,N,K,interval,dtype", [
    (200, 136, 8 * 64 + 48, 2, E4),   # ragged M, N and K; an odd step count leaves a partial
    (512, 384, 16 * 64, 2, E5),       # whole tiles; the last step promotes inside the loop
    (136, 264, 7 * 64, 3, E4),
])
def test_fp8_two_level_accumulation(M, N, K, interval, dtype):
    """The warp-specialised fp8 GEMM with a second fp32 accumulator the partial wgmma sums
    are added into every `interval` k-steps (one consumer warpgroup: its role branches on
    lane 0's thread index, its loop on the uniform datapath)."""
    _need_sm90()
    kernel = tilelang.compile(fp8_gemm_two_level(M, N, K, interval=interval, dtype=dtype),
                              target="cuda")
    assert "thread_group: ('consumer'" in kernel.get_kernel_source()
    _check_against_torch(kernel, M, N, K, dtype, dtype, M + N + K)
