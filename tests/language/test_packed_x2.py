"""Packed x2 math (`T.add2`, `sub2`, `mul2`, `fma2`, `max2`, `min2`, `abs2`) on two-lane vectors
of float32, float16 and bfloat16, lane by lane: interpreter against torch, sm_90a builds, a GPU
check, and the reference's argument checks."""

import pytest
import torch

import tilelang
import tilelang.language as T
from device_params import HAS_COMPILER, DEVICES

OPS = {"add2": (T.add2, lambda a, b, c: a + b), "sub2": (T.sub2, lambda a, b, c: a - b),
       "mul2": (T.mul2, lambda a, b, c: a * b), "max2": (T.max2, lambda a, b, c: torch.maximum(a, b)),
       "min2": (T.min2, lambda a, b, c: torch.minimum(a, b)),
       "fma2": (T.fma2, lambda a, b, c: a * b + c), "abs2": (T.abs2, lambda a, b, c: a.abs())}
ARITY = {"fma2": 3, "abs2": 1}


def _kernel(name, dtype, pairs):
    op = OPS[name][0]
    arity = ARITY.get(name, 2)

    @T.prim_func
    def main(A: T.Tensor((pairs * 2,), dtype), B: T.Tensor((pairs * 2,), dtype),
             C: T.Tensor((pairs * 2,), dtype), D: T.Tensor((pairs * 2,), dtype)):
        with T.Kernel(1, threads=32):
            t = T.get_thread_binding()
            if t < pairs:
                idx = T.Ramp(t * 2, 1, 2)
                D[idx] = op(*(A[idx], B[idx], C[idx])[:arity])
    return main


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", list(OPS))
def test_matches_torch(device, dtype, name):
    pairs = 23
    kernel = tilelang.compile(_kernel(name, dtype, pairs),
                              target="cpu" if device == "cpu" else "cuda")
    # quarters in [-2, 2): sums, products and fused products fit bfloat16's 8 bits exactly
    a, b, c = ((torch.randint(-8, 8, (pairs * 2,)) / 4).to(getattr(torch, dtype)).to(device)
               for _ in range(3))
    d = torch.full_like(a, float("nan"))
    kernel(a, b, c, d)
    want = OPS[name][1](a.double(), b.double(), c.double()).to(a.dtype)
    assert torch.equal(d.cpu(), want.cpu())


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_builds_for_sm90a(dtype):
    tilelang.compile(_kernel("fma2", dtype, 8), target="cuda -arch=sm_90a")


def test_argument_checks():
    h = T.float16x2(T.float16(1.0), T.float16(2.0))
    bf = T.bfloat16x2(T.bfloat16(1.0), T.bfloat16(2.0))
    with pytest.raises(ValueError, match="same dtype"):
        T.add2(h, bf)
    with pytest.raises(ValueError, match="same dtype"):
        T.fma2(h, h, bf)
    with pytest.raises(ValueError, match="Expected dtype in"):
        T.max2(T.int32x2(1, 2), T.int32x2(3, 4))
    with pytest.raises(TypeError, match="Expected PrimExpr"):
        T.abs2([1.0, 2.0])
    assert [float(x.value) for x in T.add2(h, h)] == [2.0, 4.0]
