"""Resources stay flat: compiling many distinct kernels does not grow host memory beyond the
bounded caches, dropped kernels are collected (and on a GPU their modules unloaded), repeated
calls do not grow memory. The full-scale measurement (500 kernels, 10^6 calls, GPU memory) is
scripts/device_reliability.py; these are the CPU-side versions that run in CI."""

import gc
import os
import tracemalloc
import weakref

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.arith import atoms
from tilelang.runtime import toolkit

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")


def _kernel(i: int):
    """Distinct source for every i (the constant is part of the generated code)."""
    @T.prim_func
    def scale(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, threads=128) as bx:
            S = T.alloc_shared((32, 64), "float32")
            T.copy(A[bx * 32, 0], S)
            for r, c in T.Parallel(32, 64):
                S[r, c] = S[r, c] * float(i) + 1.0
            T.copy(S, B[bx * 32, 0])
    return scale


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def _traced_growth(fn, n_first, n_second):
    """Bytes of Python memory retained after n_first, and after n_first + n_second calls."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.take_snapshot()
        for i in range(n_first):
            fn(i)
        gc.collect()
        mid = tracemalloc.take_snapshot()
        for i in range(n_first, n_first + n_second):
            fn(i)
        gc.collect()
        end = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()

    def grown(a, b):
        return sum(s.size_diff for s in b.compare_to(a, "filename"))
    return grown(base, mid), grown(mid, end)


@pytest.mark.slow
def test_lowering_many_distinct_kernels_keeps_memory_bounded(monkeypatch):
    """The arithmetic interning tables are the only per-kernel growth, and they are cleared at
    their limit: with a small limit the retained memory stops growing."""
    monkeypatch.setattr(atoms, "_LIMIT", 1000)
    for i in range(10):  # warm up imports and per-process tables
        tilelang.lower(_kernel(10_000 + i), target="cuda -arch=sm_90a")
    first, second = _traced_growth(
        lambda i: tilelang.lower(_kernel(i), target="cuda -arch=sm_90a"), 50, 50)
    assert first < 1.5 * 2 ** 20, f"{first / 1024:.0f} KiB retained by 50 compiles"
    assert second < 0.25 * 2 ** 20, \
        f"still growing: {second / 1024:.0f} KiB retained by 50 more compiles"


def test_cpu_compile_and_run_many_kernels_keeps_memory_flat():
    x = torch.randn(64, 64)

    def one(i):
        k = tilelang.compile(_kernel(i), out_idx=-1, target="cpu")
        assert k(x)[0, 0].item() == pytest.approx(x[0, 0].item() * i + 1.0, rel=1e-5)
    for i in range(10):
        one(20_000 + i)
    first, second = _traced_growth(one, 40, 40)
    assert max(first, second) < 0.5 * 2 ** 20, (first, second)


@pytest.mark.slow
@requires_compiler
def test_full_cuda_compile_keeps_rss_flat(monkeypatch):
    """tilelang.compile through NVRTC (cache off: every compile runs the compiler) must not leak
    native memory (an nvrtcProgram or a cubin buffer per compile would show here)."""
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    monkeypatch.setattr(atoms, "_LIMIT", 1000)
    for i in range(8):
        tilelang.compile(_kernel(30_000 + i), target="cuda -arch=sm_80")
    gc.collect()
    before = _rss_mb()
    for i in range(40):
        tilelang.compile(_kernel(i), target="cuda -arch=sm_80")
    gc.collect()
    grown = _rss_mb() - before
    assert grown < 12, f"RSS grew {grown:.1f} MiB over 40 compiles"


@requires_compiler
def test_dropped_kernels_are_collected_and_would_unload_their_modules():
    k = tilelang.compile(_kernel(5), target="cuda -arch=sm_80")
    fns = list(k.adapter.functions)
    ref = weakref.ref(k)
    finalizers = [fn._finalizer for fn in fns]
    assert fns and all(f.alive for f in finalizers)
    del k, fns
    gc.collect()
    assert ref() is None, "something keeps a dropped kernel alive"
    assert not any(f.alive for f in finalizers), "module unload finalizers did not run"


def test_dropped_cpu_kernels_are_collected():
    refs = []
    for i in range(5):
        k = tilelang.compile(_kernel(i), out_idx=-1, target="cpu")
        k(torch.zeros(64, 64))
        refs.append(weakref.ref(k))
        del k
    gc.collect()
    assert all(r() is None for r in refs)


def test_many_calls_of_one_kernel_keep_memory_flat():
    n = T.dynamic("n")

    @T.prim_func
    def inc(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                B[bx * 64 + i] = A[bx * 64 + i] + 1.0
    k = tilelang.compile(inc, out_idx=-1, target="cpu")
    x = torch.zeros(100)

    def call(i):
        out = k(x)
        assert out[99].item() == 1.0
    for i in range(50):
        call(i)
    first, second = _traced_growth(call, 500, 500)
    assert max(first, second) < 64 * 1024, (first, second)


# ---- GPU ---------------------------------------------------------------------------------
# Free device memory is device-wide: run these with the GPU to this process alone
# (scripts/device_session.sh runs them after the fuzzer, not beside it).

@pytest.mark.gpu
def test_gpu_memory_flat_over_compile_call_drop_cycles():
    x = torch.randn(64, 64, device="cuda")
    for i in range(5):
        tilelang.compile(_kernel(40_000 + i), out_idx=-1, target="cuda")(x)
    torch.cuda.synchronize()
    gc.collect()
    free0, _ = torch.cuda.mem_get_info()
    alloc0 = torch.cuda.memory_allocated()
    finalizers = []
    for i in range(60):
        k = tilelang.compile(_kernel(i), out_idx=-1, target="cuda")
        out = k(x)
        finalizers += [fn._finalizer for fn in k.adapter.functions]
        del k, out
    torch.cuda.synchronize()
    gc.collect()
    assert not any(f.alive for f in finalizers), "modules of dropped kernels were not unloaded"
    free1, _ = torch.cuda.mem_get_info()
    assert torch.cuda.memory_allocated() == alloc0
    assert free0 - free1 < 16 * 2 ** 20, f"device memory shrank by {(free0 - free1) >> 20} MiB"


@pytest.mark.gpu
def test_gpu_many_calls_keep_memory_flat():
    k = tilelang.compile(_kernel(3), out_idx=-1, target="cuda")
    x = torch.randn(64, 64, device="cuda")
    for _ in range(100):
        k(x)
    torch.cuda.synchronize()
    gc.collect()
    free0, _ = torch.cuda.mem_get_info()
    rss0 = _rss_mb()
    for _ in range(20_000):
        k(x)
    torch.cuda.synchronize()
    gc.collect()
    free1, _ = torch.cuda.mem_get_info()
    assert free0 - free1 < 8 * 2 ** 20
    assert _rss_mb() - rss0 < 8
