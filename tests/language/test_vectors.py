"""`T.Ramp` indices and `T.Broadcast` values (language/vectors.py): loads and stores lane by
lane, lane-wise arithmetic, negative lanes counted from the end of the dimension, regions
filled from a vector. Run on the CPU interpreter and built for sm_90a (and on the GPU where
there is one)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from device_params import HAS_COMPILER, DEVICES


def _build(func, device):
    if device == "cpu" and HAS_COMPILER:
        tilelang.compile(func, target="cuda -arch=sm_90a")  # the CUDA form must build too
    return tilelang.compile(func, target="cpu" if device == "cpu" else "cuda")


def _ramp_copy(n, shift, lanes):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((4, lanes), "float32")):
        with T.Kernel(1, threads=1):
            for t in T.serial(4):
                B[t, T.Ramp(0, 1, lanes)] = A[T.Ramp(t - shift, 1, lanes)] * 2.0 + 1.0
    return main


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n,shift,lanes", [(64, 2, 4), (33, 5, 3), (16, 0, 2)])
def test_ramp_loads_count_negative_lanes_from_the_end(device, n, shift, lanes):
    a = torch.randn(n)
    b = torch.full((4, lanes), float("nan"))
    kernel = _build(_ramp_copy(n, shift, lanes), device)
    b = b.to(device)
    kernel(a.to(device), b)
    expect = torch.stack([a[[(t - shift + i) % n for i in range(lanes)]] for t in range(4)])
    torch.testing.assert_close(b.cpu(), expect * 2 + 1)


@pytest.mark.parametrize("device", DEVICES)
def test_ramp_stores_with_stride_and_negative_lanes(device):
    n = 40

    @T.prim_func
    def main(B: T.Tensor((4, 4), "int32"), A: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                A[i] = -1
            for t in T.serial(4):
                A[T.Ramp(t * 3 - 4, 2, 4)] = B[t, T.Ramp(0, 1, 4)]

    b = torch.randint(0, 1000, (4, 4), dtype=torch.int32)
    a = torch.zeros(n, dtype=torch.int32)
    kernel = _build(main, device)
    a = a.to(device)
    kernel(b.to(device), a)
    expect = torch.full((n,), -1, dtype=torch.int32)
    for t in range(4):
        for i in range(4):
            expect[(t * 3 - 4 + 2 * i) % n] = b[t, i]
    assert torch.equal(a.cpu(), expect)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,value", [("int8", -37), ("uint8", 213), ("float16", 1.5)])
def test_broadcast_fills_a_region(device, dtype, value):
    lanes = 32

    @T.prim_func
    def main(src: T.Tensor((1,), dtype), out: T.Tensor((2, lanes), dtype)):
        with T.Kernel(1, threads=1):
            packed = T.alloc_local((lanes,), dtype)
            packed[0:lanes] = T.Broadcast(src[0], lanes)
            for i in T.serial(lanes):
                out[0, i] = packed[i]
            out[1, 0:lanes] = T.Broadcast(T.cast(value, dtype), lanes)

    tdt = getattr(torch, dtype)
    src = torch.tensor([value], dtype=tdt)
    out = torch.zeros((2, lanes), dtype=tdt)
    kernel = _build(main, device)
    out = out.to(device)
    kernel(src.to(device), out)
    assert torch.equal(out.cpu(), torch.full((2, lanes), value, dtype=tdt))


@pytest.mark.parametrize("device", DEVICES)
def test_vector_arithmetic_is_lane_wise_and_stores_into_a_region(device):
    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=1):
            lo = A[T.Ramp(0, 2, 4)]          # even elements
            hi = A[T.Ramp(1, 2, 4)]          # odd elements
            B[0:4] = lo + hi * T.Broadcast(T.float32(10), 4)
            B[4:8] = -(lo - 1.0)

    a = torch.arange(8, dtype=torch.float32)
    b = torch.zeros(8)
    kernel = _build(main, device)
    b = b.to(device)
    kernel(a.to(device), b)
    expect = torch.cat([a[0::2] + a[1::2] * 10, -(a[0::2] - 1)])
    torch.testing.assert_close(b.cpu(), expect)


def test_mismatched_lanes_are_located_errors():
    with pytest.raises(ValueError, match="vector of 4 lanes is stored into B\\[2 lanes\\]") as e:
        @T.prim_func
        def k1(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=1):
                B[T.Ramp(0, 1, 2)] = A[T.Ramp(0, 1, 4)]
    assert "test_vectors.py" in str(e.value)
    with pytest.raises(ValueError, match="region of B with extents \\[3\\]"):
        @T.prim_func
        def k2(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=1):
                B[0:3] = A[T.Ramp(0, 1, 4)]
    with pytest.raises(ValueError, match="T.Ramp lanes must be a positive int"):
        @T.prim_func
        def k3(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=1):
                A[T.Ramp(0, 1, 0)] = 1.0
