"""Warp-specialised GEMM main loops that keep each iteration's wgmma in flight (one consumer
warpgroup: the stage of k-1 is handed back after the gemm of k is issued), against the same
loops waiting every iteration: ragged sizes, 2 to 4 stages, outputs poisoned first."""

import pytest
import torch

import tilelang

from . import kernels as K

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("in_flight", [True, False])
@pytest.mark.parametrize("M,N,Kd,bm,bn,bk,stages", [
    (512, 512, 512, 128, 128, 32, 3),
    (257, 384, 4000, 128, 128, 32, 2),
    (1000, 520, 1320, 64, 128, 64, 4),
    (128, 128, 32, 128, 128, 32, 3),   # one iteration: nothing handed back in the loop
    (192, 256, 96, 64, 256, 32, 3),
])
def test_gemm_main_loop(in_flight, M, N, Kd, bm, bn, bk, stages):
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("warp specialisation needs sm_90a")
    kern = tilelang.compile(
        K.gemm(M, N, Kd, bm, bn, bk, out_dtype="float32", num_stages=stages, threads=128),
        target="cuda", pass_configs={"tl.wgmma_in_flight": in_flight})
    assert ("kept in flight" in kern.get_host_source()) == in_flight
    for _ in range(2):
        a = torch.randn(M, Kd, device="cuda", dtype=torch.float16)
        b = torch.randn(Kd, N, device="cuda", dtype=torch.float16)
        c = torch.full((M, N), float("nan"), device="cuda")
        kern(a, b, c)
        ref = a.double() @ b.double()
        err = ((c.double() - ref).norm() / ref.norm()).item()
        assert err < 1e-3, err
