"""Thread block clusters and TMA multicast on the GPU (sm_90a): a tile every block of a
cluster loads alike is loaded once per cluster, a slice by each block, and every block gets
the whole tile; results match torch on ragged shapes, for clusters along either grid axis,
with one pipeline iteration, and with the warp-specialised pipeline off (clusters only)."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang

from . import kernels as K
from .hopper import check_int4_gemm, need_sm90

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "dequantize_gemm"))
import example_dequant_gemm_int4 as dq  # noqa: E402


def _gemm(M, N, Kd, cluster, tiles=(128, 128, 64), stages=3, threads=256, configs=None,
          multicast=1):
    need_sm90()
    torch.manual_seed(M * 7 + N + Kd)
    bm, bn, bk = tiles
    kern = tilelang.compile(K.gemm(M, N, Kd, bm, bn, bk, out_dtype="float16", num_stages=stages,
                                   threads=threads, cluster_dims=cluster),
                            target="cuda", pass_configs=configs or {})
    src = kern.get_kernel_source()
    assert "__cluster_dims__(%d, %d, %d)" % tuple(cluster) in src
    assert multicast is None or src.count("tl::tma_load_multicast(") == multicast, src
    a = torch.randn(M, Kd, device="cuda", dtype=torch.float16)
    b = torch.randn(Kd, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    kern(a, b, c)
    ref = a.double() @ b.double()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    assert not torch.isnan(c).any() and err < 2e-3, err


@pytest.mark.parametrize("M,N,Kd", [(500, 1024, 320), (256, 512, 64), (130, 256, 1000)])
@pytest.mark.parametrize("size", [2, 4])
def test_gemm_a_multicast_along_x(M, N, Kd, size):
    # the A tile (rows by, all of K) is the same for the blocks of a cluster along x
    if (N // 128) % size:
        pytest.skip("grid not a multiple of the cluster")
    _gemm(M, N, Kd, (size, 1, 1))


def test_gemm_b_multicast_along_y():
    # a cluster along y shares the B tile (two 64-column TMA boxes), not A
    _gemm(512, 384, 200, (1, 2, 1), multicast=2)


def test_gemm_cluster_without_warp_specialisation():
    _gemm(300, 512, 256, (2, 1, 1), multicast=0,
          configs={tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})


def test_many_clusters_and_stages():
    # 8192 blocks in 4096 clusters: every ring phase is reused many times
    _gemm(2048, 4096, 1024, (2, 1, 1), tiles=(128, 128, 64), stages=4)


@pytest.mark.parametrize("cfg", [
    dict(block_M=256, block_N=64, block_K=128, num_stages=2, cluster=2),
    dict(block_M=256, block_N=128, block_K=64, num_stages=3, split_k=2, cluster=2),
    dict(block_M=128, block_N=64, block_K=64, num_stages=4, cluster=4),
])
def test_int4_dequant_with_multicast_matches_torch(cfg):
    need_sm90()
    M, N, Kd, G = 200, 1024, 2048, 128
    torch.manual_seed(len(cfg))
    kern = tilelang.compile(dq.dequant_gemm_int4.get_tir(M, N, Kd, G, **cfg), target="cuda")
    assert "tl::tma_load_multicast(" in kern.get_kernel_source()
    check_int4_gemm(dq, kern, M, N, Kd, G, cfg.get("split_k", 1))


def _random_cases(n, seed=20261122):
    """Random GEMM shapes, tiles, stages and clusters whose grid the cluster divides."""
    import random

    rng = random.Random(seed)
    cases = []
    while len(cases) < n:
        bm, bn = rng.choice([(64, 128), (128, 128), (128, 256), (256, 128), (128, 64)])
        bk = rng.choice([32, 64])
        threads = 256 if bm >= 128 else 128
        axis, size = rng.choice([0, 1]), rng.choice([2, 2, 4])
        gx, gy = rng.randint(1, 6) * (size if axis == 0 else 1), \
            rng.randint(1, 6) * (size if axis == 1 else 1)
        # ragged edges inside the last tile of each dimension
        M = gy * bm - rng.choice([0, 0, rng.randint(1, bm - 1)])
        N = gx * bn - rng.choice([0, rng.randint(1, bn - 1) // 8 * 8])
        Kd = rng.choice([bk, 2 * bk, 300, 512, 1000])
        cluster = (size, 1, 1) if axis == 0 else (1, size, 1)
        cases.append((M, N, Kd, (bm, bn, bk), rng.choice([2, 3, 4]), threads, cluster))
    return cases


@pytest.mark.parametrize("M,N,Kd,tiles,stages,threads,cluster", _random_cases(16))
def test_random_clustered_gemms_match_torch(M, N, Kd, tiles, stages, threads, cluster):
    # whether a tile is multicast depends on the draw (TMA needs 16-byte row pitches)
    _gemm(M, N, Kd, cluster, tiles, stages, threads, multicast=None)
