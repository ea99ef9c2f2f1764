"""`T.c2d_im2col` / `T.im2col` (the reference's convolution helper): an implicit-GEMM
convolution written with it matches torch's conv2d on the CPU interpreter (strides,
dilations, paddings, ragged M and K), and inside `T.Pipelined` its gather becomes cp.async."""

from __future__ import annotations

import pytest
import torch

import tilelang
import tilelang.language as T


def conv(N, C, H, W, F, KH, S, D, P, block_M=64, block_N=64, block_K=32, alias=False):
    OH = (H + 2 * P - D * (KH - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (KH - 1) - 1) // S + 1
    im2col = T.im2col if alias else T.c2d_im2col

    @T.prim_func
    def main(data: T.Tensor((N, H, W, C), "float16"),
             kernel: T.Tensor((KH, KH, C, F), "float16"),
             out: T.Tensor((N, OH, OW, F), "float32")):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M),
                      threads=128) as (bx, by):
            data_shared = T.alloc_shared((block_M, block_K), "float16")
            kernel_shared = T.alloc_shared((block_K, block_N), "float16")
            out_local = T.alloc_fragment((block_M, block_N), "float")
            kernel_flat = T.Tensor((KH * KH * C, F), "float16", kernel.data)
            out_flat = T.Tensor((N * OH * OW, F), "float32", out.data)
            T.clear(out_local)
            for k_iter in T.Pipelined(T.ceildiv(KH * KH * C, block_K), num_stages=2):
                im2col(data, data_shared, by, k_iter, KH, S, D, P)
                T.copy(kernel_flat[k_iter * block_K, bx * block_N], kernel_shared)
                T.gemm(data_shared, kernel_shared, out_local)
            T.copy(out_local, out_flat[by * block_M, bx * block_N])

    return main


@pytest.mark.parametrize("N,C,H,W,F,KH,S,D,P", [
    (2, 12, 9, 11, 20, 3, 1, 1, 1),
    (1, 8, 10, 7, 16, 3, 2, 1, 1),
    (2, 4, 9, 9, 8, 3, 1, 2, 2),
    (1, 16, 6, 6, 24, 1, 1, 1, 0),
])
def test_matches_torch_conv2d(N, C, H, W, F, KH, S, D, P):
    torch.manual_seed(N * 100 + C)
    x = torch.randn(N, H, W, C, dtype=torch.float16)
    w = torch.randn(KH, KH, C, F, dtype=torch.float16)
    OH = (H + 2 * P - D * (KH - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (KH - 1) - 1) // S + 1
    out = torch.full((N, OH, OW, F), float("nan"))
    tilelang.compile(conv(N, C, H, W, F, KH, S, D, P), target="cpu")(x, w, out)
    ref = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2).double(),
                                     w.permute(3, 2, 0, 1).double(), stride=S, padding=P,
                                     dilation=D).permute(0, 2, 3, 1)
    torch.testing.assert_close(out.double(), ref, rtol=1e-3, atol=1e-3)


def test_gather_is_an_async_stage_on_the_gpu_targets():
    for arch in ("sm_80", "sm_90a"):
        src = tilelang.lower(conv(2, 16, 9, 11, 32, 3, 1, 1, 1, alias=True),
                             target=f"cuda -arch={arch}")
        assert "tl::cp_async_zfill" in src, arch


def test_bad_arguments_are_located_errors():
    from tilelang.errors import KernelError

    with pytest.raises(KernelError, match=r"\(N, H, W, C\) image tensor") as info:
        @T.prim_func
        def main(data: T.Tensor((16, 16), "float16")):
            with T.Kernel(1, threads=128):
                col = T.alloc_shared((16, 16), "float16")
                T.c2d_im2col(data, col, 0, 0, 3, 1, 1, 1)

    assert isinstance(info.value, TypeError)
    assert info.value.loc is not None and info.value.loc.filename.endswith("test_im2col.py")


@pytest.mark.gpu
@pytest.mark.parametrize("N,C,H,W,F,KH,S,D,P", [
    (2, 16, 9, 11, 40, 3, 1, 1, 1),
    (1, 8, 10, 7, 16, 3, 2, 1, 1),
    (3, 24, 9, 9, 72, 3, 1, 2, 2),
])
def test_matches_torch_conv2d_on_the_gpu(N, C, H, W, F, KH, S, D, P):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    torch.manual_seed(N * 100 + C + 1)
    x = torch.randn(N, H, W, C, dtype=torch.float16, device="cuda")
    w = torch.randn(KH, KH, C, F, dtype=torch.float16, device="cuda")
    OH = (H + 2 * P - D * (KH - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (KH - 1) - 1) // S + 1
    out = torch.full((N, OH, OW, F), float("nan"), device="cuda")
    tilelang.compile(conv(N, C, H, W, F, KH, S, D, P), target="cuda")(x, w, out)
    ref = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2).double(),
                                     w.permute(3, 2, 0, 1).double(), stride=S, padding=P,
                                     dilation=D).permute(0, 2, 3, 1)
    torch.testing.assert_close(out.double(), ref, rtol=1e-3, atol=1e-3)
