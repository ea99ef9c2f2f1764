"""The newer reference style: unannotated tensor parameters, `T.const` sizes and annotation
statements in the body; `.compile(M=..., ...)` by name without tensors."""

import torch

import tilelang
import tilelang.language as T


@tilelang.jit
def matmul(A, B, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")

    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)

        T.copy(C_local, C[by * block_M, bx * block_N])

    return C


def ref(a, b):
    return (a.float() @ b.float()).half()


def test_quickstart_compile_by_name_then_call_kernel():
    kernel = matmul.compile(M=128, N=96, K=64, block_M=64, block_N=32, block_K=32)
    assert isinstance(kernel, tilelang.JITKernel)
    p = kernel.prim_func.params
    assert [b.name for b in p] == ["A", "B", "C"]
    assert p[0].shape == (128, 64) and p[1].shape == (64, 96) and p[2].shape == (128, 96)
    a = torch.randn(128, 64, dtype=torch.float16)
    b = torch.randn(64, 96, dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b), ref(a, b), rtol=1e-2, atol=1e-2)


def test_call_with_tensors_binds_consts_from_annotations():
    start = matmul.trace_count
    a = torch.randn(64, 32, dtype=torch.float16)
    b = torch.randn(32, 96, dtype=torch.float16)
    torch.testing.assert_close(matmul(a, b, 32, 32, 32), ref(a, b), rtol=1e-2, atol=1e-2)
    assert matmul.trace_count == start + 2  # phase 1 (which dims bind M, N, K) + phase 2
    a2 = torch.randn(64, 32, dtype=torch.float16)
    torch.testing.assert_close(matmul(a2, b, 32, 32, 32), ref(a2, b), rtol=1e-2, atol=1e-2)
    assert matmul.trace_count == start + 2
    a3 = torch.randn(32, 32, dtype=torch.float16)  # M changes: phase 2 only
    torch.testing.assert_close(matmul(a3, b, 32, 32, 32), ref(a3, b), rtol=1e-2, atol=1e-2)
    assert matmul.trace_count == start + 3
    tir = matmul.get_tir(a3, b, 32, 32, 32)
    assert "A: T.Tensor((32, 32)" in str(tir) and "C: T.Tensor((32, 96)" in str(tir)


def test_par_compile_placeholders_newstyle():
    cfgs = [{"A": T.Tensor((64, 64), T.float16), "B": T.Tensor((64, 32), T.float16),
             "block_M": bm, "block_N": 32, "block_K": 32} for bm in (32, 64)]
    kernels = matmul.par_compile(cfgs)
    assert [k.prim_func.params[2].shape for k in kernels] == [(64, 32), (64, 32)]
    a = torch.randn(64, 64, dtype=torch.float16)
    b = torch.randn(64, 32, dtype=torch.float16)
    traces = matmul.trace_count
    for bm, k in zip((32, 64), kernels):
        torch.testing.assert_close(k(a, b), ref(a, b), rtol=1e-2, atol=1e-2)
        assert matmul.compile(a, b, bm, 32, 32) is k  # the call path finds them cached
    assert matmul.trace_count == traces


def test_derived_dims_dyn_and_strided_annotation_statements():
    @tilelang.jit
    def rowsum_pairs(A, S, block: int = 4):
        M, K = T.const("M, K")
        A: T.Tensor[[M, K], T.float32]
        S: T.Tensor[[M, T.ceildiv(K, 2)], T.float32]  # derived: checked, not keyed
        with T.Kernel(T.ceildiv(M, block), threads=32) as bx:
            for i, j in T.Parallel(block, T.ceildiv(K, 2)):
                S[bx * block + i, j] = A[bx * block + i, 2 * j] + A[bx * block + i, 2 * j + 1]

    a = torch.randn(8, 6)
    s = torch.zeros(8, 3)
    assert rowsum_pairs(a, s) is None
    torch.testing.assert_close(s, a[:, 0::2] + a[:, 1::2])

    @tilelang.jit
    def copy_dyn(A, B):
        N = T.const("N")
        A: T.StridedTensor[[N, T.dyn], [T.dyn, 1], T.float32]
        B: T.Tensor[[N, T.dyn], T.float32]
        M0, M1 = A.shape
        with T.Kernel(1, threads=32) as _:
            for i, j in T.Parallel(N, M1):
                B[i, j] = A[i, j]

    base = torch.randn(4, 10)
    for width in (3, 7):
        view = base[:, :width]  # row stride 10, not contiguous
        out = torch.zeros(4, width)
        copy_dyn(view, out)
        torch.testing.assert_close(out, view)
    assert copy_dyn.trace_count == 2  # phase 1 + one specialisation for both widths


@tilelang.jit(target="cpu")
def plus_one_and_ramp(A):
    m = T.dynamic("m")
    A: T.Tensor[[m], T.float32]
    B = T.empty([m], T.float32)
    C = T.empty([m + 1], T.float32)
    with T.Kernel(1, threads=1):
        for i in T.serial(m):
            B[i] = A[i] + 1.0
        for i in T.serial(m + 1):
            C[i] = T.cast(i, T.float32)
    return B, C


def test_several_outputs_come_back_as_a_list():
    a = torch.randn(13)
    outputs = plus_one_and_ramp(a)
    assert isinstance(outputs, list) and len(outputs) == 2
    b, c = outputs
    torch.testing.assert_close(b, a + 1.0)
    assert c.tolist() == [float(i) for i in range(14)]


@T.macro
def _copy_out(A):
    M, N = A.shape
    B = T.empty(M, N, dtype=A.dtype)
    with T.Kernel(T.ceildiv(M, 16), threads=16) as bx:
        for i, j in T.Parallel(16, N):
            if bx * 16 + i < M:
                B[bx * 16 + i, j] = A[bx * 16 + i, j] * 2.0
    return B


@tilelang.jit(target="cpu")
def copy_through_macro(A):
    A: T.Tensor[[40, 8], T.float32]  # the kernel is opened by the macro
    return _copy_out(A)


@tilelang.jit(target="cpu")
def copy_strided(A):
    N = T.dynamic("N")
    M, S0, S1 = T.const("M, S0, S1")  # S0, S1: taken from the argument's strides
    A: T.StridedTensor[[N, M], [S0, S1], T.float32]
    return _copy_out(A)


def test_a_kernel_whose_body_only_annotates_and_calls_a_macro():
    a = torch.randn(40, 8)
    torch.testing.assert_close(copy_through_macro(a), a * 2.0)


def test_consts_taken_from_strides_specialise_per_stride():
    base = torch.randn(37, 3, 6, 2)
    for view in (base[:, 0, :, 0], base[:, 1, :, :].reshape(37, 12)[:, :6]):
        torch.testing.assert_close(copy_strided(view), view * 2.0)
    k1 = copy_strided.compile(torch.randn(4, 6, 2)[:, :, 0])
    k2 = copy_strided.compile(torch.randn(4, 6))
    assert k1 is not k2


def test_an_assert_comparing_a_dynamic_size_with_itself_is_decided_when_traced():
    @T.macro
    def same_rows(A, B):
        assert A.shape[0] == B.shape[0], "row mismatch"
        with T.Kernel(1, threads=1):
            for i in T.serial(A.shape[0]):
                B[i] = A[i] + 1.0

    @tilelang.jit(target="cpu")
    def add_one(A, B):
        N = T.dynamic("N")
        A: T.Tensor[[N], T.float32]
        B: T.Tensor[[N], T.float32]
        same_rows(A, B)

    a, b = torch.randn(9), torch.full((9,), float("nan"))
    add_one(a, b)
    torch.testing.assert_close(b, a + 1.0)
    assert "assert" not in add_one.get_tir(a, b).script()


def test_a_jitted_kernel_is_not_collected_as_a_test_function():
    import inspect

    # pytest collects `test_*` names whose unwrapped object is a function; the reference's
    # kernels are not, so a kernel named `test_kernel` in a test module is not run as a test
    assert not inspect.isfunction(inspect.unwrap(plus_one_and_ramp))
    assert plus_one_and_ramp.__name__ == "plus_one_and_ramp"
