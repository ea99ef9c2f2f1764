"""How `T.gemm` is split over the block's warps on the tensor cores: every warp owns whole
16 x 8 mma atoms (wgmma: whole warpgroups of m64 rows) and together they cover the tile. A
tile no grid of all the warps covers is a located error, as in the reference (its issue
2537: a split that floors N / warps would leave the last columns unwritten). The CUDA-core
gemm (float64, targets before sm_80) keeps computing such tiles on fewer warps."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.language import GemmWarpPolicy

SM90 = "cuda -arch=sm_90a"


def single_block_gemm(M, N, K, threads, policy, dtype=T.float16, accum=T.float32):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(1, 1, threads=threads):
            A_s = T.alloc_shared((M, K), dtype)
            B_s = T.alloc_shared((K, N), dtype)
            C_f = T.alloc_fragment((M, N), accum)
            T.clear(C_f)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_f, policy=policy)
            T.copy(C_f, C)

    return main


@pytest.mark.parametrize("M,N,threads,policy,configs", [
    (16, 104, 384, GemmWarpPolicy.Square, {}),     # 12 warps along N: 12 * 8 != 104
    (16, 104, 384, GemmWarpPolicy.FullRow, {}),
    (288, 8, 544, GemmWarpPolicy.Square, {}),      # 17 warps along M: 17 * 16 != 288
    (336, 8, 640, GemmWarpPolicy.FullCol, {"tl.disable_wgmma": True}),
    (16, 16, 224, GemmWarpPolicy.Square, {}),      # 7 warps, one 16 x 16 tile
    (64, 104, 384, GemmWarpPolicy.Square, {}),     # the wgmma route, 3 warpgroups
    (336, 16, 640, GemmWarpPolicy.FullCol, {}),
])
def test_uncovered_tiles_are_a_located_error(M, N, threads, policy, configs):
    with pytest.raises(ValueError, match="No valid warp partition for T.gemm") as info:
        tilelang.compile(single_block_gemm(M, N, 32, threads, policy), out_idx=[2],
                         target=SM90, pass_configs=configs)
    message = str(info.value)
    assert f"M={M}, N={N}" in message and f"by {threads // 32} warps" in message
    assert "test_gemm_warp_partition.py" in message  # the user's T.gemm line


@pytest.mark.parametrize("M,N,threads,policy,configs,call", [
    (16, 104, 416, GemmWarpPolicy.Square, {}, "tl::gemm_ss<16, 104, 32, 1, 13,"),
    (192, 104, 384, GemmWarpPolicy.FullCol, {"tl.disable_wgmma": True},
     "tl::gemm_ss<192, 104, 32, 12, 1,"),
    (48, 64, 256, GemmWarpPolicy.FullRow, {}, "tl::gemm_ss<48, 64, 32, 1, 8,"),
])
def test_covering_splits_use_every_warp(M, N, threads, policy, configs, call):
    kernel = tilelang.compile(single_block_gemm(M, N, 32, threads, policy), out_idx=[2],
                              target=SM90, pass_configs=configs)
    assert call in kernel.get_kernel_source()


def test_cuda_core_gemm_still_computes_small_tiles_on_fewer_warps():
    kernel = tilelang.compile(single_block_gemm(16, 16, 16, 256, GemmWarpPolicy.Square,
                                                T.float64, T.float64), out_idx=[2], target=SM90)
    assert "tl::gemm_fma_ss<16, 16, 16," in kernel.get_kernel_source()


@pytest.mark.parametrize("M,N,threads", [(16, 104, 416), (48, 64, 256)])
def test_covering_split_on_the_interpreter(M, N, threads):
    kernel = tilelang.compile(single_block_gemm(M, N, 32, threads, GemmWarpPolicy.Square),
                              out_idx=[2], target="cpu")
    a = torch.randn(M, 32).half()
    b = torch.randn(32, N).half()
    torch.testing.assert_close(kernel(a, b), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("M,N,threads,policy,configs", [
    (16, 104, 416, GemmWarpPolicy.Square, {}),
    (192, 104, 384, GemmWarpPolicy.FullCol, {"tl.disable_wgmma": True}),
    (48, 64, 256, GemmWarpPolicy.FullRow, {}),
    (128, 192, 384, GemmWarpPolicy.FullRow, {}),
])
def test_covering_split_on_the_gpu(M, N, threads, policy, configs):
    kernel = tilelang.compile(single_block_gemm(M, N, 32, threads, policy),
                              pass_configs=configs)
    a = torch.randn(M, 32, device="cuda").half()
    b = torch.randn(32, N, device="cuda").half()
    c = torch.full((M, N), float("nan"), device="cuda")
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)
