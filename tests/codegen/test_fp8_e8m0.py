"""float8_e8m0fnu buffers (the MX formats' power-of-two scales: 2^(code - 127), code 255 NaN,
no sign, no zero): conversions from every float type round as torch's `.to(float8_e8m0fnu)`
(up when the first dropped mantissa bit is set; inf / NaN / overflow -> NaN; the sign
dropped), on the CPU interpreter and in CUDA (tl/common.cuh `fp8_e8_t`)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.ir.dtype import round_to

from device_params import DEVICES, HAS_COMPILER, target_of

E8M0 = "float8_e8m0fnu"
EDGES = [0.0, -0.0, 1.0, 1.4, 1.5, 3.0, 5.0, 6.0, -2.0, float("inf"), float("-inf"),
         float("nan"), 2.0 ** -127, 1e-40, 2.0 ** 127, 1.5 * 2.0 ** 127, 3e38]


def _inputs(n, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    scaled = torch.randn(n, generator=g) * torch.exp2(torch.randint(-60, 60, (n,), generator=g))
    return torch.cat([torch.tensor(EDGES), scaled])[:n].to(dtype)


def _same(a, b):
    """Equal codes (NaN is one code here)."""
    return torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def test_rounding_matches_torch():
    x = _inputs(4000)
    got = torch.from_numpy(round_to(x.numpy(), E8M0)).to(torch.float8_e8m0fnu)
    assert _same(got, x.to(torch.float8_e8m0fnu))


def _convert(src, dst, n):
    @T.prim_func
    def main(A: T.Tensor((n,), src), B: T.Tensor((n,), dst)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < n:
                    B[bx * 128 + i] = T.cast(A[bx * 128 + i], dst)
    return main


PAIRS = [("float32", E8M0), ("bfloat16", E8M0), ("float16", E8M0), ("float64", E8M0),
         (E8M0, "float32"), (E8M0, "bfloat16"), (E8M0, "float64")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src, dst", PAIRS)
def test_conversions_match_torch(device, src, dst):
    n = 1000  # ragged: not a multiple of the block
    a = _inputs(n, torch.float32).to(getattr(torch, src)).to(device)
    b = torch.full((n,), 7, dtype=torch.uint8).view(getattr(torch, dst)) if dst == E8M0 \
        else torch.full((n,), float("nan"), dtype=getattr(torch, dst))
    b = b.to(device)
    tilelang.compile(_convert(src, dst, n), target=target_of(device))(a, b)
    want = a.cpu().to(getattr(torch, dst))
    if dst == E8M0:
        assert _same(b.cpu(), want)
    else:
        torch.testing.assert_close(b.cpu(), want, equal_nan=True, rtol=0, atol=0)


def _vector_store(n):
    """The reference's idiom: a thread's lanes cast from integers and stored as one vector."""
    @T.prim_func
    def main(A: T.Tensor((64,), E8M0)):
        with T.Kernel(1, threads=32):
            for i in T.vectorized(n):
                A[i] = T.cast(i + 1, E8M0)
    return main


@pytest.mark.parametrize("n", [1, 4, 8])
def test_vectorized_store_on_the_interpreter(n):
    a = torch.full((64,), 0, dtype=torch.uint8).view(torch.float8_e8m0fnu)
    tilelang.compile(_vector_store(n), target="cpu")(a)
    want = torch.arange(1, n + 1, dtype=torch.float32).to(torch.float8_e8m0fnu)
    assert _same(a[:n], want)
    assert (a[n:].view(torch.uint8) == 0).all()


def test_reinterpret_gives_the_code():
    @T.prim_func
    def main(A: T.Tensor((16,), E8M0), B: T.Tensor((16,), "uint8")):
        with T.Kernel(1, threads=16):
            for i in T.Parallel(16):
                B[i] = T.reinterpret(A[i], "uint8")

    codes = torch.tensor([0, 1, 100, 126, 127, 128, 200, 254, 255] + [127] * 7, dtype=torch.uint8)
    b = torch.zeros(16, dtype=torch.uint8)
    tilelang.compile(main, target="cpu")(codes.view(torch.float8_e8m0fnu), b)
    assert torch.equal(b, codes)


@pytest.mark.skipif(not HAS_COMPILER, reason="needs NVRTC or nvcc")
def test_kernels_build_for_sm90a():
    for src, dst in PAIRS:
        tilelang.compile(_convert(src, dst, 1000), target="cuda -arch=sm_90a")
    for n in (1, 2, 4, 8):
        source = tilelang.compile(_vector_store(n), target="cuda -arch=sm_90a")\
            .get_kernel_source()
        assert "fp8_e8_t" in source
