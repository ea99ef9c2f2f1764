"""Consumer-computed wgmma operands on the GPU (sm_90a; transform/warp_specialize/computed_operands.py): with the
tile double-buffered and each gemm left in flight while the next tile is computed, results
match torch in float64 for even, odd and single-iteration loops at ragged sizes, for the
generic kernel and for the int4 dequantisation example; outputs NaN-poisoned first."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "transform"))
sys.path.insert(0, str(ROOT / "examples" / "dequantize_gemm"))
from computed_operand_kernels import relu_scaled_a_in_registers, relu_scaled_gemm  # noqa: E402
import example_dequant_gemm_int4 as dq  # noqa: E402

from .hopper import check_int4_gemm, need_sm90  # noqa: E402


@pytest.mark.parametrize("M,N,K,cfg", [
    (256, 256, 512, dict()),                                        # 8 iterations
    (300, 200, 448, dict()),                                        # 7: the unpaired last one
    (130, 70, 64, dict()),                                          # 1
    (129, 264, 200, dict(block_M=64, block_N=128, block_K=32, num_stages=4, threads=128)),
])
def test_relu_scaled_gemm_matches_torch(M, N, K, cfg):
    need_sm90()
    torch.manual_seed(M + N + K)
    func = relu_scaled_gemm(M, N, K, **cfg)
    assert ("_odd" in tilelang.lower(func, target="cuda -arch=sm_90a")) == \
        (-(-K // cfg.get("block_K", 64)) >= 2)
    kernel = tilelang.compile(func, target="cuda")
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(K, N, device="cuda").half()
    c = torch.full((M, N), float("nan"), device="cuda")
    kernel(a, b, c)
    ref = a.double() @ (torch.relu(b) * 0.5).double()
    torch.testing.assert_close(c.double(), ref, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("M,N,K,G,cfg", [
    (256, 1024, 2048, 128, dict(block_M=256, block_N=64, block_K=64, num_stages=4)),
    (200, 136, 384, 128, dict(block_M=128, block_N=64, block_K=128, num_stages=3)),  # 3 iters
    (72, 200, 640, 64, dict(block_M=64, block_N=64, block_K=64, num_stages=4, threads=128)),
])
def test_int4_dequant_example_matches_torch(M, N, K, G, cfg):
    need_sm90()
    torch.manual_seed(M + K)
    kernel = tilelang.compile(dq.dequant_gemm_int4.get_tir(M, N, K, G, **cfg), target="cuda")
    assert "_odd" in kernel.get_kernel_source()
    check_int4_gemm(dq, kernel, M, N, K, G)


@pytest.mark.parametrize("M,N,K,G,cfg", [
    (256, 1024, 2048, 128, dict(block_M=256, block_N=128, block_K=64, num_stages=4, split_k=2)),
    (200, 136, 384, 128, dict(block_M=128, block_N=64, block_K=64, num_stages=3, split_k=1)),
    (72, 200, 640, 64, dict(block_M=64, block_N=64, block_K=64, num_stages=4, threads=128,
                           split_k=1)),  # odd trip count: the last iteration on its own
])
def test_int4_register_operand_example_matches_torch(M, N, K, G, cfg):
    """The expanded weights double-buffered in registers as the wgmma A operand."""
    need_sm90()
    torch.manual_seed(M + N + K)
    kernel = tilelang.compile(dq.dequant_gemm_int4_rs.get_tir(M, N, K, G, **cfg), target="cuda")
    assert "W_local_odd" in kernel.get_kernel_source()
    check_int4_gemm(dq, kernel, M, N, K, G, cfg["split_k"], dq.fragment_words)


@pytest.mark.parametrize("M,N,K", [(256, 256, 448), (200, 136, 512), (128, 128, 64)])
def test_register_operand_matches_torch(M, N, K):
    """relu(A) * 0.5 computed into the registers of the wgmma's A operand, double-buffered
    (7, 8 iterations; one iteration: nothing to overlap)."""
    need_sm90()
    torch.manual_seed(M + N + K)
    kernel = tilelang.compile(relu_scaled_a_in_registers(M, N, K), target="cuda")
    assert ("A_local_odd" in kernel.get_kernel_source()) == (K // 64 >= 2)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda")
    kernel(a, b, c)
    ref = (torch.relu(a) * 0.5).double() @ b.double()
    torch.testing.assert_close(c.double(), ref, rtol=1e-3, atol=1e-3)
