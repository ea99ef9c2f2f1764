"""`T.alloc_var` of a vector dtype (one private element per lane, assigned a vector by name)
and `T.extract_lane` (a lane as a scalar), on the interpreter and in CUDA; its checks."""

import pytest
import torch

import tilelang
import tilelang.language as T
from device_params import HAS_COMPILER, DEVICES


def _swap_kernel(dtype, vector_dtype, n):
    vector_dtype = getattr(T, vector_dtype)

    @T.prim_func
    def kernel(A: T.Tensor((n, 2), dtype), B: T.Tensor((n, 2), dtype)):
        with T.Kernel(1, threads=32):
            t = T.get_thread_binding()
            packed = T.alloc_var(vector_dtype)
            if t < n:
                packed = vector_dtype(A[t, 0], A[t, 1])
                B[t, 0] = T.extract_lane(packed, 1)
                packed = T.Broadcast(A[t, 0] * 2, 2) + packed
                B[t, 1] = T.extract_lane(packed, 0)
    return kernel


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,vector_dtype", [("float16", "float16x2"),
                                                ("bfloat16", "bfloat16x2"),
                                                ("int32", "int32x2")])
def test_lanes_are_assigned_and_extracted(device, dtype, vector_dtype):
    n = 27
    kernel = tilelang.compile(_swap_kernel(dtype, vector_dtype, n),
                              target="cpu" if device == "cpu" else "cuda")
    a = (torch.randint(-40, 40, (n, 2)) / 4).to(getattr(torch, dtype)).to(device)
    b = torch.zeros((n, 2), dtype=a.dtype, device=device) - 99
    kernel(a, b)
    want = torch.stack([a[:, 1], a[:, 0] * 3], dim=1)  # exact: quarters, small
    assert torch.equal(b.cpu(), want.cpu())


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
def test_builds_for_sm90a():
    tilelang.compile(_swap_kernel("bfloat16", "bfloat16x2", 8), target="cuda -arch=sm_90a")


def test_extract_lane_checks():
    v = T.float16x2(T.float16(1.0), T.float16(2.0))
    assert T.extract_lane(v, 1) is v.lanes[1]
    with pytest.raises(TypeError, match="expects a PrimExpr"):
        T.extract_lane(1, 0)
    with pytest.raises(ValueError, match="expects a vector expression"):
        T.extract_lane(T.dynamic("s", "float16"), 0)
    with pytest.raises(TypeError, match="compile-time integer"):
        T.extract_lane(v, T.dynamic("lane"))
    for lane in (-1, 2):
        with pytest.raises(IndexError, match="out of bounds"):
            T.extract_lane(v, lane)
