"""8- and 16-bit integer arithmetic keeps its type between operations: `(x << 4) >> 4` on a
uint8 drops the high nibble, `(a + a) // 2` on an int8 sees the wrapped sum, `~x >> 4` shifts
the 8-bit complement. C++ computes these in int, so the generated CUDA casts each result that
can leave the type back to it; the interpreter and the GPU agree."""

import pytest
import torch

import tilelang
import tilelang.language as T

DTYPES = ["uint8", "int8", "uint16", "int16"]


def narrow_ops(n, dtype):
    """Four results per element of A, each an expression whose C++ value would differ."""
    bits = int("".join(c for c in dtype if c.isdigit()))
    half = bits // 2

    @T.prim_func
    def kernel(A: T.Tensor((n,), dtype), B: T.Tensor((n, 4), dtype)):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                j = bx * 64 + i
                if j < n:
                    x = A[j]
                    B[j, 0] = (x << T.cast(half, dtype)) >> T.cast(half, dtype)
                    B[j, 1] = (x + x) // T.cast(2, dtype)
                    B[j, 2] = (~x) >> T.cast(half, dtype)
                    B[j, 3] = (-x) // T.cast(4, dtype)
    return kernel


def expected(a, dtype):
    """The same four values computed in the type (torch integer ops wrap and keep it)."""
    bits = int("".join(c for c in dtype if c.isdigit()))
    half = bits // 2
    if dtype == "uint16":  # torch has no uint16 shifts: compute in int32 and wrap
        w = a.to(torch.int32)
        mask = 0xFFFF
        cols = [((w << half) & mask) >> half, ((w + w) & mask) // 2, (~w & mask) >> half,
                (-w & mask) // 4]
        return torch.stack(cols, 1).to(torch.int32)
    two, four = torch.tensor(2, dtype=a.dtype), torch.tensor(4, dtype=a.dtype)
    cols = [(a << half) >> half, torch.div(a + a, two, rounding_mode="floor"), (~a) >> half,
            torch.div(-a, four, rounding_mode="floor")]
    return torch.stack(cols, 1)


def _sample(n, dtype, device="cpu"):
    info = {"uint8": (0, 256), "int8": (-128, 128), "uint16": (0, 65536),
            "int16": (-32768, 32768)}[dtype]
    vals = torch.randint(*info, (n,), dtype=torch.int32)
    vals[: 4] = torch.tensor([info[0], info[1] - 1, 0, info[1] // 2])[: n]
    if dtype == "uint16":
        return vals.to(torch.int16).view(torch.uint16).to(device), vals
    return vals.to(getattr(torch, dtype)).to(device), vals


def _as_int32(t, dtype):
    if dtype == "uint16":
        return t.view(torch.int16).to(torch.int32) & 0xFFFF
    return t.to(torch.int32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_interpreter_keeps_the_type(dtype):
    a, vals = _sample(100, dtype)
    out = torch.zeros((100, 4), dtype=a.dtype)
    tilelang.compile(narrow_ops(100, dtype), target="cpu")(a, out)
    want = expected(vals if dtype == "uint16" else a, dtype)
    assert torch.equal(_as_int32(out, dtype), want.to(torch.int32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_casts_each_widening_result_back(dtype):
    src = tilelang.compile(narrow_ops(100, dtype), target="cuda -arch=sm_90a").get_kernel_source()
    from tilelang.codegen.cuda import ctype
    from tilelang.ir.dtype import DType

    c = ctype(DType(dtype))
    for text in ("x << ", "x + x", "~x", "-x"):
        assert f"(({c})({text}" in src, text


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 1000])
def test_on_the_gpu(dtype, n):
    a, vals = _sample(n, dtype, "cuda")
    out = torch.full((n, 4), 7, dtype=a.dtype, device="cuda")
    tilelang.compile(narrow_ops(n, dtype), target="cuda")(a, out)
    want = expected(vals if dtype == "uint16" else a.cpu(), dtype)
    assert torch.equal(_as_int32(out.cpu(), dtype), want.to(torch.int32))
