"""Names reference programs observe about the kernel builder: which constructs are IR-builder
frames (`tvm.script.ir_builder.base.IRBuilderFrame`), loops whose step is a kernel expression,
the logical builders of `tvm.tirx.expr`, `T.PrimExpr`, macros returning a variable, and the
dtype names of `tilelang.language.dtypes._all_dtypes`."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.runtime import toolkit

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")
SM90 = "cuda -arch=sm_90a"


def test_frames_are_builder_frames_and_stepped_loops_are_not():
    from tvm.script.ir_builder.base import IRBuilderFrame
    from tvm.tirx.expr import IntImm, Var

    for frame in (T.serial(10), T.serial(1, 10, 1), T.serial(1, 10, IntImm(T.int32, 1)),
                  T.unroll(4), T.Parallel(8), T.Pipelined(4, num_stages=2), T.grid(2, 3),
                  T.vectorized(4), T.Kernel(1, threads=32)):
        assert isinstance(frame, IRBuilderFrame), frame
    for loop in (T.serial(1, 10, 2), T.serial(10, -1, -1), T.serial(1, 10, Var("s", T.int32)),
                 T.unroll(0, 8, 2), 3, T.int32):
        assert not isinstance(loop, IRBuilderFrame), loop


def strided_kernel(n=16):
    @T.prim_func
    def strided(A: T.Tensor((n,), T.int32), start: T.int32, stop: T.int32, step: T.int32):
        with T.Kernel(1, threads=1):
            for i in range(n):
                A[i] = -1
            count = T.alloc_var(T.int32, 0)
            for i in T.serial(start, stop, step):
                A[count] = i
                count += 1
    return strided


@pytest.mark.parametrize("start,stop,step", [(1, 10, 3), (0, 9, 3), (10, 0, -3), (9, -1, -2),
                                             (5, 5, 2), (5, 9, -1), (2, 3, 7)])
def test_serial_loop_with_a_runtime_step_on_the_interpreter(start, stop, step):
    kernel = tilelang.compile(strided_kernel(), target="cpu")
    a = torch.full((16,), 99, dtype=torch.int32)
    kernel(a, start, stop, step)
    visited = list(range(start, stop, step))
    expected = visited + [-1] * (16 - len(visited))
    assert a.tolist() == expected


@requires_compiler
def test_serial_loop_with_a_runtime_step_builds_for_sm90():
    source = tilelang.compile(strided_kernel(), target=SM90).get_kernel_source()
    assert "step" in source and "__global__" in source


def test_tirx_logical_builders():
    from tvm import tirx
    from tvm.tirx.expr import Not, Or, Var

    a, b, c = (Var(n, T.int32) for n in "abc")
    cond = Or(Not(tirx.all(a < b, b < c)), b < c)
    assert isinstance(cond, T.PrimExpr) and cond.dtype == T.bool
    assert isinstance(tirx.any(a < b, b < c, a < c), T.PrimExpr)
    with pytest.raises(ValueError, match="at least one"):
        tirx.all()


def test_logical_builders_in_a_kernel_on_the_interpreter():
    from tvm import tirx

    @T.prim_func
    def flags(A: T.Tensor((8,), T.int32), B: T.Tensor((8,), T.int32)):
        with T.Kernel(1, threads=8) as _:
            for i in T.Parallel(8):
                B[i] = T.if_then_else(tirx.Or(tirx.Not(tirx.all(A[i] > 1, A[i] < 6)),
                                              A[i] == 3), 1, 0)

    a = torch.arange(8, dtype=torch.int32)
    b = torch.full((8,), 7, dtype=torch.int32)
    tilelang.compile(flags, target="cpu")(a, b)
    assert b.tolist() == [int(not (1 < x < 6) or x == 3) for x in range(8)]


def test_macro_returns_a_variable_by_value():
    @T.macro
    def counter(start):
        v = T.alloc_var(T.int32, start)
        v += 1
        return v

    @T.prim_func
    def use(A: T.Tensor((2,), T.int32)):
        with T.Kernel(1, threads=1):
            x = counter(4)
            assert isinstance(x, T.PrimExpr)
            A[0] = x
            A[1] = x * 2

    a = torch.zeros(2, dtype=torch.int32)
    tilelang.compile(use, target="cpu")(a)
    assert a.tolist() == [5, 10]


def test_all_reference_dtype_names_are_dtypes():
    import tvm
    from tilelang.language.dtypes import _all_dtypes, is_float4_e2m1_unpacked

    for name in ("float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e3m4", "float8_e4m3b11fnuz",
                 "float4_e2m1_unpacked", "float8_e8m0fnux4", "float6_e3m2fnx2", "tfloat32x64"):
        assert name in _all_dtypes
    for name in _all_dtypes:
        assert isinstance(getattr(T, name), tvm.DataType), name
    # the AMD 8-bit floats have another exponent bias: types of their own, not E4M3 / E5M2
    assert T.float8_e4m3fnuz != T.float8_e4m3fn and T.float8_e5m2fnuz != T.float8_e5m2
    assert str(T.float8_e4m3fnuz) == "float8_e4m3fnuz" and T.float8_e4m3fnuz.bits == 8
    assert is_float4_e2m1_unpacked(T.float4_e2m1_unpacked)
    assert not is_float4_e2m1_unpacked(T.float4_e2m1fn)


def test_buffers_of_amd_float8_types_are_refused_with_the_users_line():
    with pytest.raises(NotImplementedError, match="float8_e4m3fnuz") as info:
        @T.prim_func
        def bad(A: T.Tensor((8,), T.float8_e4m3fnuz)):
            with T.Kernel(1, threads=8):
                pass
    assert "test_frontend_builder_names.py" in str(info.value)


def test_torch_storage_of_sub_byte_types():
    from tilelang.language.dtypes import resolve_torch_storage_dtype

    assert resolve_torch_storage_dtype(T.float16) == T.float16
    assert resolve_torch_storage_dtype("int4") == T.int8
    packed = getattr(torch, "float4_e2m1fn_x2", None)
    assert T.float4_e2m1fn.as_torch() is (packed if packed is not None else torch.int8)
    if packed is not None:
        assert T.float4_e2m1fnx2.as_torch() is packed
        assert T.dtype(packed) == T.float4_e2m1fnx2
        assert resolve_torch_storage_dtype(T.float4_e2m1fn) == T.float4_e2m1fnx2
    with pytest.raises(ValueError, match="no torch counterpart"):
        T.float4_e2m1fnx4.as_torch()


def _let_offset():
    @T.prim_func
    def shifted(A: T.Tensor((64,), T.float32), B: T.Tensor((16,), T.float32)):
        with T.Kernel(4, threads=4) as bx:
            offset = T.int32()
            T.let(offset, bx * 16 + 3)
            k = T.int32()
            for i in T.Parallel(4):
                B[bx * 4 + i] = A[offset + i] + T.let(k, i, k * 2)  # the expression form
    return shifted


def test_let_binds_a_symbol_for_the_rest_of_the_scope():
    a = torch.randn(64)
    b = torch.full((16,), float("nan"))
    tilelang.compile(_let_offset(), target="cpu")(a, b)
    expected = torch.stack([a[blk * 16 + 3 + i] + 2 * i for blk in range(4) for i in range(4)])
    torch.testing.assert_close(b, expected)


@requires_compiler
def test_let_builds_for_sm90():
    assert "__global__" in tilelang.compile(_let_offset(), target=SM90).get_kernel_source()


def test_let_binds_a_symbol_once():
    with pytest.raises(ValueError, match="already bound") as info:
        @T.prim_func
        def twice(A: T.Tensor((4,), T.int32)):
            with T.Kernel(1, threads=1):
                v = T.int32()
                T.let(v, 1)
                T.let(v, 2)
                A[0] = v
    assert "test_frontend_builder_names.py" in str(info.value)


def _unrolled(factor):
    @T.prim_func
    def fill(A: T.Tensor((20,), T.float32)):
        with T.Kernel(1, threads=1):
            for i in T.unroll(0, 20, unroll_factor=factor):
                A[i] = i * 2.0
    return fill


def test_unroll_factor_keeps_the_results():
    a = torch.full((20,), float("nan"))
    tilelang.compile(_unrolled(4), target="cpu")(a)
    assert a.tolist() == [i * 2.0 for i in range(20)]


@requires_compiler
def test_unroll_factor_is_the_cuda_pragma():
    src = tilelang.compile(_unrolled(4), target=SM90).get_kernel_source()
    assert "#pragma unroll 4\n" in src


def test_unroll_factor_must_be_positive():
    with pytest.raises(ValueError, match="unroll_factor") as info:
        _unrolled(0)
    assert "test_frontend_builder_names.py" in str(info.value)


def test_func_attr_records_attributes_of_the_function():
    @T.prim_func
    def marked(A: T.Tensor((4,), T.float32)):
        T.func_attr({"tir.noalias": True, "my.note": 3})
        with T.Kernel(1, threads=4):
            for i in T.Parallel(4):
                A[i] = 1.0

    assert marked.attrs["tir.noalias"] is True and marked.attrs["my.note"] == 3
    a = torch.zeros(4)
    tilelang.compile(marked, target="cpu")(a)
    assert a.tolist() == [1.0] * 4
    with pytest.raises(TypeError, match="dict"):
        @T.prim_func
        def bad(A: T.Tensor((4,), T.float32)):
            T.func_attr(["tir.noalias"])


def _from_the_end():
    @T.prim_func
    def tail(A: T.Tensor((16,), T.float32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(2, threads=2) as bx:
            tx = T.get_thread_binding()
            for i in T.serial(2):
                B[bx * 4 + tx * 2 + i] = A[-(bx * 4 + tx * 2 + i) - 1]  # always negative
    return tail


def test_an_index_negative_in_every_iteration_counts_from_the_end():
    a = torch.randn(16)
    b = torch.full((8,), float("nan"))
    tilelang.compile(_from_the_end(), target="cpu")(a, b)
    torch.testing.assert_close(b, a.flip(0)[:8])


@requires_compiler
def test_an_index_negative_in_every_iteration_builds_for_sm90():
    src = tilelang.compile(_from_the_end(), target=SM90).get_kernel_source()
    assert "A[" in src and "A[-" not in src
