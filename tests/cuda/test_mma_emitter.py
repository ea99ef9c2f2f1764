"""`tilelang.cuda.intrinsics`: the mma.sync emitter (`TensorCoreIntrinEmitter`) drives
`T.ptx_ldmatrix` / `T.ptx_mma` warp by warp. GEMMs written with it run on the CPU interpreter
against torch (ragged values, every operand layout the emitter supports), build for sm_80 and
sm_90a (NVRTC accepts the wrappers), and run on a GPU (marked gpu)."""

import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang.testing
from tilelang.cuda.intrinsics import get_swizzle_layout
from tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter
from tilelang.runtime import toolkit
from device_params import DEVICES

requires_compiler = pytest.mark.skipif(
    toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
    reason="no CUDA compiler (NVRTC or nvcc) installed")

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
         "int8": torch.int8, "int32": torch.int32}


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))


def swizzle(buf):
    """The reference example's swizzle: 16-byte chunks XOR-permuted per row."""
    shape, bits = buf.shape, buf.dtype.bits
    if shape[-1] * bits % 512:
        return T.Layout(shape, lambda i, j: (i, j))
    return T.Layout(shape, lambda i, j: list(get_swizzle_layout(i, j, shape[-1], buf.dtype)))


def emitter_gemm(M, N, K, in_dtype, accum_dtype, a_trans=False, b_trans=True, warps=(2, 2),
                 warp_tiles=(32, 32), chunk=32, stages=2, out_dtype=None):
    """C = A @ B with A M x K (K x M if a_trans) and B N x K (K x N if not b_trans)."""
    out_dtype = out_dtype or accum_dtype
    bm, bn = warps[0] * warp_tiles[0], warps[1] * warp_tiles[1]
    emitter = TensorCoreIntrinEmitter(
        a_dtype=in_dtype, b_dtype=in_dtype, accum_dtype=accum_dtype, a_transposed=a_trans,
        b_transposed=b_trans, block_row_warps=warps[0], block_col_warps=warps[1],
        warp_row_tiles=warp_tiles[0], warp_col_tiles=warp_tiles[1], chunk=chunk)
    ls_a, ls_b, ls_c = emitter.local_size_a, emitter.local_size_b, emitter.local_size_out
    rows, cols = emitter.warp_rows, emitter.warp_cols
    a_shape = (K, M) if a_trans else (M, K)
    b_shape = (N, K) if b_trans else (K, N)
    a_tile = (chunk, bm) if a_trans else (bm, chunk)
    b_tile = (bn, chunk) if b_trans else (chunk, bn)
    threads = 32 * warps[0] * warps[1]

    @T.prim_func
    def main(A: T.Tensor(a_shape, in_dtype), B: T.Tensor(b_shape, in_dtype),
             C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared(a_tile, in_dtype)
            B_s = T.alloc_shared(b_tile, in_dtype)
            C_s = T.alloc_shared((bm, bn), out_dtype)
            A_l = T.alloc_local((rows * ls_a,), in_dtype)
            B_l = T.alloc_local((cols * ls_b,), in_dtype)
            C_l = T.alloc_local((rows * cols * ls_c,), accum_dtype)
            T.annotate_layout({A_s: swizzle(A_s), B_s: swizzle(B_s)})
            T.clear(C_l)
            for ko in T.Pipelined(K // chunk, num_stages=stages):
                if a_trans:
                    T.copy(A[ko * chunk, by * bm], A_s)
                else:
                    T.copy(A[by * bm, ko * chunk], A_s)
                if b_trans:
                    T.copy(B[bx * bn, ko * chunk], B_s)
                else:
                    T.copy(B[ko * chunk, bx * bn], B_s)
                for ki in T.serial(chunk // emitter.micro_size_k):
                    emitter.ldmatrix_a(A_l, A_s, ki)
                    emitter.ldmatrix_b(B_l, B_s, ki)
                    emitter.mma(A_l, B_l, C_l)
            emitter.stmatrix(C_l, C_s)
            for i, j in T.Parallel(bm, bn):
                C[by * bm + i, bx * bn + j] = C_s[i, j]

    return main


def inputs(M, N, K, in_dtype, a_trans, b_trans):
    if in_dtype == "int8":
        a = torch.randint(-9, 10, (M, K), dtype=torch.int8)
        b = torch.randint(-9, 10, (N, K), dtype=torch.int8)
    else:
        a = torch.randn(M, K).to(TORCH[in_dtype])
        b = torch.randn(N, K).to(TORCH[in_dtype])
    ref = a.double() @ b.double().T
    a_arg = a.T.contiguous() if a_trans else a
    b_arg = b if b_trans else b.T.contiguous()
    return a_arg, b_arg, ref


CASES = [
    # in, accum, a_trans, b_trans, warps, warp tiles, chunk
    ("float16", "float32", False, True, (2, 2), (32, 32), 32),
    ("float16", "float32", True, False, (2, 1), (32, 16), 32),
    ("bfloat16", "float32", False, False, (1, 2), (16, 8), 16),
    ("float16", "float16", False, True, (2, 2), (16, 16), 16),
    ("int8", "int32", False, True, (2, 2), (32, 16), 64),
    ("int8", "int32", True, False, (1, 2), (16, 16), 32),  # element loads (no ldmatrix)
    ("float32", "float32", False, True, (2, 2), (16, 16), 16),  # TF32
]


def _tolerance(in_dtype, accum):
    if in_dtype == "int8":
        return 0
    if accum == "float16":
        return 2e-2
    return 3e-3 if in_dtype == "float32" else 1e-3


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("in_dtype,accum,a_trans,b_trans,warps,tiles,chunk", CASES)
def test_emitter_gemm_matches_torch(device, in_dtype, accum, a_trans, b_trans, warps, tiles,
                                    chunk):
    tilelang.testing.set_random_seed(7)
    bm, bn = warps[0] * tiles[0], warps[1] * tiles[1]
    M, N, K = 2 * bm, 3 * bn, 3 * chunk
    func = emitter_gemm(M, N, K, in_dtype, accum, a_trans, b_trans, warps, tiles, chunk)
    kernel = tilelang.compile(func, out_idx=[2], target="cpu" if device == "cpu" else "cuda")
    a, b, ref = inputs(M, N, K, in_dtype, a_trans, b_trans)
    if device == "cuda":
        a, b = a.cuda(), b.cuda()
    c = kernel(a, b).cpu().double()
    tol = _tolerance(in_dtype, accum)
    if tol == 0:
        assert torch.equal(c, ref)
    else:
        err = ((c - ref).norm() / ref.norm()).item()
        assert err < tol, err


# every case for sm_90a; sm_80 for the ldmatrix and the element-load paths
BUILDS = [("sm_90a",) + c for c in CASES] + [("sm_80",) + CASES[0], ("sm_80",) + CASES[5]]


@requires_compiler
@pytest.mark.parametrize("arch,in_dtype,accum,a_trans,b_trans,warps,tiles,chunk", BUILDS)
def test_emitter_gemm_builds(arch, in_dtype, accum, a_trans, b_trans, warps, tiles, chunk):
    bm, bn = warps[0] * tiles[0], warps[1] * tiles[1]
    func = emitter_gemm(2 * bm, 2 * bn, 2 * chunk, in_dtype, accum, a_trans, b_trans, warps,
                        tiles, chunk)
    src = tilelang.compile(func, out_idx=[2], target=f"cuda -arch={arch}").get_kernel_source()
    assert "tl::ptx_mma_m16n8k" in src
    if (in_dtype, a_trans) != ("int8", True):
        assert "tl::ptx_ldmatrix<" in src


def test_emitter_sizes_follow_the_operand_type():
    e = TensorCoreIntrinEmitter("float16", "float16", "float32", False, True, 2, 2, 64, 64, 32)
    assert (e.micro_size_x, e.micro_size_y, e.micro_size_k) == (16, 16, 16)
    assert (e.local_size_a, e.local_size_b, e.local_size_out) == (8, 8, 8)
    assert (e.warp_rows, e.warp_cols, e.mma_prefix) == (4, 4, "m16n8k16")
    e8 = TensorCoreIntrinEmitter("int8", "int8", "int32", False, True, 2, 2, 32, 8, 64)
    assert (e8.micro_size_k, e8.n_dim, e8.local_size_b, e8.mma_prefix) == (32, 8, 8, "m16n8k32")
    tf = TensorCoreIntrinEmitter("float32", "float32", "float32", False, True, 1, 1, 16, 16, 16)
    assert (tf.micro_size_k, tf.a_dtype_abbrv) == (8, "tf32")


def test_emitter_rejects_what_it_cannot_do():
    with pytest.raises(ValueError, match="same dtype"):
        TensorCoreIntrinEmitter("float16", "bfloat16", "float32")
    with pytest.raises(ValueError, match="multiple of 16"):
        TensorCoreIntrinEmitter("float16", "float16", "float32", warp_row_tiles=24,
                                warp_col_tiles=16)
    with pytest.raises(NotImplementedError, match="not supported"):
        TensorCoreIntrinEmitter("float64", "float64", "float64", warp_row_tiles=16,
                                warp_col_tiles=16)

    e = TensorCoreIntrinEmitter("float16", "float16", "float32", False, True, 1, 1, 16, 16, 16)

    with pytest.raises(NotImplementedError, match="T.alloc_local") as info:
        @T.prim_func
        def fragments(A: T.Tensor((16, 16), "float16")):
            with T.Kernel(1, threads=32):
                A_s = T.alloc_shared((16, 16), "float16")
                A_f = T.alloc_fragment((16, 16), "float16")
                e.ldmatrix_a(A_f, A_s, 0)
    assert "test_mma_emitter.py" in str(info.value)


@requires_compiler
def test_emitter_gemm_sm90a_has_no_proxy_fence_and_no_barriers_in_stmatrix():
    # ldmatrix reads the cp.async stages through the generic proxy: no fence.proxy.async
    # (a MEMBAR.ALL.CTA each iteration); each thread's stmatrix stores need no barrier
    # between its (i, j) tiles, only one before the block reads C_s back
    func = emitter_gemm(128, 128, 64, "float16", "float32", False, True, (2, 2), (32, 32), 32)
    src = tilelang.compile(func, out_idx=[2], target="cuda -arch=sm_90a").get_kernel_source()
    assert "fence_proxy_async" not in src
    epilogue = src[src.index("tl::cp_async_wait<0>();"):]
    # after the last wait; before the block reads C_s back (none between the tiles' stores)
    assert epilogue.count("__syncthreads()") == 2, epilogue
