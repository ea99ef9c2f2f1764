"""T.gemm_sp, the 2:4 structured-sparse GEMM: C += A @ B where A (M x K) keeps 2 of each 4
consecutive elements of a row (1 of 2 for float32), given as its kept values (M x K/2) and
4-bit position codes packed into the integers of E (M x K/e).

A compressor written here (numpy, independent of interp/sparse.py) makes the operands from
random sparse matrices (kept positions random, some kept values zero); the products are
checked against float64 torch on the CPU interpreter and on a GPU (marked gpu): every operand
dtype mma.sp takes, 8/16/32-bit metadata, transposed A / E / B, A and B in shared memory or
registers, ragged M, N and K, several tile and warp configurations, outputs poisoned first.
Every configuration builds for sm_90a and some for sm_80 (mma.sp.sync m16n8k16/32/64)."""

import os

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.cuda.intrinsics.sparse_layout import get_e_factor
from tilelang.interp.sparse import decompress
from tilelang.runtime import toolkit

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")
GPU = [pytest.mark.gpu,
       pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
         "int8": torch.int8, "uint8": torch.uint8, "int16": torch.int16, "int32": torch.int32,
         "float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def rng():
    seed = int(os.environ.get("TL_TEST_SEED", np.random.SeedSequence().entropy % 2**32))
    print(f"random seed: {seed} (replay with TL_TEST_SEED={seed})")
    return np.random.default_rng(seed)


# ---- the operands ------------------------------------------------------------------------------

def group_of(dtype):
    return 2 if dtype == "float32" else 4


def compress(dense: np.ndarray, group: int, meta_dtype: str):
    """(kept values, metadata) of a dense matrix with at most group/2 nonzeros per group: the
    nonzeros, completed by the first zeros of the group, in increasing position order."""
    kept = group // 2
    M, K = dense.shape
    g = dense.reshape(M, K // group, group)
    assert ((g != 0).sum(-1) <= kept).all()
    first = np.argsort(g == 0, axis=-1, kind="stable")[..., :kept]  # nonzeros first
    pos = np.sort(first, axis=-1)
    values = np.take_along_axis(g, pos, -1).reshape(M, K // 2)
    if group == 4:
        codes = pos[..., 0] | (pos[..., 1] << 2)
    else:  # a float32 pair is addressed as four 16-bit halves: (0, 1) or (2, 3)
        codes = np.where(pos[..., 0] == 0, 0b0100, 0b1110)
    nbytes = int(meta_dtype.lstrip("uint")) // 8
    per = 2 * nbytes  # codes per metadata integer
    codes = codes.reshape(M, K // (group * per), per).astype(np.uint64)
    words = sum(codes[..., t] << np.uint64(4 * t) for t in range(per))
    meta = words.astype(f"u{nbytes}").view(f"i{nbytes}" if meta_dtype.startswith("int") else
                                          f"u{nbytes}")
    return values, meta


def sparse_matrix(rng, M, K, dtype):
    """A random M x K matrix with group/2 kept positions per group (chosen at random, one kept
    value in ten zero), as float64 values exactly representable in `dtype`."""
    group = group_of(dtype)
    kept = group // 2
    pos = np.argsort(rng.random((M, K // group, group)), axis=-1)[..., :kept]
    if dtype in ("int8", "uint8"):
        lo = 0 if dtype == "uint8" else -4
        vals = rng.integers(lo, 5, size=pos.shape).astype(np.float64)
    else:
        vals = rng.standard_normal(pos.shape)
    vals[rng.random(pos.shape) < 0.1] = 0.0
    dense = np.zeros((M, K // group, group))
    np.put_along_axis(dense, pos, vals, -1)
    dense = dense.reshape(M, K)
    return torch.from_numpy(dense).to(TORCH[dtype]).double().numpy()  # representable


def dense_matrix(rng, shape, dtype):
    if dtype in ("int8", "uint8"):
        x = rng.integers(0 if dtype == "uint8" else -4, 5, size=shape).astype(np.float64)
    else:
        x = rng.standard_normal(shape)
    return torch.from_numpy(x).to(TORCH[dtype]).double().numpy()


def to_torch(x: np.ndarray, dtype, device):
    return torch.from_numpy(np.ascontiguousarray(x)).to(TORCH[dtype]).to(device)


# ---- the kernel --------------------------------------------------------------------------------

def sp_gemm(M, N, K, bm, bn, bk, dtype, accum, meta, *, trans_A=False, trans_E=False,
            trans_B=False, a_regs=False, b_regs=False, threads=128, stages=2, policy="Square"):
    ef = get_e_factor(dtype, meta)
    a_shape, a_tile = ((K // 2, M), (bk // 2, bm)) if trans_A else ((M, K // 2), (bm, bk // 2))
    e_shape, e_tile = ((K // ef, M), (bk // ef, bm)) if trans_E else ((M, K // ef), (bm, bk // ef))
    b_shape, b_tile = ((N, K), (bn, bk)) if trans_B else ((K, N), (bk, bn))

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), E: T.Tensor(e_shape, meta),
             B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared(a_tile, dtype)
            E_s = T.alloc_shared(e_tile, meta)
            B_s = T.alloc_shared(b_tile, dtype)
            A_r = T.alloc_fragment(a_tile, dtype)
            B_r = T.alloc_fragment(b_tile, dtype)
            C_r = T.alloc_fragment((bm, bn), accum)
            T.clear(C_r)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                if trans_A:
                    T.copy(A[k * bk // 2, by * bm], A_s)
                else:
                    T.copy(A[by * bm, k * bk // 2], A_s)
                if trans_E:
                    T.copy(E[k * bk // ef, by * bm], E_s)
                else:
                    T.copy(E[by * bm, k * bk // ef], E_s)
                if trans_B:
                    T.copy(B[bx * bn, k * bk], B_s)
                else:
                    T.copy(B[k * bk, bx * bn], B_s)
                if a_regs:
                    T.copy(A_s, A_r)
                if b_regs:
                    T.copy(B_s, B_r)
                T.gemm_sp(A_r if a_regs else A_s, E_s, B_r if b_regs else B_s, C_r, trans_A,
                          trans_E, trans_B, policy=getattr(T.GemmWarpPolicy, policy))
            T.copy(C_r, C[by * bm, bx * bn])

    return main


# dtype, accum, meta, (M, N, K), (bm, bn, bk), options
CASES = [
    ("float16", "float32", "int16", (256, 256, 256), (128, 128, 64), {}),
    ("float16", "float32", "int16", (100, 72, 96), (64, 64, 64), {"trans_B": True}),
    ("float16", "float16", "int8", (128, 128, 128), (64, 64, 64), {"threads": 64}),
    ("bfloat16", "float32", "int32", (64, 128, 128), (64, 128, 32),
     {"trans_A": True, "trans_E": True}),
    ("bfloat16", "float32", "uint8", (96, 80, 64), (32, 16, 32),
     {"trans_E": True, "threads": 64, "stages": 3}),
    ("int8", "int32", "int32", (128, 128, 128), (128, 128, 64), {"trans_B": True}),
    ("int8", "int32", "int16", (64, 96, 192), (64, 32, 64), {"trans_A": True}),
    ("uint8", "int32", "uint16", (64, 64, 128), (64, 64, 128), {"trans_B": True}),
    ("float32", "float32", "int16", (128, 64, 64), (64, 64, 32), {}),
    ("float32", "float32", "int8", (80, 40, 48), (32, 8, 16), {"trans_B": True, "threads": 32}),
    ("float8_e4m3", "float32", "int32", (128, 128, 128), (128, 128, 64), {"trans_B": True}),
    ("float8_e5m2", "float32", "int16", (64, 64, 64), (64, 64, 64), {}),
    # A / B in registers (the reference's rs / sr / rr forms)
    ("float16", "float32", "int16", (64, 256, 64), (64, 256, 32),
     {"a_regs": True, "trans_A": True, "trans_E": True}),
    ("float16", "float32", "int16", (128, 256, 96), (128, 256, 32),
     {"b_regs": True, "trans_B": True}),
    ("int8", "int32", "int32", (128, 8, 64), (128, 8, 64),
     {"a_regs": True, "b_regs": True, "trans_B": True}),
    ("float16", "float32", "int16", (96, 64, 64), (64, 64, 32),
     {"a_regs": True, "b_regs": True}),
    # more warps than mma tiles along one side, and the row policy
    ("float16", "float32", "uint8", (256, 128, 128), (256, 128, 64),
     {"threads": 256, "policy": "FullRow", "stages": 3}),
]


def _case_id(case):
    dtype, accum, meta, mnk, _tile, opts = case
    return "-".join([dtype, accum, meta, "x".join(map(str, mnk))] + sorted(opts))


def _tolerance(dtype, accum):
    if dtype in ("int8", "uint8"):
        return 0.0
    if accum == "float16":
        return 1e-2
    return 2e-3 if dtype == "float32" else 1e-4  # tf32 rounds the operands


def run_case(rng, device, dtype, accum, meta, mnk, tile, opts):
    M, N, K = mnk
    func = sp_gemm(M, N, K, *tile, dtype, accum, meta, **opts)
    kernel = tilelang.compile(func, target="cpu" if device == "cpu" else "cuda")
    a = sparse_matrix(rng, M, K, dtype)
    b = dense_matrix(rng, (K, N), dtype)
    values, e = compress(a, group_of(dtype), meta)
    if opts.get("trans_A"):
        values = values.T
    if opts.get("trans_E"):
        e = e.T
    e = torch.from_numpy(np.ascontiguousarray(e)).to(device)
    c = torch.full((M, N), -77 if accum == "int32" else float("nan"), dtype=TORCH[accum],
                   device=device)
    kernel(to_torch(values, dtype, device), e,
           to_torch(b.T if opts.get("trans_B") else b, dtype, device), c)
    ref = a @ b
    got = c.cpu().double().numpy()
    bound = _tolerance(dtype, accum) * (np.abs(a) @ np.abs(b)) + 1e-6
    bad = ~(np.abs(got - ref) <= bound)
    assert not bad.any(), (f"{bad.sum()} of {bad.size} wrong, first at "
                           f"{tuple(np.argwhere(bad)[0])}: {got[bad][0]} vs {ref[bad][0]}")


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_gemm_sp_interpreter(rng, case):
    run_case(rng, "cpu", *case)


@pytest.mark.parametrize("case", [pytest.param(c, marks=GPU) for c in CASES],
                         ids=[_case_id(c) for c in CASES])
def test_gemm_sp_gpu(rng, case):
    run_case(rng, "cuda", *case)


@requires_compiler
@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_gemm_sp_builds_for_sm90a(case):
    dtype, accum, meta, (M, N, K), tile, opts = case
    src = tilelang.compile(sp_gemm(M, N, K, *tile, dtype, accum, meta, **opts),
                           target="cuda -arch=sm_90a").get_kernel_source()
    assert "tl::gemm_sp<" in src
    assert ("tl::RegOperand" in src) == bool(opts.get("a_regs") or opts.get("b_regs"))


SM80 = [c for c in CASES if not c[0].startswith("float8")][::3]


@requires_compiler
@pytest.mark.parametrize("case", SM80, ids=[_case_id(c) for c in SM80])
def test_gemm_sp_builds_for_sm80(case):
    dtype, accum, meta, (M, N, K), tile, opts = case
    tilelang.compile(sp_gemm(M, N, K, *tile, dtype, accum, meta, **opts),
                     target="cuda -arch=sm_80")


# ---- the metadata's meaning ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype,meta", [("float16", "int16"), ("int8", "int8"),
                                        ("float32", "int32"), ("bfloat16", "uint16")])
def test_decompress_inverts_the_compressor(rng, dtype, meta):
    a = sparse_matrix(rng, 16, 64, dtype)
    values, e = compress(a, group_of(dtype), meta)
    dense, bad = decompress(values, e, group_of(dtype))
    assert bad is None and np.array_equal(dense, a)


def test_zero_codes_keep_the_first_elements():
    values = np.arange(1, 9, dtype=np.float32).reshape(1, 8)  # one row, 4 groups of 4
    dense, bad = decompress(values, np.zeros((1, 1), np.int16), 4)
    assert bad is None
    assert dense.tolist() == [[1, 2, 0, 0, 3, 4, 0, 0, 5, 6, 0, 0, 7, 8, 0, 0]]
    dense, _ = decompress(values[:, :2], np.zeros((1, 1), np.int8), 2)  # float32 pairs
    assert dense.tolist() == [[1, 0, 2, 0]]


def test_invalid_metadata_is_reported_at_the_gemm(rng):
    func = sp_gemm(32, 32, 32, 32, 32, 32, "float16", "float32", "int16", threads=32)
    kernel = tilelang.compile(func, target="cpu")
    e = np.full((32, 2), 0b0100_0100_0100_0100, np.int16)
    e[5, 1] = 0b0100_0100_0001_0100  # group 5 of row 5: indices 1, 0 (not increasing)
    c = torch.zeros(32, 32)
    with pytest.raises(ValueError, match=r"E_s holds 0b0001 for group 5 .* row 5") as info:
        kernel(torch.ones(32, 16, dtype=torch.float16), torch.from_numpy(e),
               torch.ones(32, 32, dtype=torch.float16), c)
    assert "test_gemm_sp.py" in str(info.value)


# ---- what it rejects -----------------------------------------------------------------------------

def _trace(a_shape, e_shape, b_shape, dtype="float16", meta="int16", e_scope="shared"):
    @T.prim_func
    def main(C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared(a_shape, dtype)
            E_s = T.alloc_shared(e_shape, meta) if e_scope == "shared" else \
                T.alloc_fragment(e_shape, meta)
            B_s = T.alloc_shared(b_shape, dtype)
            C_r = T.alloc_fragment((64, 64), "float32")
            T.gemm_sp(A_s, E_s, B_s, C_r)
    return main


def test_shape_and_dtype_errors_name_the_problem():
    with pytest.raises(AssertionError, match=r"K_A \(wo sparse\) = 64, K_B = 32"):
        _trace((64, 32), (64, 4), (32, 64))
    with pytest.raises(ValueError, match=r"metadata E \(E_s\) .* is 64 x 4, got \[64, 8\]"):
        _trace((64, 32), (64, 8), (64, 64))
    with pytest.raises(TypeError, match="8-, 16- or 32-bit integers"):
        _trace((64, 32), (64, 4), (64, 64), meta="float16")
    with pytest.raises(TypeError, match="structured sparsity is defined for"):
        _trace((64, 32), (64, 4), (64, 64), dtype="float64")
    with pytest.raises(ValueError, match="must be a tile in shared memory") as info:
        _trace((64, 32), (64, 4), (64, 64), e_scope="fragment")
    assert "test_gemm_sp.py" in str(info.value)
