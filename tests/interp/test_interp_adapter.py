"""The CPU adapter: source text, narrow-float tensors written in place, outputs allocated by
the JIT, rejection of injected CUDA, and the speed targets of the interpreter."""

import time

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from interp_testutil import cpu, f64, tensor
from tilelang.interp.adapter import CPUAdapter


def _scale(dtype, n=64, block=32):
    @T.prim_func
    def k(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), s: T.float32):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * s
    return k


def test_source_is_printed_ir():
    func = _scale("float16")
    adapter = CPUAdapter(func, {})
    assert adapter.source == str(func)
    assert cpu(func).get_kernel_source() == str(func)


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3", "float8_e5m2"])
def test_narrow_float_tensors_in_and_out(rng, dtype):
    tdt = getattr(torch, dtype.replace("e4m3", "e4m3fn"))
    k = cpu(_scale(dtype, 100), out_idx=[1])
    a = tensor(rng, (100,), "float32").to(tdt)
    b = k(a, 1.5)
    assert b.dtype == tdt
    expect = (a.float() * 1.5).to(tdt)
    assert torch.equal(b.float(), expect.float())


def test_outputs_allocated_and_inputs_updated_in_place(rng):
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32"),
          C: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                B[i] = A[i] + 1.0
                C[i] = i
                A[i] = 0.0

    kern = cpu(k, out_idx=[-1, 1])
    a = tensor(rng, (8,), "float32")
    a0 = f64(a)
    c, b = kern(a)
    np.testing.assert_allclose(f64(b), a0 + 1.0, rtol=1e-6)
    assert c.tolist() == list(range(8))
    assert (a == 0).all()


def test_call_extern_is_rejected_with_its_name():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            T.call_extern("float32", "my_device_fn", A[0])

    with pytest.raises(NotImplementedError, match=r"injected CUDA.*my_device_fn.*GPU"):
        cpu(k)


def test_import_source_is_rejected():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        T.import_source("__device__ float twice(float x) { return 2 * x; }")
        with T.Kernel(1, threads=32):
            A[0] = A[1]

    with pytest.raises(NotImplementedError, match="injected CUDA.*`twice`.*GPU"):
        cpu(k)


def test_non_cpu_tensor_or_wrong_count_errors():
    adapter = CPUAdapter(_scale("float32"), {})
    with pytest.raises(ValueError, match="takes 3 arguments"):
        adapter.run([torch.zeros(64)], {})


def _gemm(M, N, K, bm, bn, bk):
    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
          C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            As = T.alloc_shared((bm, bk), "float16")
            Bs = T.alloc_shared((bk, bn), "float16")
            Cf = T.alloc_fragment((bm, bn), "float32")
            T.clear(Cf)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[by * bm, ko * bk], As)
                T.copy(B[ko * bk, bx * bn], Bs)
                T.gemm(As, Bs, Cf)
            T.copy(Cf, C[by * bm, bx * bn])
    return k


def test_speed_gemm_512(rng):
    kern = cpu(_gemm(512, 512, 512, 64, 64, 32), out_idx=-1)
    a, b = tensor(rng, (512, 512), "float16"), tensor(rng, (512, 512), "float16")
    t0 = time.perf_counter()
    c = kern(a, b)
    elapsed = time.perf_counter() - t0
    np.testing.assert_allclose(f64(c), f64(a) @ f64(b), rtol=2e-2, atol=0.1)
    assert elapsed < 3.0, f"512^3 GEMM took {elapsed:.2f}s on the interpreter"


def test_speed_elementwise_1m(rng):
    n = 1 << 20
    kern = cpu(_scale("float32", n, 128), out_idx=[1])
    a = tensor(rng, (n,), "float32")
    t0 = time.perf_counter()
    b = kern(a, 2.0)
    elapsed = time.perf_counter() - t0
    assert torch.equal(b, a * 2.0)
    assert elapsed < 3.0, f"1M-element kernel took {elapsed:.2f}s on the interpreter"


def test_auto_target_runs_cpu_tensors(rng):
    if torch.cuda.is_available():
        pytest.skip("auto picks the GPU here")
    kern = tilelang.compile(_scale("float32"), out_idx=[1])
    a = tensor(rng, (64,), "float32")
    assert torch.equal(kern(a, 3.0), a * 3.0)
