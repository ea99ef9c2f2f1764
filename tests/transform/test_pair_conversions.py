"""pair_conversions: an unrolled loop of casts between float32 and float16 / bfloat16 / float8
converts two values per packed CUDA conversion (`__float22half2_rn`, ...), storing the same
values; loops that do not have the exact shape stay scalar."""

import pytest
import torch

import tilelang
import tilelang.language as T

PAIRS = [
    (T.float32, T.float16, "__float22half2_rn(make_float2("),
    (T.float16, T.float32, "__half22float2(__halves2half2("),
    (T.float32, T.bfloat16, "__float22bfloat162_rn(make_float2("),
    (T.bfloat16, T.float32, "__bfloat1622float2(__halves2bfloat162("),
    (T.float32, T.float8_e4m3fn, "__NV_SATFINITE, __NV_E4M3)"),
    (T.float32, T.float8_e5m2, "__NV_SATFINITE, __NV_E5M2)"),
]


def copy_cast(M, src, dst):
    @T.prim_func
    def main(A: T.Tensor((M,), src), B: T.Tensor((M,), dst)):
        with T.Kernel(T.ceildiv(M, 256), threads=128) as bx:
            T.copy(A[bx * 256:bx * 256 + 256], B[bx * 256:bx * 256 + 256])
    return main


def parallel_cast(M, N, src, dst):
    @T.prim_func
    def main(A: T.Tensor((M, N), src), B: T.Tensor((M, N), dst)):
        with T.Kernel(T.ceildiv(M, 16), threads=128) as bx:
            A_frag = T.alloc_fragment((16, N), src)
            B_frag = T.alloc_fragment((16, N), dst)
            T.copy(A[bx * 16, 0], A_frag)
            for i, j in T.Parallel(16, N):
                B_frag[i, j] = A_frag[i, j]
            T.copy(B_frag, B[bx * 16, 0])
    return main


def _source(func):
    return tilelang.compile(func, target="cuda -arch=sm_90a").get_kernel_source()


@pytest.mark.parametrize("src,dst,packed", PAIRS)
def test_casts_pair_up(src, dst, packed):
    for func in (copy_cast(1024, src, dst), parallel_cast(64, 64, src, dst)):
        source = _source(func)
        assert packed in source and "tl::store_pair(" in source
        assert f"tl::cast<{dst.ctype}>" not in source


def test_other_loops_stay_scalar():
    # float16 -> bfloat16 has no packed conversion: unchanged
    assert "tl::store_pair" not in _source(copy_cast(1024, T.float16, T.bfloat16))
    # an arithmetic value, not a plain cast of a load: unchanged
    @T.prim_func
    def scaled(A: T.Tensor((1024,), T.float32), B: T.Tensor((1024,), T.float16)):
        with T.Kernel(4, threads=128) as bx:
            for i in T.Parallel(256):
                B[bx * 256 + i] = T.cast(A[bx * 256 + i] * 2.0, T.float16)
    assert "tl::store_pair" not in _source(scaled)


def test_odd_lane_counts_stay_scalar():
    from tilelang.ir import nodes as ir
    from tilelang.transform.pair_conversions import pair_conversions

    a = ir.Buffer("a", (3,), "float32", "local")
    b = ir.Buffer("b", (3,), "float16", "local")
    v = ir.Var("v", ir.DType("int32"))
    body = ir.Store(b, (v,), ir.Cast(ir.Load(a, (v,), a.dtype), ir.DType("float16")))
    loop = ir.For(v, ir.const(0), ir.const(3), "unroll", body)
    assert pair_conversions(loop) is loop
    even = ir.For(v, ir.const(0), ir.const(2), "unroll", body)
    assert pair_conversions(even) is not even


@pytest.mark.parametrize("src,dst,packed", PAIRS)
@pytest.mark.parametrize("kind", ["copy", "parallel"])
@pytest.mark.parametrize("size", [1024, 1000])  # paired; ragged (guarded, partly scalar)
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_paired_values_match_torch(src, dst, packed, kind, size):
    if kind == "copy":
        kernel = tilelang.compile(copy_cast(size, src, dst), target="cuda")
        a = (torch.randn(size, device="cuda") * 8).to(src.as_torch())
    else:
        kernel = tilelang.compile(parallel_cast(size // 16, 64, src, dst), target="cuda")
        a = (torch.randn(size // 16, 64, device="cuda") * 8).to(src.as_torch())
    b = torch.full(a.shape, 0x7F, dtype=torch.uint8, device="cuda")  # poison: NaN bits
    b = b.repeat_interleave(dst.bits // 8, -1).view(dst.as_torch()) if dst.bits > 8 else \
        b.view(dst.as_torch())
    kernel(a, b)
    assert torch.equal(b.view(torch.uint8), a.to(dst.as_torch()).view(torch.uint8))
