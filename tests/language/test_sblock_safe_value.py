"""`T.annotate_safe_value`: what global loads outside their tensor read, in the whole kernel or,
inside `with T.sblock(...)`, in that block only (an inner block's value wins). Every path a
copy may take honours it: element loads, the vector / cp.async copies (which fill zeros, so a
copy whose source may leave the tensor keeps element loads), and the TMA pipeline (the same)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from device_params import DEVICES, target_of

SM90 = "cuda -arch=sm_90a"
NO_WS = {tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}


def _nested_blocks(M, N, BM, BN):
    """`inner` is filled under the inner block's -7, `outer` under the outer block's -3, and a
    T.Parallel load inside the outer block reads -3 too; the kernel's own value is 5."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "int32"), Out: T.Tensor((3, BM, BN), "int32")):
        with T.Kernel(1, threads=128):
            inner = T.alloc_shared((BM, BN), "int32")
            outer = T.alloc_shared((BM, BN), "int32")
            T.annotate_safe_value({A: 5})
            with T.sblock("outer"):
                T.reads()
                T.writes()
                T.annotate_safe_value({A: -3})
                with T.sblock("inner"):
                    T.annotate_safe_value({A: -7})
                    T.copy(A[0:BM, 0:BN], inner)
                T.copy(A[0:BM, 0:BN], outer)
                for i, j in T.Parallel(BM, BN):
                    Out[2, i, j] = A[i, j] + 1
            for i, j in T.Parallel(BM, BN):
                Out[0, i, j] = inner[i, j]
                Out[1, i, j] = outer[i, j]
    return main


def _expected_nested(a, BM, BN):
    M, N = a.shape
    out = torch.empty(3, BM, BN, dtype=torch.int32)
    for k, pad in enumerate((-7, -3, -3)):
        out[k].fill_(pad)
        out[k, :M, :N] = a
    out[2] += 1
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("M, N", [(60, 60), (61, 53)])
def test_block_values_are_lexically_scoped(device, M, N):
    BM = BN = 64
    kernel = tilelang.compile(_nested_blocks(M, N, BM, BN), out_idx=[1],
                              target=target_of(device), pass_configs=NO_WS)
    a = torch.randint(-1000, 1000, (M, N), dtype=torch.int32)
    out = kernel(a.to(device))
    torch.testing.assert_close(out.cpu(), _expected_nested(a, BM, BN))


def test_block_values_build_for_sm90():
    src = tilelang.compile(_nested_blocks(60, 60, 64, 64), out_idx=[1], target=SM90,
                           pass_configs=NO_WS).get_kernel_source()
    assert "-7" in src and "-3" in src
    assert "cp_async_zfill" not in src  # zero-filling copies would lose the values


def _shifted_rows(M, N, BM, BN, pad, parallel):
    """Rows shifted down by 10: the first 10 rows of the first block row read `pad`."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (bx, by):
            S = T.alloc_shared((BM, BN), "float16")
            T.annotate_safe_value({A: pad})
            if parallel:
                for i, j in T.Parallel(BM, BN):
                    S[i, j] = A[by * BM + i - 10, bx * BN + j]
            else:
                T.copy(A[by * BM - 10, bx * BN], S)
            for i, j in T.Parallel(BM, BN):
                B[by * BM + i, bx * BN + j] = S[i, j]
    return main


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("parallel", [True, False])
def test_kernel_value_survives_vector_copies(device, parallel):
    M, N = 256, 192  # rows of 16-byte multiples: the copy would be cp.async with zero-fill
    kernel = tilelang.compile(_shifted_rows(M, N, 64, 64, 3.0, parallel), out_idx=[1],
                              target=target_of(device), pass_configs=NO_WS)
    a = torch.randn(M, N, dtype=torch.float16)
    b = kernel(a.to(device)).cpu()
    expect = torch.full((M, N), 3.0, dtype=torch.float16)
    expect[10:] = a[:-10]
    torch.testing.assert_close(b, expect)


def test_kernel_value_keeps_element_loads_on_sm90():
    src = tilelang.compile(_shifted_rows(256, 192, 64, 64, 3.0, True), out_idx=[1],
                           target=SM90, pass_configs=NO_WS).get_kernel_source()
    assert "cp_async_zfill" not in src and "3.0" in src
    # a zero value is what zero-filling gives: the fast copy stays
    zero = tilelang.compile(_shifted_rows(256, 192, 64, 64, 0.0, True), out_idx=[1],
                            target=SM90, pass_configs=NO_WS).get_kernel_source()
    assert "cp_async_zfill" in zero


def _pipelined_sum(M, N, pad):
    """Row sums of A padded to whole 64 x 64 tiles with `pad`, through a pipelined copy."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, 64), "float32")):
        with T.Kernel(T.ceildiv(M, 64), threads=128) as bx:
            S = T.alloc_shared((64, 64), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            T.annotate_safe_value({A: pad})
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(N, 64), num_stages=2):
                T.copy(A[bx * 64, k * 64], S)
                for i, j in T.Parallel(64, 64):
                    acc[i, j] += S[i, j]
            T.copy(acc, B[bx * 64, 0])
    return main


@pytest.mark.parametrize("device", DEVICES)
def test_kernel_value_in_a_pipelined_copy(device):
    M, N = 100, 100
    kernel = tilelang.compile(_pipelined_sum(M, N, -1.0), target=target_of(device))
    a = torch.randn(M, N)
    b = torch.full((M, 64), float("nan"), device=device)
    kernel(a.to(device), b)
    padded = torch.full((128, 128), -1.0)
    padded[:M, :N] = a
    torch.testing.assert_close(b.cpu(), (padded[:, :64] + padded[:, 64:])[:M])


def test_pipelined_copy_with_a_value_is_not_tma():
    src = tilelang.compile(_pipelined_sum(100, 100, -1.0), target=SM90).get_kernel_source()
    assert "tma_load" not in src and "(-1.0f)" in src
    plain = tilelang.compile(_pipelined_sum(100, 100, 0.0), target=SM90).get_kernel_source()
    assert "tma_load" in plain


def test_sblock_outside_a_kernel_is_an_error():
    with pytest.raises(ValueError, match="T.sblock must be inside") as info:
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.sblock("b"):
                pass
            with T.Kernel(1, threads=1):
                A[0] = 1.0
    assert "test_sblock_safe_value.py" in str(info.value)
