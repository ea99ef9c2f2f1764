"""`T.copy_cluster(src, dst, dst_block=r[, remote_barrier=bar])`: a shared tile copied into
the same tile of block r of the cluster (distributed shared memory). With a barrier and runs
of whole 16-byte units, one thread issues bulk copies (one per contiguous run); otherwise the
block's threads store through the peer's mapped address. The peer's wait on the barrier (or a
cluster barrier) orders the data."""

import pytest
import torch

import tilelang
import tilelang.language as T
from device_params import DEVICES, HAS_COMPILER, target_of

SM90 = "cuda -arch=sm_90a"


def _peer_copy(shape, tile, with_barrier=True, threads=128):
    """Block 0 of each 2-block cluster fills src[tile] from A and copies it into block 1's
    dst[tile]; block 1 waits (on the barrier or the cluster barrier) and writes dst[tile] to B.
    Both tiles start at -1, so an element not copied shows in B."""
    region = tuple(slice(0, t) for t in tile)

    @T.prim_func
    def main(A: T.Tensor(tile, "float32"), B: T.Tensor(tile, "float32")):
        with T.ClusterKernel(2, threads=threads, cluster_dims=(2, 1, 1)) as pid:
            src = T.alloc_shared(shape, "float32")
            dst = T.alloc_shared(shape, "float32")
            bar = T.alloc_cluster_barrier([1])
            T.fill(src, -1.0)
            T.fill(dst, -1.0)
            T.cluster_sync()
            if pid == 0:
                T.copy(A, src[region])
                if with_barrier:
                    T.copy_cluster(src[region], dst[region], dst_block=1, remote_barrier=bar[0])
                else:
                    T.copy_cluster(src[region], dst[region], dst_block=1)
            if not with_barrier:
                T.cluster_sync()
            if pid == 1:
                if with_barrier:
                    T.mbarrier_wait_parity(bar[0], 0)
                T.copy(dst[region], B)
    return main


CASES = [
    ((128,), (128,), True),            # one contiguous run of 512 bytes: bulk
    ((127,), (127,), True),            # 508 bytes: the threads copy
    ((128,), (128,), False),           # no barrier: the threads copy, cluster_sync orders
    ((4, 64), (4, 32), True),          # 4 rows of 128 bytes: 4 bulk copies, one arrival
    ((4, 64), (4, 31), True),          # rows of 124 bytes: the threads copy
    ((2, 4, 32), (2, 4, 16), True),    # 8 rows of 64 bytes
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape,tile,with_barrier", CASES)
def test_peer_copy_values(device, shape, tile, with_barrier):
    kernel = tilelang.compile(_peer_copy(shape, tile, with_barrier), out_idx=[1],
                              target=target_of(device))
    a = torch.randn(tile, device=device)
    b = kernel(a)
    assert torch.equal(b, a)


def _source(shape, tile, with_barrier=True):
    return tilelang.compile(_peer_copy(shape, tile, with_barrier), out_idx=[1],
                            target=SM90).get_kernel_source()


@pytest.mark.skipif(not HAS_COMPILER, reason="needs NVRTC or nvcc")
def test_bulk_path_one_arrival_for_all_rows():
    src = _source((4, 64), (4, 32))
    # the bytes of all rows are announced once (one arrival), then a bulk copy per row
    assert src.count("tl::mbarrier_arrive_expect_tx_remote(") == 1
    assert "512u" in src  # 4 rows x 32 floats
    assert src.count("tl::tma_store_cluster(") == 1  # inside the loop over the rows
    assert "for (int row0 = 0; row0 < 4; ++row0)" in src
    assert "map_shared_rank" not in src


@pytest.mark.skipif(not HAS_COMPILER, reason="needs NVRTC or nvcc")
def test_bulk_path_single_run():
    src = _source((128,), (128,))
    assert "tl::tma_store_cluster((&dst[0]), (&src[0]), 1u, 512u, (&bar[0]))" in src


@pytest.mark.skipif(not HAS_COMPILER, reason="needs NVRTC or nvcc")
@pytest.mark.parametrize("shape,tile,with_barrier", [((127,), (127,), True),
                                                     ((128,), (128,), False),
                                                     ((4, 64), (4, 31), True)])
def test_thread_path(shape, tile, with_barrier, capfd):
    src = _source(shape, tile, with_barrier)
    assert "tl::tma_store_cluster" not in src
    assert "tl::map_shared_rank(" in src
    assert ("tl::mbarrier_arrive_remote(" in src) == with_barrier
    if with_barrier:
        assert "is not a multiple of 16 bytes" in capfd.readouterr().err


def _bad(kind):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.ClusterKernel(2, threads=64, cluster_dims=(1 if kind == "no cluster" else 2,
                                                          1, 1)):
            src = T.alloc_shared((64,), "float32")
            dst = T.alloc_shared((64,), "float16" if kind == "dtype" else "float32")
            if kind == "global":
                T.copy_cluster(A, dst, dst_block=1)
            elif kind == "rank":
                T.copy_cluster(src, dst, dst_block=2)
            elif kind == "barrier only":
                bar = T.alloc_cluster_barrier([1])
                T.copy_cluster(src, dst, remote_barrier=bar[0])
            else:
                T.copy_cluster(src, dst, dst_block=1)
    return main


@pytest.mark.parametrize("kind,message", [
    ("no cluster", "T.ClusterKernel"),
    ("dtype", "does not convert"),
    ("global", "is global"),
    ("rank", "not a block of the cluster of 2"),
    ("barrier only", "needs dst_block"),
])
def test_errors_name_the_line(kind, message):
    with pytest.raises(Exception, match=message) as info:
        tilelang.compile(_bad(kind), target="cpu")
    assert "test_copy_cluster_peer.py" in str(info.value)
