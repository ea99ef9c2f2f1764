"""Dtypes used as the reference's are (`tvm.DataType` objects that are also `str`): string
equality and hashing, `getattr(torch, dtype)`, `.as_torch()`, `T.dtype(...)`, the
`tilelang.language.dtypes` tables, the types the reference names that have no storage here
(int4, float4_e2m1fn: values only, a located error as buffer elements), `T.tfloat32`, and
`T.Tensor([n], T.ptr)` (a table of addresses: int64)."""

import json
import pickle

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.ir.dtype import DType


def test_dtypes_are_strings_of_their_names():
    assert isinstance(T.float16, str) and T.float16 == "float16" and "float16" == T.float16
    assert hash(T.bfloat16) == hash("bfloat16") and {"bfloat16": 1}[T.bfloat16] == 1
    assert {T.int8: "i8"}["int8"] == "i8"
    assert f"{T.float32}" == "float32" and T.float16 + "x2" == "float16x2"
    assert json.dumps({"dtype": T.int32}) == '{"dtype": "int32"}'
    assert np.zeros(2, T.float16).dtype == np.float16
    assert T.float16 != "float32" and T.float16 != 16 and T.float16 != None  # noqa: E711
    assert pickle.loads(pickle.dumps(T.float8_e4m3fn)) is T.float8_e4m3fn


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64", "int8", "int16",
                                  "int32", "int64", "uint8", "bool", "float8_e4m3fn",
                                  "float8_e5m2"])
def test_torch_lookups(name):
    dt = getattr(T, name)
    assert getattr(torch, dt) is dt.as_torch() is getattr(torch, name)
    assert T.dtype(getattr(torch, name)) is dt
    from tilelang.language.dtypes import _STR_TO_TORCH_DTYPE, _TORCH_DTYPE_TO_STR

    assert T.dtype(_TORCH_DTYPE_TO_STR[getattr(torch, name)]) is dt
    assert _STR_TO_TORCH_DTYPE[dt] is getattr(torch, name)


def test_e4m3_is_torch_float8_e4m3fn():
    assert T.float8_e4m3 is T.float8_e4m3fn and str(T.float8_e4m3) == "float8_e4m3fn"
    assert T.float8_e4m3 == "float8_e4m3" and T.float8_e4m3.name == "float8_e4m3"
    from tilelang.language.fp8 import determine_fp8_type, determine_torch_fp8_type

    assert determine_fp8_type() is T.float8_e4m3fn and determine_fp8_type("e5m2") == "float8_e5m2"
    assert determine_torch_fp8_type() is torch.float8_e4m3fn
    with pytest.raises(ValueError, match="e4m3"):
        determine_fp8_type("e3m4")


def test_reference_dtype_api():
    assert T.dtype("float16") is T.float16 and tilelang.DataType is DType
    assert T.dtype(T.half) is T.float16 and T.uint is T.uint32 and T.dtype("uint") is T.uint32
    assert (T.float16x4.bits, T.float16x4.lanes, T.float16x4.itemsize) == (16, 4, 8)
    assert T.float16.bytes == 2 and T.int8x4.type_code == 0 and T.bfloat16.type_code == 4
    assert T.float16x2.with_lanes(1) is T.float16 and T.int8x16 == "int8x16"
    assert DType("handle").as_torch() is None
    with pytest.raises(ValueError, match="no torch counterpart"):
        T.float16x2.as_torch()


def test_tfloat32_is_float32_storage():
    assert T.tfloat32 is T.float32 and T.dtype("tfloat32") is T.float32
    assert T.tfloat32.as_torch() is torch.float32 and T.tfloat32x4 is T.float32x4


def test_types_without_storage_are_values():
    assert (T.int4.bits, T.uint4.bits, T.float4_e2m1fn.bits) == (4, 4, 4)
    assert T.int4 == "int4" and T.int4.as_torch() is torch.int8 and T.uint4.as_torch() is torch.uint8
    assert T.float4_e2m1fn.is_float4() and T.float4_e2m1fn.is_float4_e2m1fn()
    assert not T.float16.is_float4()
    assert T.int4.is_signed_int and T.uint4.is_unsigned and not T.int4.storable
    assert T.float4_e2m1fnx2.lanes == 2 and T.float8_e8m0fnu.bits == 8
    from tilelang.language import dtypes

    assert dtypes.is_f8f6f4_family(T.float8_e5m2) and dtypes.is_float4(T.float4_e2m1fn)
    dtypes.validate_gemm_ab_dtypes(T.float16, "float16")
    with pytest.raises(ValueError, match="Mixed-dtype"):
        dtypes.validate_gemm_ab_dtypes(T.float16, T.bfloat16)


# int4 / uint4 are stored packed in shared memory (transform/pack_sub_byte.py), not in registers
@pytest.mark.parametrize("dtype,alloc", [("int4", "alloc_fragment"), ("uint4", "alloc_local"),
                                         ("float4_e2m1fn", "alloc_shared"),
                                         ("float6_e2m3fn", "alloc_shared")])
def test_buffers_of_types_without_storage_are_located_errors(dtype, alloc):
    with pytest.raises(NotImplementedError, match=f"buffer of {dtype} elements") as info:
        @T.prim_func
        def kernel(A: T.Tensor((64,), "int8")):
            with T.Kernel(1, threads=32):
                S = getattr(T, alloc)((64,), dtype)  # noqa: F841
    assert "test_dtype_compat.py" in str(info.value)


def test_tensor_of_pointers_is_int64():
    spec = T.Tensor([4], T.ptr)
    assert spec.dtype is T.int64

    @T.prim_func
    def first_pointer(P: T.Tensor([4], T.ptr), O: T.Tensor([1], "int64")):
        with T.Kernel(1, threads=32):
            O[0] = P[3]

    k = tilelang.compile(first_pointer, target="cpu")
    table = torch.tensor([11, 22, 33, 44], dtype=torch.int64)
    out = torch.zeros(1, dtype=torch.int64)
    k(table, out)
    assert out.item() == 44


def test_dtype_annotations_are_not_evaluated_as_text():
    # a global named like a dtype must not capture `x: T.float32` (a str now)
    import types

    src = ("import tilelang.language as T\n"
           "float32 = 'a module global that is not a dtype'\n"
           "def kernel(A: T.Tensor((8,), T.float32), s: T.float32):\n"
           "    with T.Kernel(1, threads=8):\n"
           "        for i in T.Parallel(8):\n"
           "            A[i] = s\n")
    mod = types.ModuleType("dtype_annot_mod")
    exec(compile(src, "<dtype_annot_mod>", "exec"), mod.__dict__)
    from tilelang.frontend.annotations import resolve_annotations

    ann = resolve_annotations(mod.kernel)
    assert isinstance(ann["A"], type(T.Tensor((8,), T.float32)))
    assert ann["s"] == "float32" and isinstance(ann["s"], DType)


def grouped_gemm_by_pointers(G, M, N, K, bm=32, bn=32, bk=32):
    """C[g] = A[g] @ B[g] for G groups given as tables of addresses (the reference's
    grouped_gemm/example_grouped_gemm_fwd_ptr.py style)."""
    @T.prim_func
    def main(A_ptrs: T.Tensor([G], T.ptr), B_ptrs: T.Tensor([G], T.ptr),
             C_ptrs: T.Tensor([G], T.ptr)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), G, threads=128) as (bx, by, g):
            A = T.make_tensor(A_ptrs[g], (M, K), T.float16)
            B = T.make_tensor(B_ptrs[g], (K, N), T.float16)
            C = T.make_tensor(C_ptrs[g], (M, N), T.float32)
            A_s = T.alloc_shared((bm, bk), T.float16)
            B_s = T.alloc_shared((bk, bn), T.float16)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])
    return main


def _pointer_tables(G, M, N, K, device="cpu"):
    a = [torch.randn(M, K, device=device).half() for _ in range(G)]
    b = [torch.randn(K, N, device=device).half() for _ in range(G)]
    c = [torch.full((M, N), float("nan"), device=device) for _ in range(G)]
    table = [torch.tensor([t.data_ptr() for t in ts], device=device) for ts in (a, b, c)]
    return a, b, c, table


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")])])
def test_tensors_at_addresses_from_a_pointer_table(device):
    G, M, N, K = 3, 64, 96, 80  # ragged: K is not a multiple of the K step
    k = tilelang.compile(grouped_gemm_by_pointers(G, M, N, K), target=device)
    a, b, c, tables = _pointer_tables(G, M, N, K, device)
    k(*tables)
    for x, y, z in zip(a, b, c):
        torch.testing.assert_close(z, x.float() @ y.float(), rtol=1e-3, atol=1e-3)


def test_tensors_at_addresses_build_without_tensor_maps():
    src = tilelang.compile(grouped_gemm_by_pointers(2, 128, 128, 128, 64, 64, 64),
                           target="cuda -arch=sm_90a").get_kernel_source()
    assert "half_t* __restrict__ A = (half_t*)(A_ptrs[" in src
    assert "TensorMap" not in src and "tma_" not in src  # no host descriptor of such a tensor


def test_tensor_at_address_errors():
    with pytest.raises(TypeError, match="64-bit integer") as info:
        @T.prim_func
        def narrow(P: T.Tensor([2], "int32"), O: T.Tensor((4,), "float16")):
            with T.Kernel(2, threads=32) as bx:
                A = T.make_tensor(P[bx], (4,), "float16")
                O[0] = A[0]
    assert "test_dtype_compat.py" in str(info.value)

    @T.prim_func
    def per_thread(P: T.Tensor([32], T.ptr), O: T.Tensor((32,), "float16")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            A = T.make_tensor(P[tx], (4,), "float16")
            O[tx] = A[0]

    x = torch.zeros(4).half()
    with pytest.raises(Exception, match="address of"):
        tilelang.compile(per_thread, target="cpu")(
            torch.tensor([x.data_ptr() + 2 * i for i in range(32)]), torch.zeros(32).half())

    @T.prim_func
    def widened(P: T.Tensor([1], T.ptr), O: T.Tensor((4,), "bfloat16")):
        with T.Kernel(1, threads=4):
            A = T.make_tensor(P[0], (4,), "bfloat16")
            for i in T.Parallel(4):
                O[i] = A[i]

    y = torch.zeros(4, dtype=torch.bfloat16)
    with pytest.raises(NotImplementedError, match="widened"):
        tilelang.compile(widened, target="cpu")(torch.tensor([y.data_ptr()]), y)


def test_cast_takes_both_argument_orders():
    # the reference's IEEE-754 helpers (examples/deepseek_v4/act_quant.py) use TVM's order
    def log2_ceil(x):
        bits = T.reinterpret(x, "uint32")
        exp = (bits >> 23) & 0xFF
        mantissa = bits & ((1 << 23) - 1)
        return T.Cast("int32", exp - 127 + T.if_then_else(mantissa != 0, 1, 0))

    @T.prim_func
    def kernel(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "int32"),
               Z: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                Y[i] = log2_ceil(X[i])
                Z[i] = T.Cast(X[i] * 4.0, "int32")

    x = torch.rand(64) * 1000 + 0.01
    y, z = torch.zeros(64, dtype=torch.int32), torch.zeros(64, dtype=torch.int32)
    tilelang.compile(kernel, target="cpu")(x, y, z)
    assert torch.equal(y, torch.ceil(torch.log2(x)).int())
    assert torch.equal(z, (x * 4).int())


def test_float4_unpacked_is_a_tag():
    dt = T.float4_e2m1_unpacked
    assert (dt.bits, int(dt.type_code), str(dt), dt.lanes) == (8, 131, "custom[float4_e2m1_unpacked]8", 1)
    assert dt.is_float4() and dt.is_float4_e2m1_unpacked() and not dt.is_float4_e2m1fn()
    assert dt != T.float4_e2m1fn and T.dtype("custom[float4_e2m1_unpacked]8") is dt
    assert not T.float4_e2m1fn.is_float4_e2m1_unpacked()
    assert not hasattr(T, "float4_e2m1_unpackedx2")
    from tilelang.language import dtypes

    assert dtypes.is_float4_e2m1_unpacked("custom[float4_e2m1_unpacked]8")
    assert not dtypes.is_float4_e2m1_unpacked(T.float4_e2m1fn)
    with pytest.raises(NotImplementedError, match="sm_100") as info:
        @T.prim_func
        def kernel(A: T.Tensor((64,), T.float4_e2m1fn)):
            with T.Kernel(1, threads=32):
                S = T.alloc_shared((64,), T.float4_e2m1_unpacked)  # noqa: F841
    assert "test_dtype_compat.py" in str(info.value)


def test_ffi_api_names_are_explained():
    from tilelang import _ffi_api

    with pytest.raises(AttributeError, match="TVM FFI"):
        _ffi_api.get_tcgen5_instr_desc
