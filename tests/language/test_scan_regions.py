"""`T.cumsum` / `T.cummax` of regions (`big[0:M, 0:N]` of a wider tile, or different regions
of two tiles), scanned through a temporary tile; `annotations=` is accepted."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.runtime import toolkit

HAS_COMPILER = toolkit.nvrtc_backend() is not None or toolkit.nvcc_path() is not None
DEVICES = ["cpu", pytest.param("cuda", marks=[
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")])]


def _region_scan(kind, M, N, wide, dim, reverse, offset):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            big = T.alloc_shared((M, wide), "float32")
            out = T.alloc_shared((M, wide), "float32")
            for i, j in T.Parallel(M, wide):
                big[i, j] = T.float32(-7)
            for i, j in T.Parallel(M, N):
                big[i, j + offset] = A[i, j]
            fn = T.cumsum if kind == "sum" else T.cummax
            fn(src=big[0:M, offset:offset + N], dst=out[0:M, 0:N], dim=dim, reverse=reverse,
               annotations={"note": kind})
            for i, j in T.Parallel(M, N):
                B[i, j] = out[i, j]
    return main


def _expect(a, kind, dim, reverse):
    x = a.flip(dim) if reverse else a
    r = x.cumsum(dim) if kind == "sum" else x.cummax(dim).values
    return r.flip(dim) if reverse else r


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["sum", "max"])
@pytest.mark.parametrize("dim,reverse", [(0, False), (1, True), (1, False)])
def test_region_scans(device, kind, dim, reverse):
    M, N, wide, offset = 16, 24, 40, 8
    a = torch.randn(M, N)
    func = _region_scan(kind, M, N, wide, dim, reverse, offset)
    kernel = tilelang.compile(func, out_idx=[1], target="cpu" if device == "cpu" else "cuda")
    torch.testing.assert_close(kernel(a.to(device)).cpu(), _expect(a, kind, dim, reverse),
                               rtol=1e-5, atol=1e-5)
    if device == "cpu" and HAS_COMPILER:
        tilelang.compile(func, out_idx=[1], target="cuda -arch=sm_90a")


def test_region_shapes_must_match():
    with pytest.raises(ValueError, match="must have the src region's shape \\[8, 8\\]"):
        @T.prim_func
        def k(A: T.Tensor((8, 8), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_shared((8, 16), "float32")
                T.cumsum(src=s[0:8, 0:8], dst=s[0:8, 0:4])


def test_scan_annotations_are_kept_and_printed():
    @T.prim_func
    def f(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            s = T.alloc_fragment((32,), "float32")
            T.copy(A, s)
            T.cumsum(s, annotations={"test.scan": "cumsum", "n": 2})
            T.cummax(s, annotations={"test.scan": "cummax"})
            T.copy(s, B)

    lines = f.script().splitlines()
    assert 'n=2, test.scan="cumsum")' in next(x for x in lines if "T.cumsum(" in x)
    assert 'test.scan="cummax")' in next(x for x in lines if "T.cummax(" in x)
    a = torch.randn(32)
    b = torch.full((32,), float("nan"))
    tilelang.compile(f, target="cpu")(a, b)
    torch.testing.assert_close(b, torch.cummax(torch.cumsum(a, 0), 0).values)
    tilelang.lower(f, target="cuda -arch=sm_90a")


def test_scan_annotations_must_be_a_dict():
    from tilelang.errors import KernelError

    with pytest.raises(KernelError, match="annotations must be a dict"):
        @T.prim_func
        def f(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_fragment((32,), "float32")
                T.copy(A, s)
                T.cumsum(s, annotations=["x"])
