"""Global tensors of `T.float4_e2m1fn` elements: passed as byte tensors (two values to a byte,
even index in the low nibble), sizes bound in elements (last dim and outer strides times two),
element loads/stores of one nibble, conversions rounding to nearest even and saturating."""

import math

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T

GPU = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")]
DEVICES = ["cpu", pytest.param("cuda", marks=GPU)]

FP4_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def _decoded(byte_tensor):
    """The float values of packed bytes, computed here bit by bit."""
    out = []
    for row in byte_tensor.view(torch.uint8).tolist():
        vals = []
        for byte in row:
            for code in (byte & 15, byte >> 4):
                v = FP4_VALUES[code & 7]
                vals.append(-v if code & 8 else v)
        out.append(vals)
    return torch.tensor(out, dtype=torch.float32)


def _nearest_fp4(x: float) -> float:
    """Round to nearest, ties to the even code; saturate at 6; NaN -> +6."""
    if math.isnan(x):
        return 6.0
    a = min(abs(x), 6.0)
    best = min(range(8), key=lambda c: (abs(FP4_VALUES[c] - a), c % 2))
    return math.copysign(FP4_VALUES[best], x)


@tilelang.jit
def sizes_of(x, out):
    m = T.dynamic("m")
    n = T.dynamic("n")
    s = T.dynamic("s")
    x: T.StridedTensor[[m, n], [s, 1], T.float4_e2m1fn]
    out: T.Tensor[(3,), T.int32]
    with T.Kernel(1, threads=1):
        out[0] = m
        out[1] = n
        out[2] = s


def test_sizes_are_bound_in_elements():
    base = torch.zeros(8, 12, dtype=torch.uint8)
    out = torch.zeros(3, dtype=torch.int32)
    sizes_of(base[::2, :5], out)  # 4 rows of 5 bytes, 24 bytes apart
    assert out.tolist() == [4, 10, 48]
    sizes_of(base.view(torch.int8), out)
    assert out.tolist() == [8, 24, 24]


@tilelang.jit
def shared_size(x, y):
    m = T.dynamic("m")
    x: T.Tensor[(m, 16), T.float4_e2m1fn]
    y: T.Tensor[(m * 4, 16), T.float4_e2m1fn]
    with T.Kernel(1, threads=32):
        pass


def test_size_contradictions_are_errors():
    shared_size(torch.zeros(2, 8, dtype=torch.uint8), torch.zeros(8, 8, dtype=torch.uint8))
    with pytest.raises(ValueError, match="'y'.*shape"):
        shared_size(torch.zeros(2, 8, dtype=torch.uint8), torch.zeros(6, 8, dtype=torch.uint8))
    with pytest.raises(ValueError, match="'x'.*16"):
        shared_size(torch.zeros(2, 16, dtype=torch.uint8), torch.zeros(8, 16, dtype=torch.uint8))
    with pytest.raises(ValueError, match="'x'.*float4_e2m1fn"):
        shared_size(torch.zeros(2, 8, dtype=torch.float16), torch.zeros(8, 8, dtype=torch.uint8))


def _decode_kernel(target):
    @tilelang.jit(target=target)
    def decode(A, B):
        M = T.dynamic("M")
        A: T.Tensor[(M, 64), T.float4_e2m1fn]
        B: T.Tensor[(M, 64), T.float32]
        with T.Kernel(T.ceildiv(M, 4), threads=64) as bx:
            for i, j in T.Parallel(4, 64):
                B[bx * 4 + i, j] = T.cast(A[bx * 4 + i, j], T.float32)
    return decode


def _encode_kernel(target):
    @tilelang.jit(target=target)
    def encode(X, A):
        M = T.dynamic("M")
        X: T.Tensor[(M, 64), T.float32]
        A: T.Tensor[(M, 64), T.float4_e2m1fn]
        with T.Kernel(T.ceildiv(M, 4), threads=64) as bx:
            for i, j in T.Parallel(4, 64):
                A[bx * 4 + i, j] = X[bx * 4 + i, j]
    return encode


@pytest.mark.parametrize("device", DEVICES)
def test_decode_every_byte(device):
    packed = torch.randint(0, 256, (7, 32), dtype=torch.uint8)  # 7 rows: a partial block
    packed[:, :16] = torch.arange(256, dtype=torch.uint8).reshape(16, 16)[:7]
    out = torch.full((7, 64), float("nan"), device=device)
    _decode_kernel("cpu" if device == "cpu" else "cuda")(packed.to(device), out)
    torch.testing.assert_close(out.cpu(), _decoded(packed), rtol=0, atol=0)
    assert torch.equal(torch.signbit(out.cpu()), torch.signbit(_decoded(packed)))


@pytest.mark.parametrize("device", DEVICES)
def test_encode_rounds_to_nearest_even_and_saturates(device):
    special = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -5.0, 7.0, 1e9, float("inf"),
               float("-inf"), float("nan"), -0.0, 0.1, -0.3]
    x = torch.randn(5, 64) * 4
    x.view(-1)[:len(special)] = torch.tensor(special)
    packed = torch.full((5, 32), 0xAB, dtype=torch.uint8, device=device)  # poisoned
    _encode_kernel("cpu" if device == "cpu" else "cuda")(x.to(device), packed)
    expect = torch.tensor([[_nearest_fp4(v) for v in row] for row in x.tolist()])
    got = _decoded(packed.cpu())
    torch.testing.assert_close(got, expect, rtol=0, atol=0)
    assert torch.equal(torch.signbit(got), torch.signbit(expect))


def _scatter_kernel(target):
    @tilelang.jit(target=target)
    def scatter(src, dst, perm):
        nv = T.dynamic("n")
        src: T.Tensor[(nv, 66), T.float4_e2m1fn]
        dst: T.StridedTensor[(nv, 66), (T.dynamic("ds"), 1), T.float4_e2m1fn]
        perm: T.Tensor[(nv,), T.int32]
        with T.Kernel(nv, threads=33) as i:
            for k in T.Parallel(66):  # neighbouring threads store the two nibbles of a byte
                dst[perm[i], k] = src[i, k]
    return scatter


@pytest.mark.parametrize("device", DEVICES)
def test_nibble_stores_keep_their_neighbours(device):
    n = 13
    src = torch.randint(0, 256, (n, 33), dtype=torch.uint8).view(torch.int8)
    back = torch.randint(0, 256, (n, 40), dtype=torch.uint8)  # rows padded: strided dst
    expect = back.clone()
    perm = torch.randperm(n, dtype=torch.int32)
    expect[perm.long(), :33] = src.view(torch.uint8)
    back = back.to(device)
    _scatter_kernel("cpu" if device == "cpu" else "cuda")(src.to(device), back[:, :33], perm.to(device))
    assert torch.equal(back.cpu(), expect)


def test_cuda_source_addresses_nibbles():
    src = torch.zeros(4, 33, dtype=torch.int8)
    kernel = tilelang.compile(_scatter_kernel("cuda").get_tir(src, torch.zeros(4, 40, dtype=torch.uint8)[:, :33], torch.zeros(4, dtype=torch.int32)),
                              target="cuda -arch=sm_90a")
    source = kernel.get_kernel_source()
    assert "tl::fp4_store(dst, " in source and "tl::fp4_load(src, " in source
    for f in (_decode_kernel, _encode_kernel):
        x = torch.zeros(4, 64)
        packed = torch.zeros(4, 32, dtype=torch.uint8)
        args = (packed, x) if f is _decode_kernel else (x, packed)
        tilelang.compile(f("cuda").get_tir(*args), target="cuda -arch=sm_90a")


def test_other_scopes_are_located_errors():
    with pytest.raises(NotImplementedError, match="only in global tensors") as info:
        @T.prim_func
        def kernel(A: T.Tensor((64,), T.float4_e2m1fn)):
            with T.Kernel(1, threads=32):
                S = T.alloc_fragment((64,), T.float4_e2m1fn)  # noqa: F841
    assert "test_float4_tensors.py" in str(info.value)


def test_numpy_pack_round_trip():
    from tilelang.interp.numerics import pack_fp4, unpack_fp4

    packed = np.arange(256, dtype=np.uint8).reshape(4, 64)
    assert np.array_equal(pack_fp4(unpack_fp4(packed)), packed)


def test_outputs_are_packed_byte_tensors():
    @T.prim_func
    def encode_out(X: T.Tensor((3, 8), T.float32), A: T.Tensor((3, 8), T.float4_e2m1fn)):
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(3, 8):
                A[i, j] = X[i, j]

    x = torch.tensor([[0.5, -1.0, 2.0, 3.0, -4.0, 6.0, 1.5, 0.0]] * 3)
    out = tilelang.compile(encode_out, out_idx=-1, target="cpu")(x)
    assert out.dtype == torch.uint8 and out.shape == (3, 4)
    torch.testing.assert_close(_decoded(out), x, rtol=0, atol=0)
