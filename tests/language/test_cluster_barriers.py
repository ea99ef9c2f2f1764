"""Thread block clusters: `T.cluster_arrive` / `T.cluster_wait` / `T.cluster_sync`,
`T.block_rank_in_cluster`, and `T.alloc_cluster_barrier` with arrivals from peer blocks
(`T.mbarrier_arrive(bar, cta_id)`). On the interpreter a cluster's blocks run side by side."""

import pytest
import torch

import tilelang
import tilelang.language as T
from device_params import HAS_COMPILER, DEVICES


def _exchange(cluster, blocks):
    """Block r of each cluster writes its value to global memory, the cluster synchronises,
    then it reads the value of its right neighbour in the cluster (rank r + 1 mod size):
    correct only if the barrier orders every peer's write before the read."""
    @T.prim_func
    def main(x: T.Tensor((blocks,), "int32"), y: T.Tensor((blocks,), "int32"),
             rank: T.Tensor((blocks,), "int32"), scratch: T.Tensor((blocks,), "int32")):
        with T.ClusterKernel(blocks, threads=64, cluster_dims=(cluster, 1, 1)) as bx:
            tx = T.get_thread_binding()
            r = T.block_rank_in_cluster()
            if tx == 0:
                scratch[bx] = x[bx] * 10
                rank[bx] = r
            T.cluster_arrive()
            T.cluster_wait()
            if tx == 0:
                y[bx] = scratch[bx - r + (r + 1) % cluster]
            T.cluster_sync()
    return main


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cluster,blocks", [(2, 6), (4, 12)])
def test_cluster_barrier_orders_the_peers(device, cluster, blocks):
    kernel = tilelang.compile(_exchange(cluster, blocks),
                              target="cpu" if device == "cpu" else "cuda")
    x = torch.randint(-1000, 1000, (blocks,), dtype=torch.int32, device=device)
    y, rank, scratch = (torch.full((blocks,), -7, dtype=torch.int32, device=device)
                        for _ in range(3))
    kernel(x, y, rank, scratch)
    ids = torch.arange(blocks)
    neighbour = ids - ids % cluster + (ids % cluster + 1) % cluster
    assert torch.equal(rank.cpu(), (ids % cluster).int())
    assert torch.equal(y.cpu(), x.cpu()[neighbour] * 10)


def _peer_arrivals(cluster, blocks):
    """Every thread of every block arrives on the barrier of block 0 of its cluster, whose
    count is the cluster's threads: block 0 waits for all of them, then reads what each peer
    wrote before arriving."""
    threads = 32

    @T.prim_func
    def main(out: T.Tensor((blocks,), "int32"), scratch: T.Tensor((blocks,), "int32")):
        with T.ClusterKernel(blocks, threads=threads, cluster_dims=(cluster, 1, 1)) as bx:
            tx = T.get_thread_binding()
            bar = T.alloc_cluster_barrier([cluster * threads])
            T.cluster_sync()
            if tx == 0:
                scratch[bx] = bx + 100
            T.mbarrier_arrive(bar[0], 0)
            if T.block_rank_in_cluster() == 0:
                T.mbarrier_wait_parity(bar[0], 0)
                if tx < cluster:
                    out[bx + tx] = scratch[bx + tx] * 2
            T.cluster_sync()
    return main


@pytest.mark.parametrize("device", DEVICES)
def test_arrivals_from_peer_blocks_complete_the_phase(device):
    cluster, blocks = 4, 8
    kernel = tilelang.compile(_peer_arrivals(cluster, blocks),
                              target="cpu" if device == "cpu" else "cuda")
    out, scratch = (torch.full((blocks,), -7, dtype=torch.int32, device=device)
                    for _ in range(2))
    kernel(out, scratch)
    assert torch.equal(out.cpu(), (torch.arange(blocks) + 100).int() * 2)


def test_interpreter_reports_a_cluster_barrier_that_cannot_complete():
    @T.prim_func
    def main(out: T.Tensor((4,), "int32")):
        with T.ClusterKernel(4, threads=32, cluster_dims=(2, 1, 1)) as bx:
            if bx % 2 == 0:
                T.cluster_sync()
            out[bx] = 1

    kernel = tilelang.compile(main, target="cpu")
    with pytest.raises(Exception, match="1 of 2 blocks of the cluster arrived"):
        kernel(torch.zeros(4, dtype=torch.int32))


def test_interpreter_rejects_a_cluster_barrier_of_some_threads():
    @T.prim_func
    def main(out: T.Tensor((4,), "int32")):
        with T.ClusterKernel(4, threads=64, cluster_dims=(2, 1, 1)) as bx:
            if T.get_thread_binding() < 32:
                T.cluster_arrive()
                T.cluster_wait()
            out[bx] = 1

    kernel = tilelang.compile(main, target="cpu")
    with pytest.raises(Exception, match="only some threads of the block"):
        kernel(torch.zeros(4, dtype=torch.int32))


def test_rank_is_zero_without_clusters():
    @T.prim_func
    def main(out: T.Tensor((3,), "int32")):
        with T.Kernel(3, threads=32) as bx:
            T.cluster_sync()
            out[bx] = T.block_rank_in_cluster()

    out = torch.full((3,), -7, dtype=torch.int32)
    tilelang.compile(main, target="cpu")(out)
    assert out.tolist() == [0, 0, 0]


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
def test_cuda_source():
    src = tilelang.compile(_peer_arrivals(4, 8), target="cuda -arch=sm_90a").get_kernel_source()
    assert "__cluster_dims__(4, 1, 1)" in src
    assert "tl::mbarrier_arrive_remote(" in src and "tl::cluster_sync()" in src
    assert "tl::fence_mbarrier_init()" in src  # the peers see the initialised barrier
    src = tilelang.compile(_exchange(2, 6), target="cuda -arch=sm_90a").get_kernel_source()
    assert "tl::cluster_arrive()" in src and "tl::cluster_wait()" in src
    assert "tl::cluster_ctarank()" in src


def _multicast(m_blocks, n_blocks, dims, mask, bm=16, bn=8):
    @T.prim_func
    def main(a: T.Tensor((m_blocks * bm, n_blocks * bn), "float16"),
             b: T.Tensor((m_blocks * bm, n_blocks * bn), "float16")):
        with T.ClusterKernel(n_blocks, m_blocks, threads=128, cluster_dims=dims) as (bx, by):
            tile = T.alloc_shared((bm, bn), "float16")
            row = by * bm  # a let: the leader's coordinates are computed through it too
            T.copy_cluster(a[row, bx * bn], tile, cluster_mask=mask)
            T.copy(tile, b[by * bm, bx * bn])
    return main


def _multicast_expected(a, m_blocks, n_blocks, dims, mask, bm=16, bn=8):
    want = torch.empty_like(a)
    cx, cy = dims[0], dims[1]
    for by in range(m_blocks):
        for bx in range(n_blocks):
            rank = (by % cy) * cx + bx % cx
            sx, sy = bx, by
            if mask >> rank & 1:
                leader = (mask & -mask).bit_length() - 1
                sx, sy = bx - bx % cx + leader % cx, by - by % cy + leader // cx
            want[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn] = \
                a[sy * bm:(sy + 1) * bm, sx * bn:(sx + 1) * bn]
    return want


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dims,mask", [((4, 1, 1), 0b0011), ((4, 1, 1), 0b1110),
                                       ((2, 2, 1), 0b1010), ((2, 1, 1), 0b01)])
def test_copy_cluster_gives_masked_blocks_the_leaders_tile(device, dims, mask):
    m_blocks, n_blocks = 4, 8
    kernel = tilelang.compile(_multicast(m_blocks, n_blocks, dims, mask),
                              target="cpu" if device == "cpu" else "cuda")
    a = torch.randn(m_blocks * 16, n_blocks * 8, dtype=torch.float16, device=device)
    b = torch.full_like(a, float("nan"))
    kernel(a, b)
    want = _multicast_expected(a.cpu(), m_blocks, n_blocks, dims, mask)
    assert torch.equal(b.cpu(), want)


def test_copy_cluster_checks():
    with pytest.raises(ValueError, match="cluster_mask must be a non-zero int of 2 bits") as info:
        @T.prim_func
        def wide_mask(a: T.Tensor((64, 64), "float16")):
            with T.ClusterKernel(2, threads=128, cluster_dims=(2, 1, 1)) as bx:
                s = T.alloc_shared((16, 16), "float16")
                T.copy_cluster(a[0, bx * 16], s, cluster_mask=0b100)
    assert "test_cluster_barriers.py" in str(info.value)
    with pytest.raises(ValueError, match="dst_block= .* or cluster_mask="):
        @T.prim_func
        def dsmem(a: T.Tensor((64, 64), "float16")):
            with T.ClusterKernel(2, threads=128, cluster_dims=(2, 1, 1)):
                s = T.alloc_shared((16, 16), "float16")
                d = T.alloc_shared((16, 16), "float16")
                T.copy_cluster(s, d, dst_block=1, cluster_mask=1)
    with pytest.raises(ValueError, match="copies a global tile into shared memory"):
        @T.prim_func
        def to_global(a: T.Tensor((64, 64), "float16")):
            with T.ClusterKernel(2, threads=128, cluster_dims=(2, 1, 1)):
                s = T.alloc_shared((16, 16), "float16")
                T.copy_cluster(s, a[0:16, 0:16], cluster_mask=1)


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
def test_copy_cluster_builds():
    src = tilelang.compile(_multicast(4, 8, (4, 1, 1), 0b0011),
                           target="cuda -arch=sm_90a").get_kernel_source()
    assert "__cluster_dims__(4, 1, 1)" in src
