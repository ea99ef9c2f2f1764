"""Warp/block votes, T.dp4a and T.sync_grid (a cooperative launch) on the GPU against torch,
fresh inputs, outputs poisoned."""

import pytest
import torch

import tilelang

from . import role_kernels as R

pytestmark = pytest.mark.gpu


def test_votes():
    k = tilelang.compile(R.votes(), target="cuda")
    a = torch.randint(-9, 9, (128,), dtype=torch.int32, device="cuda")
    o = torch.full((128, 5), -1, dtype=torch.int64, device="cuda")
    k(a, o)
    a, o = a.cpu(), o.cpu()
    w = a.view(4, 32)
    assert torch.equal(o[:, 0] != 0, (w > 5).any(1).repeat_interleave(32))
    assert torch.equal(o[:, 1] != 0, (w > -8).all(1).repeat_interleave(32))
    bits = ((w > 0).long() << torch.arange(32)).sum(1)
    assert torch.equal(o[:, 2], bits.repeat_interleave(32))
    assert torch.equal(o[:, 3], (a > 0).sum().expand(128))


def test_dp4a():
    k = tilelang.compile(R.dp4a_rows(), target="cuda")
    a = torch.randint(-128, 128, (64, 16), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (64, 16), dtype=torch.int8, device="cuda")
    c = torch.full((64,), -7, dtype=torch.int32, device="cuda")
    k(a, b, c)
    assert torch.equal(c, (a.int() * b.int()).sum(1).int())


@pytest.mark.parametrize("N,blocks", [(1000, 8), (100000, 32), (77, 3)])
def test_sync_grid(N, blocks):
    k = tilelang.compile(R.grid_normalise(N, blocks), target="cuda")
    a = torch.rand(N, device="cuda") + 0.5
    p = torch.full((blocks,), float("nan"), device="cuda")
    b = torch.full((N,), float("nan"), device="cuda")
    for _ in range(3):  # a fresh counter every call
        k(a, p, b)
        torch.testing.assert_close(b, a / a.sum(), rtol=1e-4, atol=1e-7)


def test_match_ffs_fns():
    import tilelang.language as T

    @T.prim_func
    def f(A: T.Tensor((64,), "int32"), O: T.Tensor((64, 4), "int64")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            O[tx, 0] = T.cast(T.match_any_sync(A[tx]), "int64")
            O[tx, 1] = T.cast(T.match_all_sync(A[tx]), "int64")
            mask = T.ballot_sync(tx % 32 >= 7)
            O[tx, 2] = T.cast(T.__ffs(mask) - 1, "int64")
            O[tx, 3] = T.cast(T.__fns(T.cast(mask, "uint32"), 0, 3), "int64")

    a = torch.randint(0, 3, (64,), dtype=torch.int32, device="cuda")
    a[0], a[1], a[32], a[33] = 0, 1, 0, 1
    o = torch.full((64, 4), -1, dtype=torch.int64, device="cuda")
    tilelang.compile(f, target="cuda")(a, o)
    o, w = o.cpu(), a.cpu().view(2, 32)
    same = torch.stack([((w[i][None, :] == w[i][:, None]).long() << torch.arange(32)).sum(1)
                        for i in range(2)]).view(-1)
    assert torch.equal(o[:, 0], same)
    assert (o[:, 1] == 0).all() and (o[:, 2] == 7).all() and (o[:, 3] == 9).all()
