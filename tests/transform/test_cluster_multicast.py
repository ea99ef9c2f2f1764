"""Which tiles of a clustered kernel are multicast (warp_specialize/__init__.py), and the CUDA around
it: cluster dims on the kernel, barrier counts, cluster barriers, slices; NVRTC compiles it.
Also T.ClusterKernel's checks and its meaning on the CPU interpreter (none: same results)."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.gpu import kernels as K  # noqa: E402

SM90 = "cuda -arch=sm_90a"


def _source(func, **configs):
    return tilelang.compile(func, target=SM90, pass_configs=configs).get_kernel_source()


def test_gemm_cluster_along_x_multicasts_a_in_slices():
    src = _source(K.gemm(512, 1024, 256, 128, 128, 64, out_dtype="float16", num_stages=3,
                         threads=256, cluster_dims=(2, 1, 1)))
    assert "__cluster_dims__(2, 1, 1)" in src
    (mcast,) = [ln for ln in src.splitlines() if "tma_load_multicast" in ln]
    assert "(&A_desc)" in mcast and "tl::cluster_ctarank() * 64" in mcast  # 64 of 128 rows
    assert ", 3, " in mcast  # both blocks of the cluster
    assert "tl::mbarrier_init((&empty_bar[s]), 16);" in src  # 8 consumer warps x 2 blocks
    assert "tl::mbarrier_arrive_cluster<2>" in src and "tl::mbarrier_arrive(" not in src
    assert src.count("tl::cluster_sync();") == 2 and "__syncthreads" not in src


def test_tiles_that_differ_across_the_cluster_are_not_multicast():
    src = _source(K.gemm(512, 1024, 256, 128, 128, 64, out_dtype="float16", num_stages=3,
                         threads=256, cluster_dims=(1, 1, 1)))
    assert "__cluster_dims__" not in src  # a cluster of one is no cluster
    # along y the blocks of a cluster share B's tile (columns bx), not A's (rows by)
    src = _source(K.gemm(512, 1024, 256, 128, 128, 64, out_dtype="float16", num_stages=3,
                         threads=256, cluster_dims=(1, 2, 1)))
    assert "tma_load_multicast((&B_desc)" in src and "tma_load_multicast((&A_desc)" not in src


def test_slices_must_be_whole_swizzle_atoms():
    # 64 rows over a cluster of 8: slices of 8 rows are fine; 32 rows over 8 are not
    kern = tilelang.compile(K.gemm(256, 2048, 256, 32, 256, 64, out_dtype="float16",
                                   num_stages=3, threads=128, cluster_dims=(8, 1, 1)),
                            target=SM90)
    assert "tma_load_multicast" not in kern.get_kernel_source()
    assert "no multicast of A_shared" in kern.get_host_source()


def test_cluster_needs_sm90_else_dropped():
    kern = tilelang.compile(K.gemm(256, 512, 128, 128, 128, 32, out_dtype="float16",
                                   cluster_dims=(2, 1, 1)), target="cuda -arch=sm_80")
    assert "__cluster_dims__" not in kern.get_kernel_source()
    assert "cluster_dims=(2, 1, 1) ignored" in kern.get_host_source()


def _cluster_gemm(M, N, Kd, cluster_dims):
    @T.prim_func
    def main(A: T.Tensor((M, Kd), "float16"), B: T.Tensor((Kd, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.ClusterKernel(T.ceildiv(N, 32), T.ceildiv(M, 32), cluster_dims=cluster_dims,
                             threads=128) as (bx, by):
            A_s = T.alloc_shared((32, 32), "float16")
            B_s = T.alloc_shared((32, 32), "float16")
            C_l = T.alloc_fragment((32, 32), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(Kd, 32), num_stages=2):
                T.copy(A[by * 32, k * 32], A_s)
                T.copy(B[k * 32, bx * 32], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 32, bx * 32])
    return main


def test_cluster_kernel_runs_on_the_cpu_interpreter():
    M, N, Kd = 50, 64, 70
    kern = tilelang.compile(_cluster_gemm(M, N, Kd, 2), target="cpu", out_idx=[2])
    a, b = torch.randn(M, Kd).half(), torch.randn(Kd, N).half()
    torch.testing.assert_close(kern(a, b), a.float() @ b.float(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dims,message", [
    ((3, 1, 1), "not a multiple of the cluster"),
    ((2, 2, 2, 1), "tuple of 1-3"),
    (0, "positive int"),
    ((4, 4, 1), "at most 8 blocks"),
])
def test_bad_cluster_dims_are_located_errors(dims, message):
    with pytest.raises(KernelError, match=message) as info:
        _cluster_gemm(64, 64, 64, dims)
    assert "test_cluster_multicast.py" in str(info.value)


@pytest.mark.skipif(__import__("tilelang.runtime.toolkit", fromlist=["x"]).nvrtc_backend()
                    is None, reason="NVRTC is not installed")
def test_multicast_kernels_compile_with_nvrtc():
    from tilelang.runtime.compiler import compile_cuda

    for func in (K.gemm(500, 1024, 320, 128, 128, 64, out_dtype="float16", num_stages=3,
                        threads=256, cluster_dims=(2, 1, 1)),
                 K.gemm(512, 384, 200, 128, 128, 64, out_dtype="float16", num_stages=3,
                        threads=256, cluster_dims=(1, 2, 1))):
        compile_cuda(tilelang.lower(func, target=SM90), "sm_90a", use_cache=False)


def test_ring_barriers_are_not_reused_by_the_epilogue():
    """A peer of the cluster still arrives on this block's empty barriers after this block's
    main loop: the staged epilogue, placed in the dead stage buffers, must not cover them
    (racecheck on an H200 caught the epilogue tile over the barriers)."""
    import re

    src = _source(K.gemm(512, 672, 512, 256, 128, 32, out_dtype="float16", num_stages=2,
                         threads=256, cluster_dims=(1, 2, 1)))
    offsets = dict(re.findall(r"\* (\w+) = reinterpret_cast<[^>]*>\(smem \+ (\d+)\)", src))
    epilogue_end = int(offsets["C_local_epi"]) + 256 * 128 * 2
    assert int(offsets["full_bar"]) >= epilogue_end and int(offsets["empty_bar"]) >= epilogue_end
    # without clusters the barriers are dead after the loop and their bytes are reused
    src = _source(K.gemm(512, 672, 512, 256, 128, 32, out_dtype="float16", num_stages=2,
                         threads=256))
    offsets = dict(re.findall(r"\* (\w+) = reinterpret_cast<[^>]*>\(smem \+ (\d+)\)", src))
    assert int(offsets["full_bar"]) < int(offsets["C_local_epi"]) + 256 * 128 * 2
