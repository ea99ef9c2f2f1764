"""Programs the compiler cannot handle are rejected, never miscompiled: each construct below
raises a located compile error (a `KernelError`) whose message names the construct and whose
location is the offending line of the kernel (marked `# <-` here), for the CUDA targets and,
where the rule is part of the language rather than of the hardware, for the interpreter too.

Hardware limits (mma tile shapes, shared memory size) bind only the CUDA targets: the
interpreter runs those programs. (A fragment indexed outside T.Parallel and a transposed
register gemm operand, once rejected here, are accepted by both targets now:
tests/transform/test_fragment_access.py.)"""

import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError
from located import build_for, check_located, marked_lines

CUDA = ("cuda -arch=sm_80", "cuda -arch=sm_90a")
ALL = ("cpu",) + CUDA


def fragment_read_across_threads():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0, 0], S)
            for i, j in T.Parallel(64, 64):
                S[i, j] = S[63 - i, j] + 1.0  # <-
            T.copy(S, B[0, 0])
    return f


def gemm_accumulator_indexed_by_an_inner_serial_loop():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float16"), out: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            s = T.alloc_fragment((64,), "float32")
            T.copy(A, A_s)
            T.gemm(A_s, A_s, acc, transpose_B=True, clear_accum=True)
            T.fill(s, 0.0)
            for i in T.Parallel(64):
                for j in T.serial(64):
                    s[i] += acc[i, j]  # <-
            T.copy(s, out)
    return f


def local_indexed_by_parallel_var():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            L = T.alloc_local((64,), "float32")
            for i in T.Parallel(64):
                L[i] = A[i]  # <-
            for i in T.Parallel(64):
                A[i] = L[i]
    return f


def tile_op_inside_parallel():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 64), "float32")
            for i in T.Parallel(64):
                T.fill(S[i, 0:64], 1.0)  # <-
            T.copy(S, A[0, 0])
    return f


def gemm_inside_parallel():
    @T.prim_func
    def f(C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            for i in T.Parallel(2):
                T.gemm(A_s, B_s, C_l)  # <-
            T.copy(C_l, C[0, 0])
    return f


def nested_parallel():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(64):
                A[i, 0] = 1.0
                for j in T.Parallel(64):  # <-
                    A[i, j] = 2.0
    return f


def pipelined_inside_parallel():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(64):
                for k in T.Pipelined(4, num_stages=2):  # <-
                    A[i, k] = 1.0
    return f


def fragment_loop_with_symbolic_extent():
    n = T.dynamic("n")

    @T.prim_func
    def f(A: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((64,), "float32")
            for i in T.Parallel(n):
                F[i] = A[i]  # <-
            T.copy(F, A[0])
    return f


def gemm_k_mismatch():
    @T.prim_func
    def f(C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((16, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.gemm(A_s, B_s, C_l)  # <-
            T.copy(C_l, C[0, 0])
    return f


def _gemm(m, n, k, c_scope="fragment", threads=128):
    alloc_c = T.alloc_fragment if c_scope == "fragment" else T.alloc_shared

    @T.prim_func
    def f(C: T.Tensor((m, n), "float32")):
        with T.Kernel(1, threads=threads):
            A_s = T.alloc_shared((m, k), "float16")
            B_s = T.alloc_shared((k, n), "float16")
            C_l = alloc_c((m, n), "float32")
            T.clear(A_s)
            T.clear(B_s)
            T.clear(C_l)
            T.gemm(A_s, B_s, C_l)  # <-
            T.copy(C_l, C[0, 0])
    return f


def gemm_m_not_a_multiple_of_16():
    return _gemm(8, 64, 32)


def gemm_k_not_a_multiple_of_the_instruction():
    return _gemm(64, 64, 8)


def gemm_accumulator_in_shared_memory():
    return _gemm(64, 64, 32, c_scope="shared")


def layout_conflict_accumulator_reused_as_operand():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            X = T.alloc_fragment((64, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0, 0], A_s)
            T.copy(A[0, 0], B_s)
            T.clear(C_l)
            T.gemm(A_s, B_s, X)
            T.gemm(X, B_s, C_l)  # <-
            T.copy(C_l, C[0, 0])
    return f


def copy_into_a_smaller_tile():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32"), B: T.Tensor((16, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((16, 64), "float32")
            T.copy(A[0:32, 0:64], S)  # <-
            T.copy(S, B[0, 0])
    return f


def copy_with_unpaired_extents():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64,), "float32")
            T.copy(A[0:8, 0:8], S)  # <-
            T.copy(S, B[0])
    return f


def reduce_into_a_wrong_shape():
    @T.prim_func
    def f(A: T.Tensor((16, 8), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_fragment((16, 8), "float32")
            D = T.alloc_fragment((8,), "float32")
            T.copy(A[0, 0], S)
            T.reduce_sum(S, D, dim=1)  # <-
            T.copy(D, B[0])
    return f


def cumsum_dim_out_of_range():
    @T.prim_func
    def f(A: T.Tensor((16, 8), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((16, 8), "float32")
            T.copy(A[0, 0], S)
            T.cumsum(S, dim=2)  # <-
            T.copy(S, A[0, 0])
    return f


def integer_true_division():
    @T.prim_func
    def f(A: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(64):
                A[i] = A[i] / 2  # <-
    return f


def shared_memory_over_the_limit():
    @T.prim_func
    def f(A: T.Tensor((256, 256), "float32")):
        with T.Kernel(1, threads=128):  # <- (the kernel as a whole; the message names S)
            S = T.alloc_shared((256, 256), "float32")
            T.copy(A[0, 0], S)
            T.copy(S, A[0, 0])
    return f


def too_many_threads():
    @T.prim_func
    def f(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=2048):  # <-
            for i in T.Parallel(64):
                A[i] = 1.0
    return f


def statement_outside_a_kernel():
    @T.prim_func
    def f(A: T.Tensor((16,), "float32")):
        A[0] = 1.0  # <-
        with T.Kernel(1, threads=32):
            A[1] = 2.0
    return f


# (builder, targets that must reject it, words the message must contain)
CASES = [
    (fragment_read_across_threads, ALL, ["S[63 - i, j]", "S[i, j]"]),
    (gemm_accumulator_indexed_by_an_inner_serial_loop, ALL,
     ["thread-distributed fragment acc", "`j`", "T.reduce_sum"]),
    (local_indexed_by_parallel_var, ALL, ["Local buffer `L`", "T.Parallel"]),
    (tile_op_inside_parallel, ALL, ["parallel loop", "T.fill"]),
    (gemm_inside_parallel, ALL, ["parallel loop", "T.gemm"]),
    (nested_parallel, ALL, ["Nested parallel"]),
    (pipelined_inside_parallel, ALL, ["Pipelined", "parallel"]),
    (fragment_loop_with_symbolic_extent, ALL, ["symbolic extent", "F"]),
    (gemm_k_mismatch, ALL, ["T.gemm", "K_A = 32, K_B = 16"]),
    (gemm_m_not_a_multiple_of_16, CUDA, ["T.gemm", "8x64"]),
    (gemm_k_not_a_multiple_of_the_instruction, CUDA, ["T.gemm", "K = 8", "16"]),
    (gemm_accumulator_in_shared_memory, CUDA, ["T.gemm", "C_l", "fragment"]),
    (layout_conflict_accumulator_reused_as_operand, CUDA, ["layout conflict", "X"]),
    (copy_into_a_smaller_tile, ALL, ["T.copy", "smaller"]),
    (copy_with_unpaired_extents, ALL, ["T.copy", "A[8, 8]"]),
    (reduce_into_a_wrong_shape, ALL, ["reduce output shape", "[16]"]),
    (cumsum_dim_out_of_range, ALL, ["T.cumsum", "dim 2"]),
    (integer_true_division, ALL, ["`/`", "//"]),
    (shared_memory_over_the_limit, CUDA, ["shared memory", "S [256, 256]"]),
    (too_many_threads, ALL, ["1024 threads", "2048"]),
    (statement_outside_a_kernel, CUDA, ["outside `with T.Kernel"]),
]
PARAMS = [(b, t, w) for b, targets, w in CASES for t in targets]


def _marked_line_of(builder):
    """The `# <-` line, looked up in the builder itself or in the helper it calls."""
    return (marked_lines(builder) or marked_lines(_gemm))[0]


@pytest.mark.parametrize("builder,target,words", PARAMS,
                         ids=[f"{b.__name__}-{t.split('=')[-1]}" for b, t, _ in PARAMS])
def test_rejected_with_a_located_error(builder, target, words):
    with pytest.raises(KernelError) as info:
        build_for(builder(), target)
    check_located(info.value, words, __file__, _marked_line_of(builder))


@pytest.mark.parametrize("builder", [gemm_m_not_a_multiple_of_16,
                                     gemm_k_not_a_multiple_of_the_instruction,
                                     gemm_accumulator_in_shared_memory,
                                     layout_conflict_accumulator_reused_as_operand,
                                     shared_memory_over_the_limit])
def test_hardware_limits_do_not_bind_the_interpreter(builder):
    """The interpreter defines the language, not the instruction set: these run there. Their
    CUDA does not exist: asking the kernel for it reports the limit at the user's line."""
    kernel = tilelang.compile(builder(), target="cpu")
    assert kernel.get_tir() is not None
    with pytest.raises(KernelError) as info:
        kernel.get_kernel_source()
    assert info.value.loc.lineno == _marked_line_of(builder)
