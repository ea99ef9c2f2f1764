"""Reference TileLang names added for compatibility: launch extents, branch hints, bit counting,
fast-math intrinsics, warp all-reductions, register hints, pointer tensors, logical reductions
over buffers, `tilelang.set_log_level` / `tilelang.logger` and `tilelang.utils`.

Each kernel runs on the CPU interpreter against numpy/torch (and on the GPU where there is one);
CUDA-only behaviour is checked on the generated source (sm_90a), compiled when a CUDA compiler
is installed."""

import logging

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError
from tilelang.runtime import compile_cuda, toolkit
from device_params import DEVICES

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")


SM90 = "cuda -arch=sm_90a"


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy % 2**32
    print(f"random seed: {seed}")
    return np.random.default_rng(seed)


def _run(func, device, *args):
    kernel = tilelang.compile(func, target="cpu" if device == "cpu" else "cuda")
    moved = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]
    kernel(*moved)
    return [m.cpu() if isinstance(m, torch.Tensor) else m for m in moved]


def _lower_and_compile(func) -> str:
    src = tilelang.lower(func, target=SM90)
    if toolkit.nvrtc_backend() is not None or toolkit.nvcc_path() is not None:
        compile_cuda(src, "sm_90a")
    return src


# ---- launch extents ---------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_block_and_thread_extents(device):
    @T.prim_func
    def k(N: T.int32, O: T.Tensor((2, 3), "int32")):
        with T.Kernel(T.ceildiv(N, 16), 3, threads=(32, 2)) as (bx, by):
            tx = T.get_thread_binding()
            ty = T.get_thread_binding(1)
            blocks = T.get_block_extents()
            threads = T.get_thread_extents()
            assert len(blocks) == 3 and len(threads) == 3
            assert threads == [32, 2, 1] and blocks[1:] == [3, 1]
            if bx == 0 and by == 0 and tx == 0 and ty == 0:
                O[1, 0] = threads[0]
                O[1, 1] = threads[1]
                O[1, 2] = threads[2]
                O[0, 0] = blocks[0]
                O[0, 1] = blocks[1]
                O[0, 2] = blocks[2]

    o = torch.full((2, 3), -1, dtype=torch.int32)
    (_, o) = _run(k, device, 70, o)
    assert o.tolist() == [[5, 3, 1], [32, 2, 1]]


def test_extents_need_a_kernel():
    with pytest.raises(Exception):
        T.get_block_extents()


# ---- T.likely ----------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_likely_is_the_condition(device, rng):
    @T.prim_func
    def k(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            i = bx * 128 + T.get_thread_binding()
            if T.likely(A[i] > 0):
                B[i] = A[i]
            else:
                B[i] = -2 * A[i]

    assert T.likely(True) is True
    a = torch.from_numpy(rng.standard_normal(256).astype(np.float32))
    (_, b) = _run(k, device, a, torch.zeros(256))
    torch.testing.assert_close(b, torch.where(a > 0, a, -2 * a))


# ---- T.popcount / T.clz ------------------------------------------------------------------------

def _int_samples(rng, dtype, n):
    info = np.iinfo(dtype)
    vals = rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dtype)
    special = np.array([0, 1, info.max, info.min, -1 if info.min < 0 else info.max // 2],
                       dtype=dtype)
    vals[:len(special)] = special
    return vals


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "uint32", "int64",
                                   "uint64"])
def test_popcount_and_clz(device, dtype, rng):
    n = 128

    @T.prim_func
    def k(A: T.Tensor((n,), dtype), P: T.Tensor((n,), dtype), C: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            P[tx] = T.popcount(A[tx])
            C[tx] = T.clz(A[tx])

    vals = _int_samples(rng, np.dtype(dtype), n)
    a = torch.from_numpy(vals)
    (_, p, c) = _run(k, device, a, torch.zeros_like(a), torch.zeros(n, dtype=torch.int32))
    bits = np.dtype(dtype).itemsize * 8
    unsigned = [int(v) & ((1 << bits) - 1) for v in vals]
    assert [int(x) for x in p.numpy()] == [bin(u).count("1") for u in unsigned]
    assert [int(x) for x in c.numpy()] == [bits - u.bit_length() for u in unsigned]


def test_popcount_and_clz_fold_constants_and_check_types():
    assert T.popcount(7).value == 3 and T.popcount(-1).value == 32
    assert T.clz(1).value == 31 and T.clz(0).value == 32
    with pytest.raises(Exception, match="integer"):
        T.popcount(1.5)


@requires_compiler
def test_bit_counting_lowers_to_cuda_intrinsics():
    @T.prim_func
    def k(A: T.Tensor((32,), "int32"), B: T.Tensor((32,), "uint64"),
          C: T.Tensor((32,), "int8"), O: T.Tensor((6, 32), "int32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            O[0, tx] = T.popcount(A[tx])
            O[1, tx] = T.clz(A[tx])
            O[2, tx] = T.cast(T.popcount(B[tx]), "int32")
            O[3, tx] = T.clz(B[tx])
            O[4, tx] = T.cast(T.popcount(C[tx]), "int32")
            O[5, tx] = T.clz(C[tx])

    src = _lower_and_compile(k)
    assert "__popc((unsigned int)(A[tx]))" in src
    assert "__clz((int)(unsigned int)(A[tx]))" in src
    assert "__popcll((unsigned long long)(B[tx]))" in src
    assert "__clzll((long long)(unsigned long long)(B[tx]))" in src
    assert "__popc((unsigned int)(unsigned char)(C[tx]))" in src
    assert "(__clz((int)(unsigned int)(unsigned char)(C[tx])) - 24)" in src


# ---- fast-math intrinsics ----------------------------------------------------------------------

FAST = [("__exp", np.exp, "__expf"), ("__exp10", lambda x: np.power(10.0, x), "__exp10f"),
        ("__log", np.log, "__logf"), ("__log2", np.log2, "__log2f"),
        ("__log10", np.log10, "__log10f"), ("__sin", np.sin, "__sinf"),
        ("__cos", np.cos, "__cosf"), ("__tan", np.tan, "__tanf")]


def _fast_kernel(name, dtype, n=256):
    fn = getattr(T, name)

    @T.prim_func
    def k(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = fn(A[bx * 128 + i])
    return k


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,ref,_cuda", FAST)
def test_fast_math_values(device, name, ref, _cuda, rng):
    n = 256
    positive = "log" in name
    x = rng.uniform(0.1, 4.0, n) if positive else rng.uniform(-1.5, 1.5, n)
    a = torch.from_numpy(x.astype(np.float32))
    (_, b) = _run(_fast_kernel(name, "float32"), device, a, torch.zeros(n))
    expect = torch.from_numpy(ref(x.astype(np.float64)).astype(np.float32))
    # the GPU's approximate forms are within a few ulp over these ranges
    torch.testing.assert_close(b, expect, rtol=1e-5 if device == "cpu" else 2e-5,
                               atol=1e-6 if device == "cpu" else 1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_fast_math_keeps_half_precision(device, rng):
    n = 256
    x = rng.uniform(-2, 2, n).astype(np.float16)
    a = torch.from_numpy(x)
    (_, b) = _run(_fast_kernel("__exp", "float16"), device, a, torch.zeros(n, dtype=torch.half))
    assert b.dtype == torch.float16
    torch.testing.assert_close(b, torch.exp(a.float()).half(), rtol=1e-3, atol=1e-3)


@requires_compiler
def test_fast_math_lowers_to_cuda_intrinsics_on_float32_only():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), H: T.Tensor((128,), "float16"),
          B: T.Tensor((9, 128), "float32"), G: T.Tensor((128,), "float16")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            B[0, tx] = T.__exp(A[tx])
            B[1, tx] = T.__exp10(A[tx])
            B[2, tx] = T.__log(A[tx])
            B[3, tx] = T.__log2(A[tx])
            B[4, tx] = T.__log10(A[tx])
            B[5, tx] = T.__sin(A[tx])
            B[6, tx] = T.__cos(A[tx])
            B[7, tx] = T.__tan(A[tx])
            B[8, tx] = T.__exp(T.cast(tx, "float32"))
            G[tx] = T.__log(H[tx])

    src = _lower_and_compile(k)
    for _, _, cuda in FAST:
        assert f"{cuda}(A[tx])" in src, cuda
    assert "__expf(((float)tx))" in src
    assert "tl::log(H[tx])" in src


@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool", "float8_e4m3fn"])
def test_fast_math_rejects_non_float_arguments(dtype):
    # the reference's fast-math intrinsics take floating-point values only
    with pytest.raises(TypeError, match=f"T.__exp only supports floating-point inputs, but got "
                                        f"{dtype}") as info:
        @T.prim_func
        def k(A: T.Tensor((128,), dtype), B: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                tx = T.get_thread_binding()
                B[tx] = T.__exp(A[tx])

    assert "test_reference_api_additions.py" in str(info.value)


# ---- warp all-reductions -----------------------------------------------------------------------

def _warp_kernel(dtype, threads=128):
    @T.prim_func
    def k(A: T.Tensor((threads,), dtype), O: T.Tensor((5, threads), dtype)):
        with T.Kernel(1, threads=threads):
            tx = T.get_thread_binding()
            v = T.alloc_var(dtype)
            v = A[tx]
            O[0, tx] = T.warp_reduce_sum(v)
            O[1, tx] = T.warp_reduce_max(v)
            O[2, tx] = T.warp_reduce_min(v)
            if dtype.startswith("int"):
                O[3, tx] = T.warp_reduce_bitand(v)
                O[4, tx] = T.warp_reduce_bitor(v)
    return k


@pytest.mark.parametrize("device", DEVICES)
def test_warp_reduce_integers(device, rng):
    a = torch.from_numpy(rng.integers(-2**31, 2**31, 128, dtype=np.int64).astype(np.int32))
    (_, o) = _run(_warp_kernel("int32"), device, a, torch.zeros(5, 128, dtype=torch.int32))
    w = a.numpy().astype(np.int64).reshape(4, 32)
    wrap = (w.sum(1) + 2**31) % 2**32 - 2**31
    expect = [wrap, w.max(1), w.min(1), np.bitwise_and.reduce(w, 1), np.bitwise_or.reduce(w, 1)]
    for row, e in zip(o.numpy().astype(np.int64), expect):
        assert np.array_equal(row.reshape(4, 32), np.repeat(e[:, None], 32, 1))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_warp_reduce_floats(device, dtype, rng):
    x = rng.standard_normal(128).astype(np.float32)
    x[37] = np.nan  # max/min ignore a NaN lane, like T.max / T.min
    a = torch.from_numpy(x).to(getattr(torch, dtype))
    (_, o) = _run(_warp_kernel(dtype), device, a, torch.zeros(5, 128, dtype=a.dtype))
    w = a.double().numpy().reshape(4, 32)
    o = o.double().numpy()[:3].reshape(3, 4, 32)
    for r in range(3):
        for warp in range(4):  # every lane holds the warp's result
            assert np.array_equal(o[r, warp], np.full(32, o[r, warp, 0]), equal_nan=True)
    tol = {"float32": 1e-5, "float16": 2e-2, "bfloat16": 1e-1}[dtype]
    sums = np.nansum(w, 1)
    np.testing.assert_allclose(o[0, [0, 2, 3], 0], sums[[0, 2, 3]], rtol=tol, atol=tol)
    assert np.isnan(o[0, 1]).all()  # the NaN lane poisons its warp's sum
    np.testing.assert_array_equal(o[1, :, 0], np.nanmax(w, 1))
    np.testing.assert_array_equal(o[2, :, 0], np.nanmin(w, 1))


def test_warp_reduce_sum_rounds_like_the_butterfly():
    # float32 sum in the xor-butterfly order of the GPU (offsets 16, 8, 4, 2, 1)
    x = np.array([1e8] + [1.0] * 15 + [-1e8] + [1.0] * 15, np.float32)
    (_, o) = _run(_warp_kernel("float32", 32), "cpu", torch.from_numpy(x),
                  torch.zeros(5, 32))
    v = x.copy()
    for off in (16, 8, 4, 2, 1):
        v = (v + v[np.arange(32) ^ off]).astype(np.float32)
    assert np.array_equal(o[0].numpy(), v)


def test_warp_reduce_misuse():
    with pytest.raises(Exception, match="integer"):
        @T.prim_func
        def bad_type(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                A[0] = T.warp_reduce_bitor(A[0])

    @T.prim_func
    def partial_warp(A: T.Tensor((48,), "float32")):
        with T.Kernel(1, threads=48):
            tx = T.get_thread_binding()
            A[tx] = T.warp_reduce_sum(A[tx])

    with pytest.raises(KernelError, match="whole warps"):
        _run(partial_warp, "cpu", torch.zeros(48))

    @T.prim_func
    def in_parallel(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(32):
                A[i] = T.warp_reduce_sum(A[i])

    with pytest.raises(KernelError, match="T.Parallel"):
        _run(in_parallel, "cpu", torch.zeros(32))


@requires_compiler
def test_warp_reduce_lowers_to_the_xor_butterfly():
    @T.prim_func
    def k(A: T.Tensor((64,), "float16"), B: T.Tensor((64,), "int64"),
          C: T.Tensor((64,), "bfloat16"), D: T.Tensor((64,), "int8")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            A[tx] = T.warp_reduce_sum(A[tx])
            B[tx] = T.warp_reduce_bitor(B[tx])
            C[tx] = T.warp_reduce_max(C[tx])
            D[tx] = T.warp_reduce_min(D[tx])

    src = _lower_and_compile(k)
    assert "tl::warp_allreduce<tl::SumOp, 31u>(A[tx])" in src
    assert "tl::warp_allreduce<tl::BitOrOp, 31u>(B[tx])" in src
    assert "tl::warp_allreduce<tl::MaxOp, 31u>(C[tx])" in src
    assert "tl::warp_allreduce<tl::MinOp, 31u>(D[tx])" in src


# ---- register hints ----------------------------------------------------------------------------

def _reg_hint_kernel():
    @T.prim_func
    def k(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            if T.get_warp_group_idx() == 0:
                T.annotate_producer_reg_dealloc()
            else:
                T.annotate_consumer_reg_alloc(232)
            B[tx] = A[tx] + 1
    return k


@requires_compiler
def test_register_hints_lower_to_setmaxnreg():
    src = _lower_and_compile(_reg_hint_kernel())
    assert "tl::setmaxnreg_dec<24>();" in src
    assert "tl::setmaxnreg_inc<232>();" in src


@pytest.mark.parametrize("device", DEVICES)
def test_register_hints_do_not_change_results(device, rng):
    a = torch.from_numpy(rng.standard_normal(256).astype(np.float32))
    (_, b) = _run(_reg_hint_kernel(), device, a, torch.zeros(256))
    torch.testing.assert_close(b, a + 1)


# ---- T.make_tensor, T.any_of, T.all_of ---------------------------------------------------------

def _logical_kernel():
    @T.prim_func
    def k(A: T.ptr, B: T.ptr, N: T.int32):
        A = T.make_tensor(A, (N, 6), "float32")
        B = T.make_tensor(B, (3, N), "int32")
        with T.Kernel(T.ceildiv(N, 32), threads=32) as bx:
            i = bx * 32 + T.get_thread_binding()
            row = T.alloc_local((6,), "float32")
            for j in T.serial(6):
                row[j] = A[i, j]
            if i < N:
                B[0, i] = T.any_of(row)
                B[1, i] = T.all_of(row)
                B[2, i] = T.any_of(A[i, 2:5]) * 2 + T.all_of(A[i, 0:3])
    return k


@pytest.mark.parametrize("device", DEVICES)
def test_make_tensor_any_of_all_of(device, rng):
    n = 70
    x = rng.integers(0, 4, (n, 6)) == 0  # sparse zeros ...
    x = (~x).astype(np.float32) * rng.standard_normal((n, 6)).astype(np.float32)
    x[3] = 0.0  # ... and all-zero / all-non-zero rows
    x[4] = 1.0
    a = torch.from_numpy(x)
    (_, b, _) = _run(_logical_kernel(), device, a, torch.full((3, n), -7, dtype=torch.int32), n)
    nz = a != 0
    assert torch.equal(b[0], nz.any(1).int())
    assert torch.equal(b[1], nz.all(1).int())
    assert torch.equal(b[2], nz[:, 2:5].any(1).int() * 2 + nz[:, 0:3].all(1).int())


def test_any_of_bool_buffer_and_static_size():
    @T.prim_func
    def k(M: T.Tensor((4, 8), "bool"), O: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=4):
            t = T.get_thread_binding()
            O[t] = T.any_of(M[t, :]) + 2 * T.all_of(M[t, 0:8])

    m = torch.tensor([[0] * 8, [1] * 8, [0] * 7 + [1], [1] * 7 + [0]], dtype=torch.bool)
    (_, o) = _run(k, "cpu", m, torch.zeros(4, dtype=torch.int32))
    assert o.tolist() == [0, 3, 1, 1]

    with pytest.raises(Exception, match="static size"):
        @T.prim_func
        def dyn(A: T.Tensor((T.symbolic("n"),), "int32"), O: T.Tensor((1,), "int32")):
            with T.Kernel(1, threads=32):
                O[0] = T.any_of(A)


# ---- tilelang.set_log_level / logger, tilelang.utils -------------------------------------------

def test_logger_and_set_log_level():
    assert isinstance(tilelang.logger, logging.Logger) and tilelang.logger.name == "tilelang"
    old = tilelang.logger.level
    try:
        tilelang.set_log_level("debug")
        assert tilelang.logger.level == logging.DEBUG
        tilelang.set_log_level(logging.ERROR)
        assert tilelang.logger.level == logging.ERROR
        with pytest.raises(ValueError):
            tilelang.set_log_level("LOUD")
    finally:
        tilelang.logger.setLevel(old)


def test_utils_reexports():
    from tilelang.utils import (TensorSupplyType, determine_target, is_fragment, is_global,
                                is_local, is_shared, is_shared_dynamic, map_torch_type,
                                torch_assert_close)
    from tilelang.utils.target import determine_target as dt2
    from tilelang.utils.tensor import get_tensor_supply, is_float8_dtype

    assert TensorSupplyType is tilelang.TensorSupplyType and dt2 is determine_target
    assert map_torch_type("float16") is torch.float16
    assert map_torch_type("e4m3_float8") is torch.float8_e4m3fn
    assert map_torch_type(T.bfloat16) is torch.bfloat16
    assert is_float8_dtype(torch.float8_e5m2) and not is_float8_dtype("float32")
    torch_assert_close(torch.ones(4), torch.ones(4))
    with pytest.raises(AssertionError):
        torch_assert_close(torch.ones(4), torch.zeros(4), max_mismatched_ratio=0.0)
    assert callable(get_tensor_supply(TensorSupplyType.Normal))

    expect = "cpu" if not torch.cuda.is_available() else None
    auto = determine_target()
    assert auto == expect if expect else auto.startswith("cuda -arch=sm_")
    assert determine_target("cuda -arch=sm_80") == "cuda -arch=sm_80"
    assert determine_target("cuda -arch=sm_90a", return_object=True).arch == "sm_90a"
    with pytest.raises(ValueError):
        determine_target("hip")

    seen = {}

    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((64,), "float32")
            F = T.alloc_fragment((64,), "float32")
            L = T.alloc_local((2,), "float32")
            seen.update(A=A, S=S, F=F, L=L)
            T.copy(A, S)
            T.copy(S, F)
            T.copy(F, A)

    assert k is not None
    assert is_global(seen["A"]) and not is_shared(seen["A"])
    assert is_shared(seen["S"]) and is_shared_dynamic(seen["S"])
    assert not is_shared(seen["S"], allow_dynamic=False)
    assert is_fragment(seen["F"]) and is_local(seen["L"]) and not is_local(seen["F"])


def test_fast_math_names_are_module_attributes():
    # the reference spells them T.__exp etc.; inside a kernel function no name mangling applies
    for name, _, _ in FAST:
        assert callable(getattr(T, name))
