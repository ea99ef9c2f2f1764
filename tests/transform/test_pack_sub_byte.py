"""Packed int4 / uint4 tensors and shared tiles (transform/pack_sub_byte.py): T.copy, element
accesses and T.gemm (mma.sync m16n8k64 .s4 / .u4) on the interpreter and the CUDA path.

torch carries packed 4-bit values in int8 / uint8 tensors, two a byte, the value of even index
in the low nibble; a (M, K) int4 parameter takes a (M, K // 2) byte tensor."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError

from tests.device_params import DEVICES, HAS_COMPILER, target_of

SM80 = "cuda -arch=sm_80"
SM90 = "cuda -arch=sm_90a"
needs_compiler = pytest.mark.skipif(not HAS_COMPILER, reason="needs NVRTC or nvcc")


def pack(values: torch.Tensor) -> torch.Tensor:
    """Logical 4-bit values (one per int8 / uint8 element) -> bytes, low nibble first."""
    v = values.to(torch.int16)
    packed = (v[..., 0::2] & 15) | ((v[..., 1::2] & 15) << 4)
    return packed.to(torch.uint8).view(values.dtype if values.dtype == torch.int8 else
                                       torch.uint8)


def unpack(packed: torch.Tensor, signed: bool) -> torch.Tensor:
    b = packed.view(torch.uint8).to(torch.int16)
    v = torch.stack([b & 15, b >> 4], dim=-1).reshape(*packed.shape[:-1], -1)
    return torch.where(v > 7, v - 16, v) if signed else v


def random_values(shape, signed, device="cpu"):
    lo, hi = (-8, 8) if signed else (0, 16)
    return torch.randint(lo, hi, shape, dtype=torch.int8 if signed else torch.uint8,
                         device=device)


def gemm_nt(M, N, K, bm, bn, bk, dtype, threads=128, stages=3):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype),
             C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bn, bk), dtype)
            C_l = T.alloc_fragment((bm, bn), T.int32)
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[bx * bn, ko * bk], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


def elementwise(M, K, dtype):
    """B = A's values as int32; C = A + 3 (wrapping in 4 bits), through a shared tile."""
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((M, K), T.int32),
             C: T.Tensor((M, K), dtype)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((M, K), dtype)
            T.copy(A, S)
            for i, j in T.Parallel(M, K):
                B[i, j] = S[i, j]
                C[i, j] = S[i, j] + 3

    return main


# ---- values ------------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("signed", [True, False])
def test_gemm_int4_ragged(device, signed):
    dev = "cuda" if device == "cuda" else "cpu"
    M, N, K = 80, 48, 192  # no dimension a multiple of its block
    prog = gemm_nt(M, N, K, 32, 32, 128, T.int4 if signed else T.uint4)
    kernel = tilelang.compile(prog, target=target_of(device))
    a, b = random_values((M, K), signed, dev), random_values((N, K), signed, dev)
    c = torch.full((M, N), -12345, dtype=torch.int32, device=dev)  # poisoned
    kernel(pack(a), pack(b), c)
    torch.testing.assert_close(c.cpu(), a.cpu().int() @ b.cpu().int().T, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("signed", [True, False])
def test_elementwise_access_and_wrap(device, signed):
    dev = "cuda" if device == "cuda" else "cpu"
    M, K = 24, 40
    dtype = T.int4 if signed else T.uint4
    kernel = tilelang.compile(elementwise(M, K, dtype), target=target_of(device))
    a = random_values((M, K), signed, dev)
    b = torch.full((M, K), -777, dtype=torch.int32, device=dev)
    c = torch.full((M, K // 2), 0x5A, dtype=torch.int8 if signed else torch.uint8, device=dev)
    kernel(pack(a), b, c)
    assert torch.equal(b.cpu(), a.cpu().int())
    expected = a.cpu().int() + 3
    expected = ((expected + 8) % 16 - 8) if signed else expected % 16
    assert torch.equal(unpack(c.cpu(), signed).int(), expected)


def test_output_allocated_packed():
    """out_idx on an int4 parameter: an int8 tensor of half the last dimension."""
    kernel = tilelang.compile(elementwise(8, 16, T.int4), out_idx=[1, 2], target="cpu")
    a = random_values((8, 16), True)
    b, c = kernel(pack(a))
    assert c.dtype == torch.int8 and tuple(c.shape) == (8, 8)
    assert torch.equal(b, a.int())


# ---- argument checks ---------------------------------------------------------------------------

def test_argument_shape_is_bytes():
    kernel = tilelang.compile(gemm_nt(32, 32, 128, 32, 32, 64, T.int4), target="cpu")
    a = random_values((32, 128), True)
    c = torch.zeros(32, 32, dtype=torch.int32)
    with pytest.raises(ValueError, match="packed 2 to a byte"):  # counts values, not bytes
        kernel(a, pack(a), c)
    with pytest.raises(ValueError, match="dtype"):
        kernel(pack(a).int(), pack(a), c)


# ---- CUDA builds -------------------------------------------------------------------------------

@needs_compiler
@pytest.mark.parametrize("target", [SM80, SM90])
def test_gemm_builds_on_packed_bytes(target):
    src = tilelang.compile(gemm_nt(256, 128, 512, 128, 128, 64, T.int4),
                           target=target).get_kernel_source()
    assert "tl::as_packed<tl::s4x2_t>" in src  # mma.sync m16n8k64 .s4 on byte tiles
    assert "signed char* __restrict__ A" in src
    # the tiles move as bytes: cp.async on sm_80, TMA boxes on sm_90a
    assert ("cp_async" in src) if target == SM80 else ("tma_load" in src)


@needs_compiler
def test_uint4_gemm_and_elementwise_build():
    src = tilelang.compile(gemm_nt(64, 64, 128, 64, 64, 64, T.uint4),
                           target=SM90).get_kernel_source()
    assert "tl::as_packed<tl::u4x2_t>" in src
    src = tilelang.compile(elementwise(16, 32, T.int4), target=SM90).get_kernel_source()
    assert "tl::store_nibble" in src and "tl::wrap_s4" in src


# ---- errors ------------------------------------------------------------------------------------

def test_register_buffers_refused():
    with pytest.raises(KernelError, match="registers"):
        @T.prim_func
        def main(A: T.Tensor((16, 32), T.int4)):
            with T.Kernel(1, threads=32):
                F = T.alloc_fragment((16, 32), T.int4)
                T.copy(A, F)


@needs_compiler
def test_transposed_int4_gemm_is_located_error():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.int4), B: T.Tensor((64, 64), T.int4),
             C: T.Tensor((64, 64), T.int32)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), T.int4)
            B_s = T.alloc_shared((64, 64), T.int4)
            C_l = T.alloc_fragment((64, 64), T.int32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_l, clear_accum=True)  # B K x N: not K-major
            T.copy(C_l, C)

    with pytest.raises(NotImplementedError, match="K-major") as e:
        tilelang.compile(main, target=SM90)
    assert "test_pack_sub_byte.py" in str(e.value)
    # the interpreter computes it
    a, b = random_values((64, 64), True), random_values((64, 64), True)
    c = torch.zeros(64, 64, dtype=torch.int32)
    tilelang.compile(main, target="cpu")(pack(a), pack(b), c)
    assert torch.equal(c, a.int() @ b.int())


@needs_compiler
def test_gemm_before_sm80_refused():
    with pytest.raises(ValueError, match="sm_80"):
        tilelang.compile(gemm_nt(64, 64, 128, 64, 64, 64, T.int4),
                         target={"kind": "cuda", "arch": "sm_75"})


def test_eager_const_sizes_count_values():
    """T.const sizes taken from a packed tensor count values (the byte tensor's last dimension
    times 2), and PrimFunc.buffer_map shows the logical shape and strides."""
    @tilelang.jit(target="cpu")
    def first_values(A, B):
        M, K = T.const("M K")
        A: T.Tensor((M, K), T.int4)
        B: T.Tensor((M,), T.int32)
        with T.Kernel(1, threads=32):
            for i in T.Parallel(M):
                B[i] = A[i, K - 1]

    a = random_values((6, 10), True)
    b = torch.zeros(6, dtype=torch.int32)
    first_values(pack(a), b)
    assert torch.equal(b, a[:, 9].int())
    strided = torch.zeros(12, 5, dtype=torch.int8)[::2, :]
    buf = next(iter(first_values.get_tir(strided, b).buffer_map.values()))
    assert list(buf.shape) == [6, 10]


def copy_odd_window(M, K, dtype):
    """A window starting at an odd value (no whole bytes) and an odd-sized shared tile."""
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((M, K), dtype)):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((M, K - 1), dtype)
            T.copy(A[0:M, 1:K], S)
            T.copy(S, B[0:M, 0:K - 1])

    return main


@pytest.mark.parametrize("device", DEVICES)
def test_odd_window_copies_value_by_value(device):
    dev = "cuda" if device == "cuda" else "cpu"
    M, K = 6, 18
    kernel = tilelang.compile(copy_odd_window(M, K, T.int4), target=target_of(device))
    a = random_values((M, K), True, dev)
    b = torch.full((M, K // 2), 0x77, dtype=torch.int8, device=dev)
    kernel(pack(a), b)
    got = unpack(b.cpu(), True)
    assert torch.equal(got[:, :K - 1], a.cpu()[:, 1:].to(torch.int16))
    assert torch.equal(got[:, K - 1], torch.full((M,), 7, dtype=torch.int16))  # untouched


@needs_compiler
def test_odd_window_and_dynamic_sizes_build():
    src = tilelang.compile(copy_odd_window(6, 18, T.int4), target=SM90).get_kernel_source()
    assert "tl::store_nibble" in src
    K = T.dynamic("K")
    src = tilelang.compile(gemm_nt(128, 128, K, 64, 64, 64, T.int4),
                           target=SM80).get_kernel_source()
    assert "tl::as_packed<tl::s4x2_t>" in src


@needs_compiler
def test_tma_descriptor_reads_the_argument_bytes(monkeypatch):
    """A TMA box over a packed parameter encodes the byte tensor itself (its pointer, shape
    and strides, even when strided), not a copy re-viewed at the logical shape."""
    from tilelang.engine import build
    from tilelang.runtime import tensor_map

    kernel = tilelang.compile(gemm_nt(256, 128, 512, 128, 128, 64, T.int4), target=SM90)
    module = kernel.adapter.module
    seen = []
    monkeypatch.setattr(tensor_map, "encode_tiled_rowmajor",
                        lambda dtype, ptr, shape, strides, box, swizzle: seen.append(
                            (dtype, ptr, shape, strides, box)) or b"")
    d = next(d for d in module.tma if d.buffer.view_of is module.params[0])
    storage = torch.zeros(256, 512, dtype=torch.uint8)
    bytes_a = storage[:, :256]  # (256, 256) bytes = (256, 512) int4 values, row stride 512
    build.encode_tma(d, bytes_a, 0)
    dtype, ptr, shape, strides, box = seen[0]
    assert (dtype, ptr, shape, strides) == ("int8", bytes_a.data_ptr(), (256, 256), (512, 1))



@T.prim_func
def float_to_sub_byte(F: T.Tensor((8,), T.float32), S: T.Tensor((8,), T.int4),
                      U: T.Tensor((8,), T.uint4)):
    with T.Kernel(1, threads=32):
        for i in T.Parallel(8):
            S[i] = T.cast(F[i], T.int4)
            U[i] = T.cast(F[i], T.uint4)


@needs_compiler
def test_float_to_sub_byte_builds():
    src = tilelang.compile(float_to_sub_byte, target=SM90).get_kernel_source()
    assert "tl::sat_s4" in src and "tl::sat_u4" in src


@pytest.mark.parametrize("device", DEVICES)
def test_float_to_int4_truncates_and_saturates(device):
    """As every float -> integer conversion: toward zero, then clamped to -8..7 (0..15)."""
    dev = "cuda" if device == "cuda" else "cpu"
    kernel = tilelang.compile(float_to_sub_byte, target=target_of(device))
    f = torch.tensor([9.7, -12.3, 3.9, -0.5, 7.5, -8.9, 15.2, 21.0], device=dev)
    s = torch.full((4,), 0x33, dtype=torch.int8, device=dev)
    u = torch.full((4,), 0x33, dtype=torch.uint8, device=dev)
    kernel(f, s, u)
    assert unpack(s.cpu(), True).tolist() == [7, -8, 3, 0, 7, -8, 7, 7]
    assert unpack(u.cpu(), False).tolist() == [9, 0, 3, 0, 7, 0, 15, 15]
