"""T.call_extern / T.call_intrin: the result type first (`T.call_extern("float32", "f", x)`) or,
as the reference also accepts, by keyword after the name (`T.call_extern("f", x,
dtype="float32")`); both build the same call. The interpreter names injected CUDA as
GPU-only."""

import pytest
import torch

import tilelang
import tilelang.language as T

TWICE_PLUS = """
__device__ float twice_plus(float x, float y) { return 2.0f * x + y; }
__device__ void halve_into(const float* src, float* dst, int n) {
  for (int i = 0; i < n; ++i) dst[i] = src[i] * 0.5f;
}
"""


def extern_kernel(N, keyword, threads=128):
    """B = 2 A + 1 through `twice_plus`, C = A / 2 through `halve_into` on a local copy."""

    def twice_plus(x):
        if keyword:
            return T.call_extern("twice_plus", x, 1.0, dtype="float32")
        return T.call_extern("float32", "twice_plus", x, 1.0)

    @T.prim_func
    def kernel(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"),
               C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, threads), threads=threads) as bx:
            T.import_source(TWICE_PLUS)
            tx = T.get_thread_binding()
            src = T.alloc_local((1,), "float32")
            dst = T.alloc_local((1,), "float32")
            i = bx * threads + tx
            if i < N:
                B[i] = twice_plus(A[i])
                src[0] = A[i]
                # a statement: the examples give a void function their element type
                if keyword:
                    T.call_intrin("halve_into", T.access_ptr(src, "r"), T.access_ptr(dst, "w"),
                                  1, dtype="float32")
                else:
                    T.call_intrin("void", "halve_into", T.access_ptr(src, "r"),
                                  T.access_ptr(dst, "w"), 1)
                C[i] = dst[0]
    return kernel


@pytest.mark.parametrize("keyword", [False, True])
def test_both_spellings_build_the_same_call(keyword):
    src = tilelang.compile(extern_kernel(1000, keyword),
                           target="cuda -arch=sm_90a").get_kernel_source()
    assert "twice_plus(" in src and ", 1.0f)" in src
    assert "halve_into(" in src


def test_the_name_after_a_keyword_type_must_be_a_string():
    with pytest.raises(TypeError, match="function_name"):
        T.call_extern(3, dtype="float32")
    with pytest.raises(TypeError, match="function_name"):
        T.call_extern("float32")


def test_interpreter_names_the_injected_cuda():
    a = torch.rand(10)
    with pytest.raises(NotImplementedError, match="twice_plus"):
        tilelang.compile(extern_kernel(10, True), target="cpu")(a, a.clone(), a.clone())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("keyword", [False, True])
@pytest.mark.parametrize("N", [1, 1000])
def test_extern_calls_on_the_gpu(keyword, N):
    a = torch.rand(N, device="cuda")
    b = torch.full_like(a, float("nan"))
    c = torch.full_like(a, float("nan"))
    tilelang.compile(extern_kernel(N, keyword), target="cuda")(a, b, c)
    torch.testing.assert_close(b, 2 * a + 1)
    torch.testing.assert_close(c, a / 2)


def test_import_source_of_none_adds_nothing():
    @T.prim_func
    def kernel(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=4) as bx:
            T.import_source(None)  # the examples pass an optional source unconditionally
            tx = T.get_thread_binding()
            A[tx] = A[tx] + 1.0

    a = torch.arange(4.0)
    tilelang.compile(kernel, target="cpu")(a)
    assert a.tolist() == [1.0, 2.0, 3.0, 4.0]
    tilelang.compile(kernel, target="cuda -arch=sm_90a").get_kernel_source()


def test_import_source_needs_text():
    with pytest.raises(TypeError, match="T.import_source takes CUDA source text"):
        @T.prim_func
        def kernel(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=4):
                T.import_source(3)


def test_sources_written_for_the_reference_may_use_its_short_type_names():
    """The reference's generated code declares uint/uchar/ushort, and the dequantisation
    sources of its examples (T.import_source) use them."""
    source = "__device__ uint twice(uint v) { uchar c = 1; ushort s = 1; return v * 2 + c - s; }"

    @T.prim_func
    def k(x: T.Tensor((32,), "uint32"), y: T.Tensor((32,), "uint32")):
        with T.Kernel(1, threads=32):
            T.import_source(source)
            tx = T.get_thread_binding(0)
            y[tx] = T.call_extern("uint32", "twice", x[tx])

    assert "twice(x[tx])" in tilelang.compile(k, target="cuda -arch=sm_90a").get_kernel_source()


def test_tvm_tirx_call_extern_and_a_sleep_the_interpreter_skips():
    """`tirx.call_extern("void", "__nanosleep", 100)` as a statement: CUDA's sleep in the
    generated code; the interpreter, which has no clock, runs on."""
    from tilelang.tvm import tirx

    @T.prim_func
    def k(A: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            if tx == 0:
                tirx.call_extern("void", "__nanosleep", 100)
            A[tx] = tx

    src = tilelang.lower(k, target="cuda -arch=sm_90a")
    assert "__nanosleep(100);" in src
    a = torch.full((32,), -1, dtype=torch.int32)
    tilelang.compile(k, target="cpu")(a)
    assert torch.equal(a, torch.arange(32, dtype=torch.int32))
