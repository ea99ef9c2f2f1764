"""`T.ldg32..256` / `T.stg32..256` (global) and `T.lds32..128` / `T.sts32..128` (shared):
one explicit-width access moving 32-bit words, predicated forms, regrouping the words with
`T.reinterpret`, and the checks (scope, width, alignment)."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.runtime import toolkit

HAS_COMPILER = toolkit.nvrtc_backend() is not None or toolkit.nvcc_path() is not None
DEVICES = ["cpu", pytest.param("cuda", marks=[
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")])]
LOADS = {32: T.ldg32, 64: T.ldg64, 128: T.ldg128, 256: T.ldg256}
STORES = {32: T.stg32, 64: T.stg64, 128: T.stg128, 256: T.stg256}
SHARED_LOADS = {32: T.lds32, 64: T.lds64, 128: T.lds128}
SHARED_STORES = {32: T.sts32, 64: T.sts64, 128: T.sts128}


def _round_trip(width, dtype, n_vec, predicated, through_shared):
    """Block b moves elements [b * per, (b + 1) * per) from x to y with one load and one store
    of `width` bits (through shared memory when asked); with `predicated`, blocks from
    `n_vec // 2 + 1` on load zeros and odd blocks store nothing."""
    per = width // (torch.empty((), dtype=getattr(torch, dtype)).element_size() * 8)
    n = n_vec * per
    load, store = LOADS[width], STORES[width]

    @T.prim_func
    def main(x: T.Tensor((n,), dtype), y: T.Tensor((n,), dtype)):
        with T.Kernel(n_vec, threads=32) as b:
            if predicated:
                words = load(x[b * per:b * per + per], pred=b <= n_vec // 2)
            else:
                words = load(x[b * per:b * per + per])
            if through_shared:
                s = T.alloc_shared((n,), dtype)
                SHARED_STORES[width](s[b * per:b * per + per], words)
                T.sync_threads()
                words = SHARED_LOADS[width](s[b * per:b * per + per])
            if predicated:
                store(y[b * per:b * per + per], words, pred=b % 2 == 0)
            else:
                store(y[b * per:b * per + per], words)
    return main, n, per


def _expected(x, y0, n_vec, per, predicated):
    want = x.clone()
    if predicated:
        for b in range(n_vec):
            blk = slice(b * per, (b + 1) * per)
            if b % 2:
                want[blk] = y0[blk]
            elif b > n_vec // 2:
                want[blk] = 0
    return want


def _inputs(n, dtype, device):
    if dtype.startswith("float"):
        x = torch.randn(n, dtype=getattr(torch, dtype))
    else:
        x = torch.randint(-100, 100, (n,), dtype=getattr(torch, dtype))
    y = torch.full((n,), -7, dtype=getattr(torch, dtype))  # poisoned
    return x.to(device), y.to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("width,dtype", [
    (w, d) for w in (32, 64, 128, 256) for d in ("float32", "float16", "int8", "float64")
    if not (d == "float64" and w == 32)])  # a float64 element is wider than 32 bits
@pytest.mark.parametrize("predicated", [False, True])
def test_global_round_trip(device, width, dtype, predicated):
    func, n, per = _round_trip(width, dtype, 7, predicated, through_shared=False)
    kernel = tilelang.compile(func, target="cpu" if device == "cpu" else "cuda")
    x, y = _inputs(n, dtype, device)
    y0 = y.clone()
    kernel(x, y)
    assert torch.equal(y.cpu(), _expected(x.cpu(), y0.cpu(), 7, per, predicated))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("width", [32, 64, 128])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_shared_round_trip(device, width, dtype):
    func, n, per = _round_trip(width, dtype, 5, False, through_shared=True)
    kernel = tilelang.compile(func, target="cpu" if device == "cpu" else "cuda")
    x, y = _inputs(n, dtype, device)
    kernel(x, y)
    assert torch.equal(y.cpu(), x.cpu())


@pytest.mark.parametrize("device", DEVICES)
def test_words_regrouped_by_reinterpret(device):
    """Two float16 share a word, the first in the low half; T.reinterpret regroups the words
    of a 128-bit load as 8 float16 lanes or one word as a float32."""
    n = 8 * 5

    @T.prim_func
    def main(x: T.Tensor((n,), "float16"), y: T.Tensor((n,), "float16"),
             lo: T.Tensor((5,), "int32")):
        with T.Kernel(5, threads=32) as b:
            words = T.ldg128(x[b * 8:b * 8 + 8])
            y[b * 8:b * 8 + 8] = T.reinterpret(words, T.float16x8)
            lo[b] = T.reinterpret(words[0], T.int32)

    kernel = tilelang.compile(main, target="cpu" if device == "cpu" else "cuda")
    x = torch.randn(n, dtype=torch.float16, device=device)
    y = torch.full((n,), float("nan"), dtype=torch.float16, device=device)
    lo = torch.full((5,), -1, dtype=torch.int32, device=device)
    kernel(x, y, lo)
    assert torch.equal(y.cpu(), x.cpu())
    assert torch.equal(lo.cpu(), x.cpu().view(torch.int32)[::4])


def test_misaligned_access_is_a_located_error():
    @T.prim_func
    def main(x: T.Tensor((64,), "float32"), y: T.Tensor((64,), "float32")):
        with T.Kernel(4, threads=32) as b:
            T.stg64(y[b * 2 + 1:b * 2 + 3], T.ldg64(x[b * 2:b * 2 + 2]))

    kernel = tilelang.compile(main, target="cpu")
    with pytest.raises(AssertionError, match="not aligned to 8 bytes") as info:
        kernel(torch.randn(64), torch.zeros(64))
    assert "test_wide_access.py" in str(info.value)


def test_checks():
    with pytest.raises(ValueError, match="accesses global memory; s is shared") as info:
        @T.prim_func
        def shared_ldg(x: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_shared((32,), "float32")
                x[0] = T.reinterpret(T.ldg32(s[0]), T.float32)
    assert "test_wide_access.py" in str(info.value)
    with pytest.raises(ValueError, match="accesses shared memory; x is global"):
        @T.prim_func
        def global_lds(x: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                x[0] = T.reinterpret(T.lds32(x[0]), T.float32)
    with pytest.raises(ValueError, match="moves 128 bits; the region of x is 2 x float32"):
        @T.prim_func
        def short_region(x: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                T.ldg128(x[0:2])
    with pytest.raises(ValueError, match="stores 64 bits; the value is 1 x uint32"):
        @T.prim_func
        def narrow_value(x: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                T.stg64(x[0:2], T.ldg32(x[0]))
    with pytest.raises(ValueError, match="differ in width"):
        @T.prim_func
        def bad_reinterpret(x: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                x[0:4] = T.reinterpret(T.ldg64(x[0:2]), T.float32x4)


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_cuda_source_uses_one_wide_instruction_per_access(arch):
    func, _, _ = _round_trip(128, "float32", 7, True, through_shared=True)
    src = tilelang.compile(func, target=f"cuda -arch={arch}").get_kernel_source()
    assert "tl::load_global_128_conditional(" in src
    assert "tl::store_shared_128(" in src and "tl::load_shared_128(" in src
    assert "tl::store_global_128_conditional(" in src
    func, _, _ = _round_trip(64, "float16", 7, False, through_shared=False)
    src = tilelang.compile(func, target=f"cuda -arch={arch}").get_kernel_source()
    assert "tl::load_global_64(" in src and "tl::store_global_64(" in src
