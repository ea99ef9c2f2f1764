"""Explicit Hopper controls on the GPU: T.ws roles handing double-buffered shared tiles over
with full/empty mbarriers (T.alloc_barrier, T.barrier_wait, T.barrier_arrive)."""

import pytest
import torch

import tilelang

from . import kernels as K

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("n,chunks", [(1024, 8), (5000, 8), (333, 3), (70001, 16)])
def test_ws_stream_hands_buffers_over(n, chunks):
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("mbarrier try_wait needs sm_90")
    k = tilelang.compile(K.ws_stream(n, chunks), target="cuda")
    a = torch.randn(n, device="cuda")
    b = torch.full((n,), float("nan"), device="cuda")
    k(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(b.double(), a.double() * 2 + 1, rtol=1e-6, atol=1e-6)
