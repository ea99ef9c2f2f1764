"""The program cache (engine/program_cache.py): a program compiled before is loaded, not lowered
again, and only when the key says it is the same program (tests/reliability/test_cache_e2e.py
covers a second process); the rewritten kernel functions kept on disk (frontend/rewrite.py)."""

from __future__ import annotations

import hashlib

import pytest

import tilelang
import tilelang.language as T
from tilelang.engine import program_cache
from tilelang.ir.visitor import collect
from tilelang.jit.target import parse_target
from tilelang.runtime import toolkit

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")

TARGET = "cuda -arch=sm_80"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    d = tmp_path / "tl-cache"
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(d))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    monkeypatch.delenv("TILELANG_DUMP_IR", raising=False)
    return d


def scale(factor=2.0, block=128):
    n = T.dynamic("n")

    @T.prim_func
    def scale(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    Y[bx * block + i] = X[bx * block + i] * factor
    return scale


def two_sizes(shared: bool):
    """Two tensors whose length is one symbol `n`, or two different symbols both named `n`."""
    n = T.dynamic("n")
    m = n if shared else T.dynamic("n")

    @T.prim_func
    def copy(X: T.Tensor((n,), "float32"), Y: T.Tensor((m,), "float32")):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < n:
                    Y[bx * 128 + i] = X[bx * 128 + i]
    return copy


def key(func, **options):
    return program_cache.program_key(func, parse_target(TARGET),
                                     {"pass_configs": {}, **options})


def test_key_is_the_same_for_two_traces_and_follows_the_program():
    assert key(scale()) == key(scale()) is not None
    assert key(scale(3.0)) != key(scale())
    assert key(scale(block=256)) != key(scale())
    assert key(scale(), compile_flags=("-lineinfo",)) != key(scale())
    assert key(scale(), pass_configs={"tl.disable_tma_lower": True}) != key(scale())
    assert program_cache.program_key(scale(), parse_target("cuda -arch=sm_90a"),
                                     {"pass_configs": {}}) != key(scale())


def test_every_trace_of_a_program_has_its_key():
    """The interpreter specialises a function's code as it runs it again (Python 3.12 then
    reports another instruction offset for a call): nothing of that may reach the key."""
    keys = {key(scale()) for _ in range(8)}
    assert len(keys) == 1 and None not in keys


def test_key_tells_one_symbol_from_two_of_the_same_name():
    assert key(two_sizes(True)) == key(two_sizes(True))
    assert key(two_sizes(True)) != key(two_sizes(False))


def test_a_program_holding_user_code_is_not_keyed():
    f = scale()
    f.attrs["callback"] = lambda: 0  # its body could change without the key seeing it
    assert key(f) is None


def _entries(d, suffix):
    return sorted(d.glob(f"*/*.{suffix}"))


@requires_compiler
def test_second_compile_loads_the_program(private_cache):
    first = tilelang.compile(scale(), target=TARGET)
    assert not first.adapter.program_cache_hit
    assert len(_entries(private_cache, "prog")) == 1
    f = scale()
    again = tilelang.compile(f, target=TARGET)
    a = again.adapter
    assert a.program_cache_hit and a.lower_seconds == 0.0
    assert a.source == first.adapter.source
    assert a.compiled.cubin == first.adapter.compiled.cubin
    # the launch description is rebuilt against this trace's own objects
    (n,) = a.module.symbols
    assert n is f.params[0].shape[0]
    gx = a.module.kernels[0].grid[0]
    from tilelang.jit.args import eval_shape_expr

    assert eval_shape_expr(gx, {n: 1000}) == 8


@requires_compiler
def test_damaged_entry_is_compiled_again_and_replaced(private_cache):
    tilelang.compile(scale(), target=TARGET)
    (entry,) = _entries(private_cache, "prog")
    data = bytearray(entry.read_bytes())
    data[-5] ^= 0xFF
    entry.write_bytes(bytes(data))
    again = tilelang.compile(scale(), target=TARGET)
    assert not again.adapter.program_cache_hit
    third = tilelang.compile(scale(), target=TARGET)
    assert third.adapter.program_cache_hit


@requires_compiler
def test_a_changed_compiler_file_misses(private_cache, tmp_path, monkeypatch):
    stand_in = tmp_path / "libnvrtc.so.stand-in"
    stand_in.write_bytes(b"v1")
    monkeypatch.setattr(toolkit, "compiler_files", lambda which, backend: [str(stand_in)])
    tilelang.compile(scale(), target=TARGET)
    assert tilelang.compile(scale(), target=TARGET).adapter.program_cache_hit
    stand_in.write_bytes(b"version 2")  # an upgraded compiler
    assert not tilelang.compile(scale(), target=TARGET).adapter.program_cache_hit


@requires_compiler
def test_verbose_and_dump_compiles_always_lower(private_cache, monkeypatch, capsys):
    tilelang.compile(scale(), target=TARGET)
    verbose = tilelang.compile(scale(), target=TARGET, verbose=True)
    assert not verbose.adapter.program_cache_hit
    assert "lowered in" in capsys.readouterr().out
    monkeypatch.setenv("TILELANG_DUMP_IR", "1")
    assert not tilelang.compile(scale(), target=TARGET).adapter.program_cache_hit
    assert "after simplify" in capsys.readouterr().err


@requires_compiler
def test_no_program_entry_without_the_cache(private_cache, monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    tilelang.compile(scale(), target=TARGET)
    assert not private_cache.exists() or not _entries(private_cache, "prog")


def test_rewritten_kernel_function_is_read_back_from_disk(private_cache, monkeypatch):
    from tilelang.frontend import rewrite

    monkeypatch.setattr(rewrite, "_CACHE", {})  # as in a new process
    first = scale()
    assert _entries(private_cache, "code")
    monkeypatch.setattr(rewrite, "_CACHE", {})  # and again

    def no_source(func):
        raise AssertionError("the source was read again")

    monkeypatch.setattr(rewrite, "_rewrite_source", no_source)
    again = scale()  # the `if` on a kernel value still works: the rewrite came from disk
    h1, h2 = hashlib.sha256(), hashlib.sha256()
    program_cache.fingerprint(first, h1)
    program_cache.fingerprint(again, h2)
    assert h1.digest() == h2.digest()


def test_key_sees_the_values_a_layout_function_closes_over():
    """Two layouts that differ only in what their index function captured (tilelang's own
    swizzle function, 64- vs 128-byte pattern): the key tells them apart, which the
    function's name and code alone would not."""
    from tilelang.layout.layout import Layout
    from tilelang.layout.swizzle import swizzled

    def program(fn):
        f = scale()
        f.attrs["layout"] = Layout((64, 64), fn)
        return f

    fn64, fn128 = swizzled((64, 64), 16, 64)._fn, swizzled((64, 64), 16, 128)._fn
    assert fn64.__code__ is fn128.__code__
    assert key(program(fn64)) == key(program(swizzled((64, 64), 16, 64)._fn)) is not None
    assert key(program(fn64)) != key(program(fn128))
    # a function defined here (user code) is not keyable at all
    assert key(program(lambda i, j: i * 64 + j)) is None


def tma_gemm(M=256, N=256, K=256):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=2):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 128, bx * 128])
    return gemm


@requires_compiler
def test_loaded_program_launches_like_the_compiled_one(private_cache):
    """What the host side uses from a wgmma + TMA kernel loaded from the cache (TMA
    descriptors over this trace's parameters, the argument types, the launch description)
    equals what compiling it gave."""
    first = tilelang.compile(tma_gemm(), target="cuda -arch=sm_90a").adapter
    again = tilelang.compile(tma_gemm(), target="cuda -arch=sm_90a").adapter
    assert again.program_cache_hit and first.module.tma, "expected TMA descriptors"
    assert again.tma_sources == first.tma_sources
    assert again.param_types == first.param_types
    assert again.host_source == first.host_source
    for a, b in zip(again.module.tma, first.module.tma):
        assert (a.name, a.box, a.swizzle, a.im2col) == (b.name, b.box, b.swizzle, b.im2col)
    assert [(k.name, k.grid, k.block, k.smem_bytes) for k in again.module.kernels] == \
        [(k.name, k.grid, k.block, k.smem_bytes) for k in first.module.kernels]


@requires_compiler
def test_a_grid_sized_at_the_launch_survives_the_cache(private_cache, monkeypatch):
    """A persistent attention grid (transform/persistent_grid.py) names the launching GPU's SM
    count; compiling it asks nothing of the CUDA driver (every machine compiles the same code)
    and the entry brings back the very object the launchers resolve."""
    import sys
    from pathlib import Path

    from tilelang.ir import nodes as ir
    from tilelang.runtime import driver

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
    from test_persistent_grid import flash

    def no_driver():
        raise AssertionError("the compile asked the CUDA driver")

    monkeypatch.setattr(driver, "lib", no_driver)
    first = tilelang.compile(flash(2, 40, 1000), target="cuda -arch=sm_90a")
    again = tilelang.compile(flash(2, 40, 1000), target="cuda -arch=sm_90a")
    assert again.adapter.program_cache_hit and not first.adapter.program_cache_hit
    for kernel in (first, again):
        (launch,) = kernel.adapter.module.kernels
        assert launch.sized_at_launch and kernel.adapter.sized_at_launch
        assert any(n is ir.DEVICE_SM_COUNT for n in collect(launch.grid[0], lambda n: True))
        assert "gridDim.x" in kernel.get_kernel_source()
    assert not tilelang.compile(scale(), target=TARGET).adapter.sized_at_launch
