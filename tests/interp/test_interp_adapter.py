"""The CPU adapter: source text, narrow-float tensors written in place, outputs allocated by
the JIT, rejection of injected CUDA, and the speed targets of the interpreter (in calls)."""

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from interp_testutil import cpu, f64, tensor
from tilelang.interp.adapter import CPUAdapter
from tilelang.testing.calls import count_calls


def _scale(dtype, n=64, block=32):
    @T.prim_func
    def k(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), s: T.float32):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * s
    return k


def test_source_is_printed_ir():
    """The adapter's source is the program it runs; the kernel's `get_kernel_source()` is CUDA
    (tests/jit/test_kernel_source.py)."""
    func = _scale("float16")
    adapter = CPUAdapter(func, {})
    assert adapter.source == str(func)
    assert str(cpu(func).get_tir()) == str(func)


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3", "float8_e5m2"])
def test_narrow_float_tensors_in_and_out(rng, dtype):
    tdt = getattr(torch, dtype.replace("e4m3", "e4m3fn"))
    k = cpu(_scale(dtype, 100), out_idx=[1])
    a = tensor(rng, (100,), "float32").to(tdt)
    b = k(a, 1.5)
    assert b.dtype == tdt
    expect = (a.float() * 1.5).to(tdt)
    assert torch.equal(b.float(), expect.float())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_tensors_that_require_grad_are_read_and_written_like_memory(rng, dtype):
    """As on the GPU, a kernel reads and writes a leaf tensor that requires grad (the
    reference's examples pass such inputs) without autograd seeing it."""
    tdt = getattr(torch, dtype)
    k = cpu(_scale(dtype, 100))
    a = tensor(rng, (100,), "float32").to(tdt).requires_grad_(True)
    b = torch.full((100,), float("nan"), dtype=tdt).requires_grad_(True)
    k(a, b, 2.0)
    assert torch.equal(b.detach().float(), (a.detach().float() * 2).to(tdt).float())
    assert b.requires_grad and b.grad_fn is None


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


# Speed targets of the interpreter (a 512^3 GEMM and a 1M-element kernel take well under a
# second on the 2-core development machine) come from its Python cost per block: the work
# inside a block is vectorised over threads and elements with numpy. The tests count the
# Python calls per block, which is the same on every machine at every load; a statement run
# per thread instead of per block would multiply the count by the number of threads.

def test_gemm_512_costs_a_few_thousand_calls_per_block(rng):
    kern = cpu(_gemm(512, 512, 512, 64, 64, 32), out_idx=-1)
    a, b = tensor(rng, (512, 512), "float16"), tensor(rng, (512, 512), "float16")
    kern(a, b)
    c, calls = count_calls(kern, a, b)
    np.testing.assert_allclose(f64(c), f64(a) @ f64(b), rtol=2e-2, atol=0.1)
    per_block = calls.python / (8 * 8)
    # today about 2300: 16 steps of the K loop, each two copies and a gemm
    assert per_block < 3500, f"{per_block:.0f} Python calls per block ({calls})"


def test_elementwise_1m_costs_tens_of_calls_per_block(rng):
    n = 1 << 20
    kern = cpu(_scale("float32", n, 128), out_idx=[1])
    a = tensor(rng, (n,), "float32")
    kern(a, 2.0)
    b, calls = count_calls(kern, a, 2.0)
    assert torch.equal(b, a * 2.0)
    per_block = calls.python / (n // 128)
    assert per_block < 60, f"{per_block:.0f} Python calls per block ({calls})"  # today 38


def test_auto_target_runs_cpu_tensors(rng):
    if torch.cuda.is_available():
        pytest.skip("auto picks the GPU here")
    kern = tilelang.compile(_scale("float32"), out_idx=[1])
    a = tensor(rng, (64,), "float32")
    assert torch.equal(kern(a, 3.0), a * 3.0)
