"""Minimal reproducers of the compiler defects the reliability work found. An open defect is
an `xfail(strict=True)` while open: it fails, and the day the defect is fixed it passes, so pytest
reports XPASS(strict) as a failure and the marker must be removed (the test then guards the
fix). Tests without the marker are defects already fixed. tilelang/testing/fuzz/known.py
recognises the open ones in generated programs.

All of these are valid TileLang programs (SEMANTICS.md / the reference's own examples)."""

import re

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError

SM80 = "cuda -arch=sm_80"
SM90 = "cuda -arch=sm_90a"


def _lowers(func, target=SM80) -> str:
    return tilelang.lower(func, target=target)


# ---- layout inference: lower-rank fragments ------------------------------------------------

def _softmax_like(fill_first: bool):
    @T.prim_func
    def f(X: T.Tensor((64, 64), "float32"), Z: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_fragment((64, 64), "float32")
            m = T.alloc_fragment((64,), "float32")
            if fill_first:
                T.fill(m, -T.infinity("float32"))
            T.copy(X[0, 0], S)
            T.reduce_max(S, m, dim=1, clear=not fill_first)
            for i, j in T.Parallel(64, 64):
                Z[i, j] = S[i, j] - m[i]
    return f


def test_softmax_like_row_broadcast_lowers():
    """Control: without the preceding T.fill the same program lowers."""
    assert "__global__" in _lowers(_softmax_like(fill_first=False))


def test_fill_then_reduce_then_row_broadcast():
    """The online-softmax pattern: fill the running max, reduce with clear=False, broadcast."""
    _lowers(_softmax_like(fill_first=True))


def test_copied_row_vector_broadcast():
    @T.prim_func
    def f(X: T.Tensor((64, 64), "float32"), r: T.Tensor((64,), "float32"),
          Z: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((64, 64), "float32")
            R = T.alloc_fragment((64,), "float32")
            T.copy(X[0, 0], F)
            T.copy(r[0], R)
            for i, j in T.Parallel(64, 64):
                F[i, j] = F[i, j] * R[i]
            T.copy(F, Z[0, 0])
    _lowers(f)


def test_reduce_into_temporary_then_combine():
    @T.prim_func
    def f(X: T.Tensor((64, 128), "float32"), O: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_fragment((64, 64), "float32")
            acc = T.alloc_fragment((64,), "float32")
            tmp = T.alloc_fragment((64,), "float32")
            T.fill(acc, 0)
            for kt in T.serial(2):
                T.copy(X[0, kt * 64], S)
                T.reduce_sum(S, tmp, dim=1)
                for i in T.Parallel(64):
                    acc[i] = acc[i] + tmp[i]
            T.copy(acc, O[0])
    _lowers(f)


def _unit_tile(rows, cols):
    @T.prim_func
    def f(X: T.Tensor((64, 64), "float32"), Z: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            F = T.alloc_fragment((rows, cols), "float32")
            T.copy(X[0, 0], F)
            for i, j in T.Parallel(rows, cols):
                F[i, j] = F[i, j] * 2.0
            T.copy(F, Z[0, 0])
    return f


def test_unit_width_tile():
    """(64, 1) fragment with T.Parallel(64, 1): was rejected ('read across threads'), fixed."""
    assert "__global__" in _lowers(_unit_tile(64, 1))


def test_unit_height_tile():
    _lowers(_unit_tile(1, 64))


# ---- pipelining ---------------------------------------------------------------------------

def test_reduce_of_a_pipelined_shared_tile():
    """Either it compiles, or the rejection names the user's line; never an internal error."""
    @T.prim_func
    def f(X: T.Tensor((64, 128), "float32"), O: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 64), "float32")
            acc = T.alloc_fragment((64,), "float32")
            T.fill(acc, 0)
            for kt in T.Pipelined(2, num_stages=2):
                T.copy(X[0, kt * 64], S)
                T.reduce_sum(S, acc, dim=1, clear=False)
            T.copy(acc, O[0])
    try:
        _lowers(f)
    except KernelError as e:
        assert e.loc is not None
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"internal error instead of a located one: {e!r}") from e


# ---- atomics --------------------------------------------------------------------------------

def test_tile_atomic_add_with_a_start_point_destination():
    @T.prim_func
    def f(X: T.Tensor((2, 16, 32), "float32"), C: T.Tensor((16, 32), "float32")):
        with T.Kernel(1, 1, 2, threads=128) as (bx, by, bz):
            S = T.alloc_shared((16, 32), "float32")
            T.copy(X[bz, 0, 0], S)
            T.atomic_add(C[by * 16, bx * 32], S)
    k = tilelang.compile(f, target="cpu")
    x = torch.arange(2 * 16 * 32, dtype=torch.float32).reshape(2, 16, 32)
    c = torch.ones(16, 32)
    k(x, c)
    torch.testing.assert_close(c, 1 + x.sum(0))


# ---- fp8 on sm_80 --------------------------------------------------------------------------

def _fp8_gemm():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float8_e4m3"), B: T.Tensor((64, 64), "float8_e4m3"),
          C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float8_e4m3")
            B_s = T.alloc_shared((64, 64), "float8_e4m3")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0, 0], A_s)
            T.copy(B[0, 0], B_s)
            T.clear(C_l)
            T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[0, 0])
    return f


def test_fp8_gemm_on_sm80_is_rejected_before_nvrtc():
    """fp8 mma needs sm_89+: for sm_80 the compiler used to emit gemm_ss<fp8> and NVRTC failed
    inside gemm_sm80.cuh; now a located error must say so (or the code must compile)."""
    from tilelang.runtime import compile_cuda, toolkit

    try:
        src = _lowers(_fp8_gemm(), SM80)
    except KernelError as e:
        assert e.loc is not None and "sm_8" in str(e)
        return
    if toolkit.nvrtc_backend() is not None or toolkit.nvcc_path() is not None:
        compile_cuda(src, "sm_80")


def test_fp8_gemm_compiles_for_sm90a():
    """Control: the same program is fine where the instruction exists."""
    assert "gemm_ss" in _lowers(_fp8_gemm(), SM90)


# ---- 64-bit indexing -------------------------------------------------------------------------

def _index_exprs(source: str, name: str) -> list:
    """The bracketed index expressions of every `name[...]` in `source`."""
    out = []
    for m in re.finditer(rf"\b{name}\[", source):
        depth, i = 1, m.end()
        while depth:
            depth += {"[": 1, "]": -1}.get(source[i], 0)
            i += 1
        out.append(source[m.end():i - 1])
    return out


def _wide(expr: str) -> bool:
    return bool(re.search(r"long long|int64_t|\(int64\)|size_t", expr))


BIG_ROWS = 2 ** 28 + 4  # x 8 columns = 2^31 + 32 elements


def _big_static(dtype="float32"):
    @T.prim_func
    def f(A: T.Tensor((BIG_ROWS, 8), dtype), C: T.Tensor((BIG_ROWS, 8), dtype)):
        with T.Kernel(T.ceildiv(BIG_ROWS, 4), threads=32) as bx:
            for i, j in T.Parallel(4, 8):
                C[bx * 4 + i, j] = A[bx * 4 + i, j] + 1
    return f


def test_static_tensor_beyond_int32_elements_uses_64bit_offsets():
    """SEMANTICS §10: 2^31 + 32 elements need 64-bit offsets (they were 32-bit `int`, fixed)."""
    src = _lowers(_big_static())
    exprs = _index_exprs(src, "A") + _index_exprs(src, "C")
    assert exprs and all(_wide(e) for e in exprs), exprs


def test_int64_dynamic_size_uses_64bit_offsets():
    """With T.dynamic('n', 'int64') the offsets were computed in 32-bit int (fixed)."""
    n = T.dynamic("n", "int64")

    @T.prim_func
    def f(A: T.Tensor((n, 8), "float32"), C: T.Tensor((n, 8), "float32")):
        with T.Kernel(T.ceildiv(n, 4), threads=32) as bx:
            for i, j in T.Parallel(4, 8):
                C[bx * 4 + i, j] = A[bx * 4 + i, j] + 1.0
    src = _lowers(f)
    exprs = _index_exprs(src, "A") + _index_exprs(src, "C")
    assert exprs and all(_wide(e) for e in exprs), exprs


@pytest.mark.gpu
def test_gpu_tensor_beyond_int32_elements():
    """2^31 + 32 int8 elements (2 GiB per tensor): the last rows must be computed."""
    k = tilelang.compile(_big_static("int8"), out_idx=-1, target="cuda")
    a = torch.zeros(BIG_ROWS, 8, dtype=torch.int8, device="cuda")
    a[-4:] = 5
    c = k(a)
    torch.cuda.synchronize()
    assert int(c[-1, -1]) == 6 and int(c[0, 0]) == 1
    del a, c
    torch.cuda.empty_cache()


_ = np
