"""A fragment or local buffer read before anything writes it draws an UninitializedReadWarning
at the user's line when the kernel is compiled, for the CPU interpreter and for CUDA alike;
correct kernels (cleared accumulators, the online softmax's running max) draw none."""

from __future__ import annotations

import inspect
import shutil
import warnings

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.jit.target import gpu_available
from tilelang.transform.uninitialized_reads import (UninitializedReadWarning,
                                                    warn_uninitialized_reads)
from transform_helpers import marked_line


def gemm_not_cleared(clear=False, clear_accum=False):
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"),
             C: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            if clear:  # a Python bool: decided while tracing
                T.clear(C_l)
            for k in T.Pipelined(2, num_stages=2):
                T.copy(A[0, k * 32], A_s)
                T.copy(B[k * 32, 0], B_s)
                T.gemm(A_s, B_s, C_l, clear_accum=clear_accum and k == 0)  # <-
            T.copy(C_l, C[0, 0])
    return main


def _one_warning(record, fn):
    found = [w for w in record if issubclass(w.category, UninitializedReadWarning)]
    assert len(found) == 1, [str(w.message) for w in record]
    w = found[0]
    assert w.filename == __file__ and w.lineno == marked_line(fn), (w.filename, w.lineno)
    return str(w.message)


@pytest.mark.parametrize("target", ["cpu", "lower sm_90a"])
def test_gemm_into_an_accumulator_never_cleared(target):
    func = gemm_not_cleared()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        if target == "cpu":
            kernel = tilelang.compile(func, out_idx=[2], target="cpu")
            c = kernel(torch.randn(64, 64).half(), torch.randn(64, 64).half())
            assert torch.isnan(c).all()  # what the warning is about
        else:
            source = tilelang.lower(func, target=f"cuda -arch={target.split()[1]}")
            assert "__global__" in source  # a warning, not an error
    text = _one_warning(record, gemm_not_cleared)
    assert "T.gemm adds to `C_l`" in text and "T.clear(C_l)" in text
    assert "clear_accum=True" in text


@pytest.mark.skipif(shutil.which("nvcc") is None and not gpu_available(),
                    reason="compiling for a GPU needs NVRTC or nvcc")
def test_gemm_never_cleared_warns_when_compiled_for_the_gpu():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        tilelang.compile(gemm_not_cleared(), out_idx=[2], target="cuda -arch=sm_80")
    assert "T.gemm adds to `C_l`" in _one_warning(record, gemm_not_cleared)


@pytest.mark.parametrize("kwargs", [dict(clear=True), dict(clear_accum=True)])
def test_cleared_accumulators_do_not_warn(kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UninitializedReadWarning)
        tilelang.compile(gemm_not_cleared(**kwargs), out_idx=[2], target="cpu")
        tilelang.lower(gemm_not_cleared(**kwargs), target="cuda -arch=sm_90a")


def online_softmax_rows():
    """The FlashAttention pattern: a running max filled before the loop and combined with
    clear=False, a rescale read after it is written, a masked score tile written first."""
    @T.prim_func
    def main(S: T.Tensor((4, 32, 16), "float32"), O: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            acc = T.alloc_fragment((32, 16), "float32")
            m = T.alloc_fragment((32,), "float32")
            m_prev = T.alloc_fragment((32,), "float32")
            scale = T.alloc_fragment((32,), "float32")
            l = T.alloc_fragment((32,), "float32")
            T.fill(m, -T.infinity("float32"))
            T.fill(l, 0)
            for k in T.serial(4):
                for i, j in T.Parallel(32, 16):
                    acc[i, j] = S[k, i, j]
                T.copy(m, m_prev)
                T.reduce_max(acc, m, dim=1, clear=False)
                for i in T.Parallel(32):
                    scale[i] = T.exp(m_prev[i] - m[i])
                    l[i] = l[i] * scale[i] + 1.0
            T.copy(l, O[0])
    return main


def test_online_softmax_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", UninitializedReadWarning)
        tilelang.compile(online_softmax_rows(), target="cpu")
    assert warn_uninitialized_reads(online_softmax_rows()) == []


def reads_before_writes():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            f = T.alloc_fragment((32,), "float32")
            m = T.alloc_fragment((1,), "float32")
            loc = T.alloc_local((1,), "float32")
            for i in T.Parallel(32):
                f[i] = f[i] + A[i]  # <- f
            T.reduce_max(f, m, dim=0, clear=False)  # <- m
            loc[0] = loc[0] + 1.0  # <- loc
            if bx > 0:
                B[0] = m[0]
            for i in T.Parallel(32):
                B[i] = f[i] + loc[0]
    return main


def test_each_buffer_is_reported_once_at_its_first_read():
    func = reads_before_writes()
    lines, first = inspect.getsourcelines(reads_before_writes)
    marked = {line.split("# <- ")[1].strip(): first + n for n, line in enumerate(lines)
              if "# <- " in line}
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        findings = warn_uninitialized_reads(func)
    got = {b.name: loc.lineno for b, _, loc in findings}
    assert got == marked
    texts = [str(w.message) for w in record]
    assert any("`f[...]` is read" in t and "fragment `f`" in t for t in texts)
    assert any("T.reduce_max(clear=False) combines with `m`" in t for t in texts)
    assert any("local buffer `loc`" in t for t in texts)


def test_a_read_under_a_condition_is_not_reported():
    @T.prim_func
    def main(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            f = T.alloc_fragment((32,), "float32")
            if bx > 0:
                for i in T.Parallel(32):
                    A[i] = f[i]
            for i in T.Parallel(32):
                f[i] = A[i]
    assert warn_uninitialized_reads(main) == []


def test_an_address_handed_to_an_extern_call_counts_as_a_write():
    """The dequantising GEMMs decode into a local buffer through `T.address_of` and an
    injected CUDA function: nothing the analysis can see, so no report."""
    @T.prim_func
    def main(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            L = T.alloc_local((4,), "float32")
            T.call_extern("handle", "decode", T.address_of(L[0]), 4)
            A[bx] = L[0]
    assert warn_uninitialized_reads(main) == []


def test_one_warning_per_place_across_compiles():
    """A factory compiled for several arguments warns once for the same line (the default
    action of Python's warning filters, per location)."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("default")
        for _ in range(3):
            tilelang.compile(gemm_not_cleared(), out_idx=[2], target="cpu")
    assert len([w for w in record if w.category is UninitializedReadWarning]) == 1


def test_ldmatrix_writes_its_destination():
    """`T.ptx_ldmatrix` fills the per-thread array it points at (the intrinsics GEMM's
    A_local / B_local, read next by T.ptx_mma): no warning; reading it before is one."""
    def kernel(read_first):
        @T.prim_func
        def f(A: T.Tensor((16, 16), "float16"), B: T.Tensor((128, 8), "float16")):
            with T.Kernel(1, threads=32) as _:
                S = T.alloc_shared((16, 16), "float16")
                L = T.alloc_local((8,), "float16")
                T.copy(A, S)
                tx = T.get_thread_binding()
                if read_first:
                    B[tx, 0] = L[0]
                T.ptx_ldmatrix(False, 4, T.access_ptr(S[tx % 16, tx // 16 * 8], "r"),
                               T.access_ptr(L[0], "w"))
                for v in T.serial(8):
                    B[tx, v] = L[v]
        return f

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        warn_uninitialized_reads(kernel(False))
    assert not [w for w in record if issubclass(w.category, UninitializedReadWarning)]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        warn_uninitialized_reads(kernel(True))
    assert [w for w in record if issubclass(w.category, UninitializedReadWarning)]
