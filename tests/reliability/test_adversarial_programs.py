"""Adversarial programs: what a careless user (or an attacker) writes, and the exact outcome.

Each bad program is rejected on every target by the same rule, with an error of the stated
type whose message names the problem and whose location is the marked line (`# <-`) of this
file; each program that only looks odd computes the right result on the interpreter (and, where
that says something, generates the right CUDA). Before these rules: `return` dropped the rest
of a kernel, a constant negative copy start wrapped around while a computed one read zeros,
`T.serial(2**40)` counted in 32 bits, `T.Parallel(64)` over a 32-element shared tile compiled
for sm_90a, the interpreter ran gemms CUDA rejects, `T.gemm` on global buffers was a KeyError,
atomics on int8 failed inside NVRTC, a recursive macro was a bare RecursionError, and
`num_stages=-2`, a y-grid of 70000 or `cuda -arch=sm_90a junk` were accepted."""

from __future__ import annotations

import inspect
import traceback

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError, KernelNotSupportedError
from located import build_for, check_located, marked_lines

SM90 = "cuda -arch=sm_90a"
SM80 = "cuda -arch=sm_80"
BOTH = ("cpu", SM90)
ALL = ("cpu", SM80, SM90)


# ---- return inside a kernel -------------------------------------------------------------------
def return_in_kernel():
    @T.prim_func
    def f(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32):
            A[0] = 1.0
            return  # <-
    return f


def return_value_in_kernel():
    @T.prim_func
    def f(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32):
            A[0] = 1.0
            return A  # <-
    return f


def return_in_serial_loop():
    @T.prim_func
    def f(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32):
            for k in T.serial(4):
                A[k] = 1.0
                return  # <-
    return f


def return_in_parallel_loop():
    @T.prim_func
    def f(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(16):
                A[i] = 1.0
                return  # <-
    return f


def return_in_pipelined_loop():
    @T.prim_func
    def f(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32):
            for k in T.Pipelined(4, num_stages=2):
                A[k] = 1.0
                return  # <-
    return f


def return_under_kernel_condition():
    @T.prim_func
    def f(A: T.Tensor((16,), "float32"), n: T.int32):
        with T.Kernel(1, threads=32):
            if n > 3:
                return  # <-
            A[0] = 1.0
    return f


def return_in_kernel_while():
    @T.prim_func
    def f(A: T.Tensor((16,), "float32"), n: T.int32):
        with T.Kernel(1, threads=32):
            i = T.alloc_var("int32", 0)
            while i < n:
                i += 1
                return  # <-
    return f


@T.macro
def _macro_returning_inside_loop(A):
    for k in T.serial(4):
        A[k] = 2.0
        return  # <-


def return_in_macro_loop():
    @T.prim_func
    def f(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32):
            _macro_returning_inside_loop(A)
    return f


# ---- tile starts ------------------------------------------------------------------------------
def copy_constant_negative_start():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32"), B: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((16, 64), "float32")
            T.copy(A[-16, 0], S)  # <-
            T.copy(S, B[0, 0])
    return f


def copy_constant_negative_column():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32"), B: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((16, 16), "float32")
            T.copy(A[0, -1], S)  # <-
            T.copy(S, B[0, 0])
    return f


def copy_to_constant_negative_destination():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((16, 64), "float32")
            T.clear(S)
            T.copy(S, A[-16, 0])  # <-
    return f


def copy_constant_start_past_the_end():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32"), B: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((16, 64), "float32")
            T.copy(A[64, 0], S)  # <-
            T.copy(S, B[0, 0])
    return f


def copy_slice_past_the_end():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32"), B: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((16, 64), "float32")
            T.copy(A[70:86, 0:64], S)  # <-
            T.copy(S, B[0, 0])
    return f


def copy_from_shared_start_past_its_end():
    @T.prim_func
    def f(B: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((32, 64), "float32")
            F = T.alloc_fragment((16, 64), "float32")
            T.clear(S)
            T.copy(S[32, 0], F)  # <-
            T.copy(F, B[0, 0])
    return f


def tile_atomic_constant_negative_start():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((16, 64), "float32")
            T.clear(S)
            T.atomic_add(A[-16, 0], S)  # <-
    return f


def fill_region_past_the_end():
    @T.prim_func
    def f(B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((32,), "float32")
            T.fill(S[40:48], 1.0)  # <-
            T.copy(S, B[0])
    return f


# ---- loops past 32 bits -----------------------------------------------------------------------
def parallel_past_2_31():
    @T.prim_func
    def f(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(2**31):  # <-
                A[i] = 1.0
    return f


# ---- static accesses outside block buffers ------------------------------------------------------
def parallel_over_a_smaller_fragment():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((32, 32), "float32")
            for i, j in T.Parallel(64, 64):
                F[i, j] = A[i, j]
            T.copy(F, A[0, 0])
    return f


def parallel_over_a_smaller_shared_tile():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((32,), "float32")
            for i in T.Parallel(64):
                S[i] = A[i]  # <-
            T.copy(S, A[0])
    return f


def fragment_index_off_by_one():
    @T.prim_func
    def f(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            F = T.alloc_fragment((32,), "float32")
            for i in T.Parallel(32):
                F[i + 1] = A[i]  # <-
            T.copy(F, A[0])
    return f


def shared_read_before_its_start():
    @T.prim_func
    def f(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((32,), "float32")
            T.copy(A[0], S)
            for i in T.Parallel(32):
                A[i] = S[i - 1]  # <-
    return f


def serial_loop_past_a_shared_tile():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((32,), "float32")
            for k in T.serial(64):
                S[k] = 0.0  # <-
            T.copy(S, A[0])
    return f


def constant_index_past_a_shared_tile():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((32,), "float32")
            T.clear(S)
            S[40] = 1.0  # <-
            T.copy(S, A[0])
    return f


def local_buffer_past_its_end():
    @T.prim_func
    def f(A: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32):
            L = T.alloc_local((4,), "float32")
            for k in T.serial(8):
                L[k] = A[k]  # <-
            A[0] = L[0]
    return f


def strided_loop_past_a_fragment_row():
    @T.prim_func
    def f(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((16, 16), "float32")
            for i, j in T.Parallel(16, 16):
                F[i, 2 * j] = A[i, j]  # <-
            T.copy(F, A[0, 0])
    return f


# ---- gemm: one legality check -----------------------------------------------------------------
def _gemm_dtypes(a, b, c):
    @T.prim_func
    def f(C: T.Tensor((64, 64), c)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 32), a)
            B_s = T.alloc_shared((32, 64), b)
            C_l = T.alloc_fragment((64, 64), c)
            T.clear(A_s)
            T.clear(B_s)
            T.clear(C_l)
            T.gemm(A_s, B_s, C_l)  # <-
            T.copy(C_l, C[0, 0])
    return f


def gemm_float16_times_bfloat16():
    return _gemm_dtypes("float16", "bfloat16", "float32")


def gemm_bool_operands():
    return _gemm_dtypes("bool", "bool", "int32")


def gemm_float16_into_int32():
    return _gemm_dtypes("float16", "float16", "int32")


def gemm_int8_into_float32():
    return _gemm_dtypes("int8", "int8", "float32")


def gemm_int8_times_uint8():
    return _gemm_dtypes("int8", "uint8", "int32")


def gemm_float32_into_float16():
    return _gemm_dtypes("float32", "float32", "float16")


def _gemm_scopes(where):
    @T.prim_func
    def f(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"),
          C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.clear(C_l)
            if where == "A":
                T.gemm(A, B_s, C_l)  # <-
            elif where == "B":
                T.gemm(A_s, B, C_l)  # <-
            else:
                T.gemm(A_s, B_s, C)  # <-
            T.copy(C_l, C[0, 0])
    return f


def gemm_on_global_a():
    return _gemm_scopes("A")


def gemm_on_global_b():
    return _gemm_scopes("B")


def gemm_into_global_c():
    return _gemm_scopes("C")


def gemm_on_a_local_buffer():
    @T.prim_func
    def f(C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=128):
            A_l = T.alloc_local((16, 16), "float16")
            B_s = T.alloc_shared((16, 16), "float16")
            C_l = T.alloc_fragment((16, 16), "float32")
            T.clear(B_s)
            T.clear(C_l)
            T.gemm(A_l, B_s, C_l)  # <-
            T.copy(C_l, C[0, 0])
    return f


# ---- atomics ----------------------------------------------------------------------------------
def _atomic(kind, dtype):
    @T.prim_func
    def f(A: T.Tensor((16,), dtype), B: T.Tensor((16,), dtype)):
        with T.Kernel(1, threads=32):
            if kind == "add":
                for i in T.Parallel(16):
                    T.atomic_add(A[0], B[i])  # <-
            elif kind == "max":
                for i in T.Parallel(16):
                    T.atomic_max(A[0], B[i])  # <-
            elif kind == "tile":
                T.atomic_add(A[0:16], B[0:16])  # <-
            elif kind == "x2":
                T.atomic_addx2(A[0], B[0])  # <-
            else:
                A[1] = T.atomic_load(A[0])  # <-
    return f


def atomic_add_int8():
    return _atomic("add", "int8")


def atomic_add_bool():
    return _atomic("add", "bool")


def atomic_add_uint8():
    return _atomic("add", "uint8")


def atomic_add_int16():
    return _atomic("add", "int16")


def atomic_max_int8():
    return _atomic("max", "int8")


def atomic_add_tile_int16():
    return _atomic("tile", "int16")


def atomic_addx2_int32():
    return _atomic("x2", "int32")


def atomic_load_int8():
    return _atomic("load", "int8")


# ---- num_stages, launch limits ----------------------------------------------------------------
def _stages(n):
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((16, 64), "float32")
            for k in T.Pipelined(4, num_stages=n):  # <-
                T.copy(A[k * 16, 0], S)
                T.copy(S, A[k * 16, 0])
    return f


def num_stages_negative():
    return _stages(-2)


def num_stages_fractional():
    return _stages(2.5)


def num_stages_bool():
    return _stages(True)


def num_stages_string():
    return _stages("2")


def _grid(*grid, threads=32):
    @T.prim_func
    def f(A: T.Tensor((4,), "float32")):
        with T.Kernel(*grid, threads=threads):  # <-
            A[0] = 1.0
    return f


def grid_y_past_65535():
    return _grid(1, 70000)


def grid_z_past_65535():
    return _grid(1, 1, 65536)


def grid_x_past_2_31():
    return _grid(2**31)


def threads_z_past_64():
    return _grid(1, threads=(1, 1, 128))


def threads_y_past_1024():
    return _grid(1, threads=(1, 2048))


# ---- recursion while tracing ------------------------------------------------------------------
@T.macro
def _endless(A, n):
    _endless(A, n + 1)  # <-


def macro_recursing_without_end():
    @T.prim_func
    def f(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32):
            _endless(A, 0)
    return f


@T.macro
def _ping(A, i):
    A[0] = i
    _pong(A, i)


@T.macro
def _pong(A, i):
    _ping(A, i + 1)  # <-


def macros_recursing_into_each_other():
    @T.prim_func
    def f(A: T.Tensor((16,), "int32")):
        with T.Kernel(1, threads=32):
            _ping(A, 0)
    return f


# (builder, targets, exception type, words the message must contain)
CASES = [
    (return_in_kernel, BOTH, KernelNotSupportedError, ["`return` inside `with T.Kernel(...)`"]),
    (return_value_in_kernel, BOTH, KernelNotSupportedError, ["`return` inside `with T.Kernel"]),
    (return_in_serial_loop, BOTH, KernelNotSupportedError, ["`return` inside a kernel loop"]),
    (return_in_parallel_loop, BOTH, KernelNotSupportedError, ["`return` inside a kernel loop"]),
    (return_in_pipelined_loop, BOTH, KernelNotSupportedError, ["`return` inside a kernel loop"]),
    (return_under_kernel_condition, BOTH, KernelNotSupportedError,
     ["`return` inside a branch on a kernel value"]),
    (return_in_kernel_while, BOTH, KernelNotSupportedError, ["`return` inside a kernel `while`"]),
    (return_in_macro_loop, BOTH, KernelNotSupportedError, ["`return` inside a kernel loop"]),
    (copy_constant_negative_start, ALL, IndexError, ["T.copy", "A[-16, 0]", "outside A",
                                                     "not counted from the end"]),
    (copy_constant_negative_column, BOTH, IndexError, ["A[0, -1]", "dimension 1 has 64"]),
    (copy_to_constant_negative_destination, BOTH, IndexError, ["A[-16, 0]", "outside A"]),
    (copy_constant_start_past_the_end, BOTH, IndexError, ["A[64, 0]", "dimension 0 has 64"]),
    (copy_slice_past_the_end, BOTH, IndexError, ["A[70, 0]", "outside A"]),
    (copy_from_shared_start_past_its_end, BOTH, IndexError, ["S[32, 0]", "outside S"]),
    (tile_atomic_constant_negative_start, BOTH, IndexError, ["T.atomic_add", "A[-16, 0]"]),
    (fill_region_past_the_end, BOTH, IndexError, ["T.fill", "S[40]", "outside S"]),
    (parallel_past_2_31, BOTH, ValueError, ["T.Parallel extent 2147483648", "below 2^31"]),
    (parallel_over_a_smaller_shared_tile, BOTH, IndexError,
     ["S[i] reaches index 63", "shared buffer S [32]"]),
    (fragment_index_off_by_one, BOTH, IndexError, ["reaches index 32", "fragment F [32]"]),
    (shared_read_before_its_start, BOTH, IndexError, ["reaches index -1", "shared buffer S"]),
    (serial_loop_past_a_shared_tile, BOTH, IndexError, ["S[k] reaches index 63", "k in [0, 63]"]),
    (constant_index_past_a_shared_tile, BOTH, IndexError, ["S[40] reaches index 40"]),
    (local_buffer_past_its_end, BOTH, IndexError, ["L[k] reaches index 7", "local buffer L [4]"]),
    (strided_loop_past_a_fragment_row, BOTH, IndexError, ["reaches index 30", "dimension 1"]),
    (gemm_float16_times_bfloat16, ALL, TypeError,
     ["T.gemm", "A (float16) and B (bfloat16) must have the same dtype"]),
    (gemm_bool_operands, ALL, TypeError, ["bool operands accumulating into int32",
                                          "not a gemm the language defines"]),
    (gemm_float16_into_int32, ALL, TypeError, ["float16 operands accumulating into int32"]),
    (gemm_int8_into_float32, ALL, TypeError, ["int8 operands accumulating into float32"]),
    (gemm_int8_times_uint8, BOTH, TypeError, ["A (int8) and B (uint8)"]),
    (gemm_float32_into_float16, BOTH, TypeError, ["float32 operands accumulating into float16"]),
    (gemm_on_global_a, ALL, ValueError, ["T.gemm operand A (A) is a global buffer",
                                         "shared memory or fragments"]),
    (gemm_on_global_b, ALL, ValueError, ["T.gemm operand B (B) is a global buffer"]),
    (gemm_into_global_c, BOTH, ValueError, ["T.gemm operand C (C) is a global buffer"]),
    (gemm_on_a_local_buffer, BOTH, ValueError, ["operand A (A_l) is a local buffer"]),
    (atomic_add_int8, ALL, TypeError, ["T.atomic_add on A of dtype int8", "atomics exist for"]),
    (atomic_add_bool, BOTH, TypeError, ["T.atomic_add on A of dtype bool"]),
    (atomic_add_uint8, BOTH, TypeError, ["T.atomic_add on A of dtype uint8"]),
    (atomic_add_int16, BOTH, TypeError, ["T.atomic_add on A of dtype int16"]),
    (atomic_max_int8, BOTH, TypeError, ["T.atomic_max on A of dtype int8"]),
    (atomic_add_tile_int16, BOTH, TypeError, ["T.atomic_add on A of dtype int16"]),
    (atomic_addx2_int32, BOTH, TypeError, ["T.atomic_addx2 on A of dtype int32"]),
    (atomic_load_int8, BOTH, TypeError, ["T.atomic_load on A of dtype int8"]),
    (num_stages_negative, BOTH, ValueError, ["num_stages must be a non-negative integer",
                                            "got -2"]),
    (num_stages_fractional, BOTH, ValueError, ["num_stages", "got 2.5"]),
    (num_stages_bool, BOTH, ValueError, ["num_stages", "got True"]),
    (num_stages_string, BOTH, ValueError, ["num_stages", "got '2'"]),
    (grid_y_past_65535, ALL, ValueError, ["grid extent 70000 along y", "limit of 65535"]),
    (grid_z_past_65535, BOTH, ValueError, ["grid extent 65536 along z"]),
    (grid_x_past_2_31, BOTH, ValueError, ["grid extent 2147483648 along x"]),
    (threads_z_past_64, BOTH, ValueError, ["threads= extent 128 along z", "limit of 64"]),
    (threads_y_past_1024, BOTH, ValueError, ["at most 1024 threads, got 2048"]),
    (macro_recursing_without_end, BOTH, RecursionError,
     ["`_endless` calls itself without end", "base case decided by a Python value"]),
]
PARAMS = [(b, t, e, w) for b, targets, e, w in CASES for t in targets]


def _helpers_of(builder):
    """Helpers a builder calls (`_gemm_dtypes`, a macro): the marked line may be theirs."""
    out, codes, names = [], [builder.__code__], []
    while codes:  # the kernel defined inside the builder names the macro, not the builder
        code = codes.pop()
        names += code.co_names
        codes += [c for c in code.co_consts if inspect.iscode(c)]
    for name in names:
        obj = globals().get(name)
        obj = getattr(obj, "func", obj)  # a T.macro wraps its function
        if callable(obj) and hasattr(obj, "__code__"):
            out.append(obj)
    return out


VARIANT = {  # builders whose helper marks one line per variant: which one
    gemm_on_global_a: 0, gemm_on_global_b: 1, gemm_into_global_c: 2,
    atomic_add_int8: 0, atomic_add_bool: 0, atomic_add_uint8: 0, atomic_add_int16: 0,
    atomic_max_int8: 1, atomic_add_tile_int16: 2, atomic_addx2_int32: 3, atomic_load_int8: 4,
}


def _expected_line(builder) -> int:
    if builder in VARIANT:
        return marked_lines(_helpers_of(builder)[0])[VARIANT[builder]]
    for candidate in [builder] + _helpers_of(builder):
        marks = marked_lines(candidate)
        if len(marks) == 1:
            return marks[0]
    raise AssertionError(f"{builder.__name__}: no single `# <-` line")


def _build(builder, target):
    return build_for(builder(), target)


@pytest.mark.parametrize("builder,target,exc,words", PARAMS,
                         ids=[f"{b.__name__}-{t.split('=')[-1]}" for b, t, _, _ in PARAMS])
def test_rejected_with_a_located_error(builder, target, exc, words):
    with pytest.raises(KernelError) as info:
        _build(builder, target)
    err = info.value
    assert isinstance(err, exc), f"{type(err).__name__} is not a {exc.__name__}:\n{err}"
    check_located(err, words, __file__, _expected_line(builder))


def test_every_case_is_listed_once():
    names = [b.__name__ for b, *_ in CASES]
    assert len(names) == len(set(names))
    assert len(PARAMS) >= 100


# ---- errors leave without compiler frames ----------------------------------------------------
@pytest.mark.parametrize("builder,target", [
    (return_in_kernel, "cpu"),                     # raised while tracing
    (parallel_over_a_smaller_shared_tile, "cpu"),  # the semantic checks
    (gemm_float16_times_bfloat16, SM90),           # trace time, CUDA target
])
def test_errors_show_the_user_line_not_compiler_frames(builder, target):
    with pytest.raises(KernelError) as info:
        _build(builder, target)
    frames = traceback.extract_tb(info.value.__traceback__)
    inside = [f for f in frames if "/tilelang/" in f.filename]
    assert len(inside) <= 4, "".join(traceback.format_list(frames))
    assert not any("/transform/" in f.filename or "/ir/visitor" in f.filename for f in inside)


def test_lowering_errors_are_trimmed_too():
    """A pass deep in the CUDA pipeline raising (a shared gemm accumulator on CUDA): the
    traceback ends at the pipeline's entry, as tracing's does, not fifty frames down."""
    @T.prim_func
    def f(C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_s = T.alloc_shared((64, 64), "float32")
            T.clear(A_s)
            T.clear(B_s)
            T.clear(C_s)
            T.gemm(A_s, B_s, C_s)
            T.copy(C_s, C[0, 0])

    with pytest.raises(KernelError) as info:
        tilelang.lower(f, target=SM90)
    frames = traceback.extract_tb(info.value.__traceback__)
    assert frames[-1].name == "stage" and len(frames) <= 5, \
        "".join(traceback.format_list(frames))
    assert "must be a fragment" in str(info.value) and "T.gemm(A_s, B_s, C_s)" in str(info.value)


def test_interpreter_errors_at_run_time_are_trimmed():
    n = T.dynamic("n")

    @T.prim_func
    def f(A: T.Tensor((n,), "float32")):
        with T.Kernel(1, n, threads=32):
            A[0] = 1.0

    kernel = tilelang.compile(f, target="cpu")
    with pytest.raises(KernelError) as info:
        kernel(torch.zeros(70000))
    assert "grid extent 70000 along y is past CUDA's limit of 65535" in str(info.value)
    frames = traceback.extract_tb(info.value.__traceback__)
    assert not any("/interp/" in f.filename for f in frames)


# ---- what stays valid, with the right result ----------------------------------------------------
def _run(func, *tensors):
    tilelang.compile(func, target="cpu")(*tensors)
    return tensors


def test_return_after_the_kernel_and_in_helpers_is_fine():
    @T.macro
    def double(x):
        return x * 2  # a macro's own return: no frame of its own is left

    def helper(A):  # a plain Python helper called inside the kernel
        A[1] = 3.0
        return None

    @T.prim_func
    def f(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            A[0] = double(A[2])
            helper(A)
        return

    (a,) = _run(f, torch.tensor([0.0, 0.0, 5.0, 0.0]))
    assert a.tolist() == [10.0, 3.0, 5.0, 0.0]


def test_python_return_in_an_unrolled_python_loop_is_fine():
    @T.macro
    def first_positive(values):
        for v in values:  # a Python loop over Python values: ordinary Python
            if v > 0:
                return v
        return -1

    @T.prim_func
    def f(A: T.Tensor((2,), "int32")):
        with T.Kernel(1, threads=32):
            A[0] = first_positive([-3, 0, 7, 9])

    (a,) = _run(f, torch.zeros(2, dtype=torch.int32))
    assert a.tolist() == [7, 0]


def _window(start=None, dyn=False):
    @T.prim_func
    def f(A: T.Tensor((64, 8), "float32"), B: T.Tensor((16, 8), "float32"), s: T.int32):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((16, 8), "float32")
            if dyn:
                T.copy(A[s, 0], S)
            elif start == "slice":
                T.copy(A[-16:, :], S)
            else:
                T.copy(A[start, 0], S)
            T.copy(S, B[0, 0])
    return f


@pytest.mark.parametrize("what,start,expect_rows", [
    ("computed negative start reads zeros", -16, [None] * 16),
    ("computed start overlapping the top", -4, [None] * 4 + list(range(12))),
    ("computed start overlapping the bottom", 56, list(range(56, 64)) + [None] * 8),
])
def test_computed_starts_are_guarded(what, start, expect_rows):
    a = torch.arange(64 * 8, dtype=torch.float32).reshape(64, 8)
    (_, b, _) = _run(_window(dyn=True), a, torch.full((16, 8), -1.0), start)
    want = [[0.0] * 8 if r is None else a[r].tolist() for r in expect_rows]
    assert b.tolist() == want, what


def test_ragged_constant_start_reads_zeros_past_the_end():
    a = torch.arange(64 * 8, dtype=torch.float32).reshape(64, 8)
    (_, b, _) = _run(_window(56), a, torch.full((16, 8), -1.0), 0)
    assert b[:8].tolist() == a[56:].tolist() and b[8:].abs().sum() == 0


def test_negative_slice_keeps_python_meaning():
    a = torch.arange(64 * 8, dtype=torch.float32).reshape(64, 8)
    (_, b, _) = _run(_window("slice"), a, torch.zeros(16, 8), 0)
    assert torch.equal(b, a[48:])


def test_negative_element_index_counts_from_the_end():
    @T.prim_func
    def f(A: T.Tensor((8,), "float32"), B: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=32):
            B[0] = A[-1]
            B[1] = A[-8]

    (_, b) = _run(f, torch.arange(8, dtype=torch.float32), torch.zeros(2))
    assert b.tolist() == [7.0, 0.0]


def _loop(start, stop, dtype="int64"):
    @T.prim_func
    def f(A: T.Tensor((8,), dtype)):
        with T.Kernel(1, threads=32):
            for i in T.serial(start, stop):
                A[i - start] = i
    return f


def test_loop_past_2_31_counts_in_64_bits():
    f = _loop(2**31 - 3, 2**31 + 2)
    src = tilelang.lower(f, target=SM90)
    assert "for (int64_t i = 2147483645LL; i < 2147483650LL; ++i)" in src
    (a,) = _run(f, torch.zeros(8, dtype=torch.int64))
    assert a.tolist() == [2**31 - 3 + k for k in range(5)] + [0, 0, 0]


@pytest.mark.parametrize("extent,ctype", [(2**40, "int64_t"), (2**31, "int64_t"),
                                          (2**31 - 1, "int")])
def test_serial_loop_variable_width(extent, ctype):
    @T.prim_func
    def f(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.serial(extent):
                A[0] = A[0] + 1.0

    src = tilelang.lower(f, target=SM90)
    assert f"for ({ctype} i = 0" in src, src


def test_loop_over_an_int64_size_is_int64():
    m = T.dynamic("m", "int64")

    @T.prim_func
    def f(A: T.Tensor((m,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.serial(m):
                A[i] = 1.0

    assert "for (int64_t i = 0LL; i < m; ++i)" in tilelang.lower(f, target=SM90)


def test_parallel_over_an_int64_size_keeps_working():
    """Only a constant T.Parallel extent of 2^31 or more is refused; an int64 size is not."""
    n = T.dynamic("n", "int64")

    @T.prim_func
    def f(A: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(n):
                A[i] = 2.0

    (a,) = _run(f, torch.zeros(5))
    assert a.tolist() == [2.0] * 5
    assert "f_kernel" in tilelang.lower(f, target=SM90)


def test_a_parallel_loop_longer_than_its_fragment_sizes_it_like_the_reference():
    """Not an out-of-bounds access: the reference sizes a fragment by the layout of the loop
    that indexes it, so `T.Parallel(64, 64)` over a 32x32 fragment holds 64x64 elements (the
    attention-sink examples allocate `sinks` with `heads` elements and fill `block_M`);
    semantic_check grows the fragment first, both targets run it."""
    a = torch.randn(64, 64)
    want = a.clone()
    (got,) = _run(parallel_over_a_smaller_fragment(), a)
    assert torch.equal(got, want)  # A[0:32, 0:32] = F[0:32, 0:32] = A[0:32, 0:32]
    assert "f_kernel" in tilelang.lower(parallel_over_a_smaller_fragment(), target=SM90)


def test_guarded_and_non_affine_accesses_are_not_refused():
    """Only what can be decided exactly is refused: an access under a condition, or with an
    index the check cannot bound exactly (i % 32), compiles and runs."""
    @T.prim_func
    def f(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((32,), "float32")
            for i in T.Parallel(64):
                if i < 32:
                    S[i] = A[i]
            for i in T.Parallel(64):
                B[i] = S[i % 32]

    a = torch.arange(64, dtype=torch.float32)
    (_, b) = _run(f, a, torch.zeros(64))
    assert b.tolist() == [float(i % 32) for i in range(64)]
    assert "f_kernel" in tilelang.lower(f, target=SM90)


def test_float64_gemm_runs_on_the_interpreter_and_on_the_cuda_cores():
    """The language defines float64 gemms (the reference lowers them): the interpreter runs
    them, CUDA runs them on the CUDA cores (tests/codegen/test_gemm_fma.py); only a register
    operand, which that gemm does not read, is not supported."""
    func = _gemm_dtypes("float64", "float64", "float64")
    out = torch.full((64, 64), 7.0, dtype=torch.float64)
    tilelang.compile(func, target="cpu")(out)
    assert out.abs().sum() == 0  # A and B cleared: C = 0
    assert "tl::gemm_fma_ss<" in tilelang.lower(func, target=SM90)


@pytest.mark.parametrize("a,b,c", [("float16", "float16", "float32"),
                                   ("float16", "float16", "float16"),
                                   ("bfloat16", "bfloat16", "float32"),
                                   ("int8", "int8", "int32"),
                                   ("float8_e4m3", "float8_e5m2", "float32")])
def test_gemm_dtypes_of_the_language_lower(a, b, c):
    assert "tl::" in tilelang.lower(_gemm_dtypes(a, b, c), target=SM90)


def test_static_zero_size_tensor_reads_zeros_and_skips_stores():
    @T.prim_func
    def f(A: T.Tensor((0, 4), "float32"), B: T.Tensor((4, 4), "float32")):
        with T.Kernel(1, threads=32):
            for i, j in T.Parallel(4, 4):
                B[i, j] = A[i, j] + 1.0
            A[0, 0] = 5.0

    (a, b) = _run(f, torch.zeros(0, 4), torch.full((4, 4), -1.0))
    assert b.tolist() == [[1.0] * 4] * 4 and a.shape == (0, 4)
    src = tilelang.lower(f, target=SM90)
    assert "B[" in src


def test_dynamic_size_zero_reads_zeros():
    n = T.dynamic("n")

    @T.prim_func
    def f(A: T.Tensor((n,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(8):
                B[i] = A[i] * 2.0 + 1.0

    (_, b) = _run(f, torch.zeros(0), torch.zeros(8))
    assert b.tolist() == [1.0] * 8


def test_recursive_macro_with_a_python_base_case_works():
    @T.macro
    def add_down(A, n):
        if n > 0:
            A[0] = A[0] + n
            add_down(A, n - 1)

    @T.prim_func
    def f(A: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=1):
            add_down(A, 10)

    (a,) = _run(f, torch.zeros(1, dtype=torch.int32))
    assert a.tolist() == [55]


@pytest.mark.parametrize("dtype,value", [("float32", 1.5), ("int32", 3), ("float16", 0.5),
                                         ("int64", 2), ("bfloat16", 0.25)])
def test_atomics_of_the_supported_types_run(dtype, value):
    @T.prim_func
    def f(A: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(8):
                T.atomic_add(A[0], value)

    torch_dtype = getattr(torch, dtype)
    (a,) = _run(f, torch.zeros(1, dtype=torch_dtype))
    assert float(a[0]) == 8 * value


def test_num_stages_of_any_integer_type_is_accepted():
    src = tilelang.lower(_stages(np.int64(2)), target=SM90)
    assert "f_kernel" in src


def test_launch_limits_at_their_edge_are_accepted():
    assert "f_kernel" in tilelang.lower(_grid(1, 65535), target=SM90)
    assert "f_kernel" in tilelang.lower(_grid(1, threads=(1, 1, 64)), target=SM90)


def test_mutual_recursion_names_one_of_the_macros():
    with pytest.raises(RecursionError) as info:
        macros_recursing_into_each_other()
    err = info.value
    assert isinstance(err, KernelError) and "calls itself without end" in str(err)
    assert "`_ping`" in str(err) or "`_pong`" in str(err)
    lines = set(range(*_span_of(_ping))) | set(range(*_span_of(_pong)))
    assert err.loc.filename == __file__ and err.loc.lineno in lines


def _span_of(macro):
    lines, first = inspect.getsourcelines(macro.func)
    return first, first + len(lines)


def test_parameter_names_cuda_would_reject_are_mangled(tmp_path):
    """`__shared__` is a CUDA keyword, `é` is not ASCII, `int` and `block_` collide with C++
    or with the generated code, and so would a non-ASCII kernel name: all compile with the
    CUDA compiler (NVRTC or nvcc), and the interpreter runs the same program."""
    source = '''
import tilelang.language as T

@T.prim_func
def ядро(__shared__: T.Tensor((8,), "float32"), é: T.Tensor((8,), "float32"), int: T.int32,
         block_: T.int32, A__B: T.Tensor((8,), "float32")):
    with T.Kernel(1, threads=32):
        for i in T.Parallel(8):
            __shared__[i] = é[i] * int + block_ + A__B[i]
'''
    path = tmp_path / "weird_names.py"
    path.write_text(source, encoding="utf-8")
    ns: dict = {}
    exec(compile(source, str(path), "exec"), ns)
    func = ns["ядро"]
    kernel = tilelang.compile(func, target=SM90)
    cuda = kernel.get_kernel_source()
    head = next(line for line in cuda.splitlines() if "__global__" in line)
    assert "__shared__" not in head and "é" not in head and "ядро" not in head, head
    assert kernel.adapter.compiled.cubin  # the CUDA compiler accepted it
    out = torch.zeros(8)
    tilelang.compile(func, target="cpu")(out, torch.arange(8.0), 3, 1, torch.ones(8))
    assert out.tolist() == [3.0 * i + 2.0 for i in range(8)]


@pytest.mark.parametrize("name", ["__shared__", "_Upper", "a__b", "é", "ядро", "9lives", "x.y",
                                  "__global__", "plain_name"])
def test_c_identifiers(name):
    from tilelang.codegen.cuda import c_identifier

    ident = c_identifier(name)
    assert ident.isascii() and ident.isidentifier() and "__" not in ident
    assert not ident.startswith("_") and (ident == name) == (name == "plain_name")


# ---- target strings ---------------------------------------------------------------------------
@pytest.mark.parametrize("target,words", [
    ("cuda -arch=sm_90a junk", "'junk' is not an option"),
    ("cuda -arch=sm_90ax", "'sm_90ax' is not an architecture"),
    ("cuda -arch=sm_90a -foo=1", "'-foo=1' is not an option"),
    ("cuda -arch=", "'' is not an architecture"),
    ("cuda -arch", "'-arch' is not an option"),
    ("cuda -arch=sm_80 sm_90a; rm -rf", "'sm_90a;' is not an option"),
    ("cpu junk", "unknown target"),
    ("cudax", "unknown target"),
    ("hip", "not supported"),
])
def test_malformed_targets_are_refused(target, words):
    from tilelang.jit.target import parse_target

    with pytest.raises(ValueError) as info:
        parse_target(target)
    assert words in str(info.value) and repr(target) in str(info.value)


@pytest.mark.parametrize("target,arch", [
    ("cuda -arch=sm_90a", "sm_90a"), ("  CUDA   -arch=sm_80 ", "sm_80"), ("cuda sm_89", "sm_89"),
    ("cuda -keys=cuda,gpu -arch=sm_80 -max_num_threads=1024 -thread_warp_size=32", "sm_80"),
    ("cuda -mcpu=sm_90a", "sm_90a"), ("nvidia -arch=sm_86", "sm_86"),
])
def test_well_formed_targets_are_accepted(target, arch):
    from tilelang.jit.target import parse_target

    t = parse_target(target)
    assert (t.kind, t.arch) == ("cuda", arch)


def test_a_grid_past_the_limits_traces_and_fails_when_compiled():
    """The reference traces such a program (tilelang.tools.Analyzer analyses its IR without a
    launch); compiling it for either target is the located error."""
    func = grid_y_past_65535()  # traced without an error
    assert "70000" in str(func)
    with pytest.raises(KernelError, match="grid extent 70000 along y"):
        tilelang.compile(func, target="cpu")
