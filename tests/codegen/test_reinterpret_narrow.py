"""T.reinterpret of narrow integer arithmetic (int4 / fp4 unpacking as the dequantize examples
write it): C++ computes `uint8 << 4` in int, so the operand is cast back to its own 8- or 16-bit
type before the bit cast; the interpreter and the GPU give the same values."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang import tvm  # noqa: F401  (the `tvm` stand-in the examples import)
from tvm import tirx


def unpack_int4(N):
    """out[2i + p] = the signed 4-bit value in nibble p of packed[i]."""

    @T.prim_func
    def kernel(packed: T.Tensor((N,), "uint8"), out: T.Tensor((2 * N,), "int8")):
        with T.Kernel(T.ceildiv(2 * N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                j = bx * 128 + i
                if j < 2 * N:
                    nibble = (packed[j // 2] >> (T.Cast("uint8", j % 2) * tirx.const(4, "uint8"))
                              ) & tirx.const(15, "uint8")
                    shifted = tirx.reinterpret("int8", nibble << tirx.const(4, "uint8"))
                    out[j] = shifted >> tirx.const(4, "int8")
    return kernel


def unpack_fp4(N):
    """out[2i + p] = the e2m1 value in nibble p of packed[i] (exponent biased to float16's; the
    zero exponent is not special-cased, as in the example)."""

    @T.prim_func
    def kernel(packed: T.Tensor((N,), "uint8"), out: T.Tensor((2 * N,), "float16")):
        with T.Kernel(T.ceildiv(2 * N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                j = bx * 128 + i
                if j < 2 * N:
                    f4 = (packed[j // 2] >> (T.Cast("uint16", j % 2) * tirx.const(4, "uint16"))
                          ) & tirx.const(15, "uint16")
                    sign = f4 >> tirx.const(3, "uint16")
                    exponent = ((f4 & tirx.const(6, "uint16")) >> tirx.const(1, "uint16")) + \
                        tirx.const(14, "uint16")
                    mantissa = f4 & tirx.const(1, "uint16")
                    bits = ((exponent | (sign << tirx.const(5, "uint16"))) << tirx.const(10, "uint16")
                            | mantissa << tirx.const(9, "uint16"))
                    out[j] = tirx.reinterpret("float16", bits.astype("uint16"))
    return kernel


def expected_int4(packed):
    nibbles = torch.stack([packed & 15, packed >> 4], 1).reshape(-1).to(torch.int16)
    return torch.where(nibbles >= 8, nibbles - 16, nibbles).to(torch.int8)


def expected_fp4(packed):
    nibbles = torch.stack([packed & 15, packed >> 4], 1).reshape(-1).to(torch.int32)
    bits = (((nibbles & 6) >> 1) + 14 | ((nibbles >> 3) << 5)) << 10 | (nibbles & 1) << 9
    return bits.to(torch.int16).view(torch.float16)


CASES = [(unpack_int4, expected_int4, torch.int8), (unpack_fp4, expected_fp4, torch.float16)]


@pytest.mark.parametrize("build,expected,dtype", CASES)
@pytest.mark.parametrize("N", [1, 300])
def test_interpreter(build, expected, dtype, N):
    packed = torch.randint(0, 256, (N,), dtype=torch.uint8)
    out = torch.full((2 * N,), 99, dtype=dtype)
    tilelang.compile(build(N), target="cpu")(packed, out)
    assert torch.equal(out, expected(packed))


@pytest.mark.parametrize("build", [unpack_int4, unpack_fp4])
def test_builds_for_sm90a(build):
    src = tilelang.compile(build(300), target="cuda -arch=sm_90a").get_kernel_source()
    assert "tl::bit_cast<" in src


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("build,expected,dtype", CASES)
@pytest.mark.parametrize("N", [1, 300, 4099])
def test_on_the_gpu(build, expected, dtype, N):
    packed = torch.randint(0, 256, (N,), dtype=torch.uint8, device="cuda")
    out = torch.full((2 * N,), 99, dtype=dtype, device="cuda")
    tilelang.compile(build(N), target="cuda")(packed, out)
    assert torch.equal(out.cpu(), expected(packed.cpu()))
