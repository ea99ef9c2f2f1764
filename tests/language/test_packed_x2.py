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


# ---- packed instructions: one tl::<op>2 on a float2 / __half2 / __nv_bfloat162 pair ------------

PACKED = {"float32": "float2", "float16": "__half2", "bfloat16": "__nv_bfloat162"}


def _source(func, arch):
    return tilelang.compile(func, target=f"cuda -arch={arch}").get_kernel_source()


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90a"])
def test_explicit_ops_are_one_packed_statement(name, dtype, arch):
    src = _source(_kernel(name, dtype, 8), arch)
    ctype = PACKED[dtype]
    assert f"tl::store_packed2<{ctype}>((&D[tx * 2]), tl::{name}(" in src
    assert f"tl::load_packed2<{ctype}>((&A[tx * 2]))" in src
    assert "D[tx * 2 + 1]" not in src  # no lane-by-lane store left


def _shifted(offset, scope):
    """D[Ramp(2t + offset)] = A[Ramp(2t + offset)] + B[...]; through a shared tile when
    `scope` is shared."""
    @T.prim_func
    def main(A: T.Tensor((66,), "float16"), B: T.Tensor((66,), "float16"),
             D: T.Tensor((66,), "float16")):
        with T.Kernel(1, threads=32):
            t = T.get_thread_binding()
            idx = T.Ramp(t * 2 + offset, 1, 2)
            if scope == "shared":
                S = T.alloc_shared((66,), "float16")
                S[idx] = T.add2(A[idx], B[idx])
                D[idx] = S[idx]
            else:
                D[idx] = T.add2(A[idx], B[idx])
    return main


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
@pytest.mark.parametrize("offset,scope", [(1, "global"), (0, "shared")])
def test_unaligned_or_shared_pairs_stay_lane_by_lane(offset, scope):
    # an odd element offset cannot be read as one __half2; shared tiles may be swizzled
    src = _source(_shifted(offset, scope), "sm_90a")
    assert "store_packed2" not in src
    assert "tl::add2" not in src


@pytest.mark.parametrize("offset,scope", [(1, "global"), (0, "shared"), (0, "global")])
def test_shifted_pairs_compute_on_the_interpreter(offset, scope):
    kernel = tilelang.compile(_shifted(offset, scope), target="cpu")
    a, b = ((torch.randint(-8, 8, (66,)) / 4).half() for _ in range(2))
    d = torch.full((66,), float("nan"), dtype=torch.float16)
    kernel(a, b, d)
    want = torch.full((66,), float("nan"), dtype=torch.float16)
    want[offset:offset + 64] = (a + b)[offset:offset + 64]
    assert torch.equal(d.isnan(), want.isnan())
    assert torch.equal(d.nan_to_num(), want.nan_to_num())


def _parallel(dtype, width, fma, rows=128):
    @T.prim_func
    def main(A: T.Tensor((rows, width), dtype), B: T.Tensor((rows, width), dtype),
             C: T.Tensor((rows, width), dtype), D: T.Tensor((rows, width), dtype)):
        with T.Kernel(1, threads=128):
            for i, v in T.Parallel(rows, width):
                if fma:
                    D[i, v] = A[i, v] * B[i, v] + C[i, v]
                else:
                    D[i, v] = A[i, v] - B[i, v]
    return main


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
@pytest.mark.parametrize("dtype,arch,packed", [
    ("float16", "sm_80", True), ("bfloat16", "sm_80", True), ("bfloat16", "sm_90a", True),
    ("float32", "sm_90a", False), ("float32", "sm_100", True)])
@pytest.mark.parametrize("fma", [False, True])
def test_parallel_arithmetic_pairs(dtype, arch, packed, fma):
    # vectorised T.Parallel arithmetic on staged registers: half pairs everywhere, float32
    # pairs only where the GPU has f32x2 instructions (sm_100)
    src = _source(_parallel(dtype, 8, fma), arch)
    op = "tl::fma2(" if fma else "tl::sub2("
    assert (op in src) == packed
    assert (f"tl::store_packed2<{PACKED[dtype]}>((&D_vec[vp * 2])" in src) == packed


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("fma", [False, True])
def test_parallel_arithmetic_pairs_on_gpu(dtype, fma):
    rows = 77  # ragged: fewer rows than threads
    kernel = tilelang.compile(_parallel(dtype, 8, fma, rows), target="cuda")
    tdt = getattr(torch, dtype)
    a, b, c = (torch.randn(rows, 8, device="cuda").to(tdt) for _ in range(3))
    d = torch.full((rows, 8), float("nan"), device="cuda", dtype=tdt)
    kernel(a, b, c, d)
    want = (a.float() * b.float() + c.float()) if fma else (a.float() - b.float())
    tol = 1e-5 if dtype == "float32" else 2e-2
    torch.testing.assert_close(d.float(), want, atol=tol, rtol=tol)
