"""Reducers on the GPU against torch (fresh random inputs, outputs poisoned, ragged sizes):
register partials combined at T.finalize_reducer (transform/reducer_fragments.py) in both of
the reference's forms, and the shared-memory atomic form they must agree with."""

import pytest
import torch

import tilelang

from . import reducer_kernels as R

pytestmark = pytest.mark.gpu

BASELINE = {"tl.reducer_force_baseline": True}


def _poisoned(*shape):
    return torch.full(shape, float("nan"), device="cuda")


def _rows(op, t):
    return t.sum(1) if op == "sum" else t.max(1).values if op == "max" else t.min(1).values


@pytest.mark.parametrize("M,N,bm,bn,threads", [(4096, 4096, 128, 128, 256),
                                               (1000, 1500, 128, 128, 256),
                                               (333, 520, 64, 64, 128)])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("configs", [None, BASELINE], ids=["partials", "atomics"])
def test_gemv_legacy(M, N, bm, bn, threads, op, configs):
    k = tilelang.compile(R.gemv_legacy(M, N, block_M=bm, block_N=bn, threads=threads, op=op),
                         target="cuda", pass_configs=configs)
    a = torch.randn(M, N, device="cuda", dtype=torch.float16)
    x = torch.randn(N, device="cuda", dtype=torch.float16)
    o = _poisoned(M)
    k(a, x, o)
    torch.testing.assert_close(o, _rows(op, (a * x).float()), rtol=1e-3, atol=2e-2)


@pytest.mark.parametrize("M,N", [(32, 128), (70, 300), (257, 1000)])
@pytest.mark.parametrize("op,start", [("sum", None), ("sum", 5.0), ("max", None),
                                      ("max", 1.5), ("min", -0.5)])
def test_rows_v2(M, N, op, start):
    k = tilelang.compile(R.rows_v2(M, N, op=op, start=start), target="cuda")
    A = torch.randn(M, N, device="cuda")
    o = _poisoned(M)
    k(A, o)
    want = _rows(op, A)
    if start is not None:
        want = {"sum": want + start, "max": want.clamp(min=start),
                "min": want.clamp(max=start)}[op]
    torch.testing.assert_close(o, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("n_a,n_b", [(8, 16), (5, 100), (200, 3)])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_two_update_sites(n_a, n_b, op):
    k = tilelang.compile(R.total_two_sites(n_a, n_b, op=op), target="cuda")
    A = torch.randn(n_a, device="cuda")
    B = torch.randn(n_b, device="cuda")
    o = _poisoned(1)
    k(A, B, o)
    both = torch.cat([A, B])
    want = {"sum": both.sum(), "max": both.max(), "min": both.min()}[op]
    torch.testing.assert_close(o, want.reshape(1), rtol=1e-5, atol=1e-5)


def test_per_thread_contributions():
    k = tilelang.compile(R.per_thread_sum(128), target="cuda")
    A = torch.randn(128, device="cuda")
    o = _poisoned(1)
    k(A, o)
    torch.testing.assert_close(o, A.sum().reshape(1), rtol=1e-5, atol=1e-5)


_BITWISE = {"bitand": torch.bitwise_and, "bitor": torch.bitwise_or,
            "bitxor": torch.bitwise_xor}


@pytest.mark.parametrize("M,N", [(32, 128), (70, 300), (257, 1000)])
@pytest.mark.parametrize("op", sorted(_BITWISE))
@pytest.mark.parametrize("start", [None, 0x5A5A5A5A])
@pytest.mark.parametrize("configs", [None, BASELINE], ids=["partials", "atomics"])
def test_rows_v2_bitwise(M, N, op, start, configs):
    k = tilelang.compile(R.rows_v2(M, N, op=op, start=start, dtype="int32"), target="cuda",
                         pass_configs=configs)
    A = torch.randint(0, 2**31 - 1, (M, N), device="cuda", dtype=torch.int32)
    o = torch.full((M,), -7, device="cuda", dtype=torch.int32)
    k(A, o)
    want = A[:, 0].clone()
    for j in range(1, N):
        want = _BITWISE[op](want, A[:, j])
    if start is not None:
        want = _BITWISE[op](want, torch.tensor(start, device="cuda", dtype=torch.int32))
    assert torch.equal(o, want)
