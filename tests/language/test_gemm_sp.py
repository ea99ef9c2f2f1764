"""`T.gemm_sp`: GEMM with a 2:4-sparse A given as its kept elements and row-major metadata
(the reference's format), for 16- and 8-bit types (two of every four kept) and float32 (one
of every two), A and E stored M- or K-major, B either way, A or B in fragments. Checked on
the CPU interpreter against the dense product, built for sm_90a, and run on a GPU where there
is one."""

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.runtime import toolkit

HAS_COMPILER = toolkit.nvrtc_backend() is not None or toolkit.nvcc_path() is not None
DEVICES = ["cpu", pytest.param("cuda", marks=[
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")])]


def sparsify(M, K, dtype, rng):
    """A random dense M x K matrix with the 2:4 pattern (1:2 for float32), with its kept
    elements and metadata in the reference's natural format (see language/gemm_sp.py)."""
    group, kept = (2, 1) if dtype == torch.float32 else (4, 2)
    vals = torch.from_numpy(rng.integers(1, 4, (M, K)) * rng.choice([-1, 1], (M, K)))
    keep = np.zeros((M, K // group, group), bool)
    for r in range(M):
        for g in range(K // group):
            keep[r, g, np.sort(rng.choice(group, kept, replace=False))] = True
    dense = vals.reshape(M, K // group, group) * torch.from_numpy(keep)
    dense = dense.reshape(M, K)
    sparse = vals.reshape(M, K // group, group)[torch.from_numpy(keep)].reshape(M, K * kept // group)
    pos = np.nonzero(keep.reshape(-1, group))[1].reshape(M, K // group, kept)
    if group == 2:  # positions count 16-bit halves: element 0 -> (0, 1), element 1 -> (2, 3)
        codes = np.where(pos[..., 0] == 0, 0b0100, 0b1110)
    else:
        codes = pos[..., 0] | (pos[..., 1] << 2)
    return dense, sparse, codes


def pack_metadata(codes, meta_bits):
    quad = meta_bits // 4
    M, G = codes.shape
    words = np.zeros((M, G // quad), np.int64)
    for c in range(quad):
        words |= codes[:, c::quad].astype(np.int64) << (4 * c)
    words = np.where(words >= 2 ** (meta_bits - 1), words - 2 ** meta_bits, words)
    return torch.from_numpy(words).to(getattr(torch, f"int{meta_bits}"))


def _kernel(M, N, K, bK, dtype, meta, acc, trans_A, trans_B, a_frag=False, b_frag=False):
    group = 2 if dtype == "float32" else 4
    ef = (int(meta[3:]) // 4) * group
    a_shape = (K // 2, M) if trans_A else (M, K // 2)
    e_shape = (K // ef, M) if trans_A else (M, K // ef)
    b_shape = (N, K) if trans_B else (K, N)
    a_tile = (bK // 2, M) if trans_A else (M, bK // 2)
    e_tile = (bK // ef, M) if trans_A else (M, bK // ef)
    b_tile = (N, bK) if trans_B else (bK, N)

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), E: T.Tensor(e_shape, meta), B: T.Tensor(b_shape, dtype),
             C: T.Tensor((M, N), acc)):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared(a_tile, dtype)
            e_s = T.alloc_shared(e_tile, meta)
            b_s = T.alloc_shared(b_tile, dtype)
            a_f = T.alloc_fragment(a_tile, dtype)
            b_f = T.alloc_fragment(b_tile, dtype)
            c_f = T.alloc_fragment((M, N), acc)
            T.clear(c_f)
            for k in T.Pipelined(K // bK, num_stages=2):
                if trans_A:
                    T.copy(A[k * bK // 2, 0], a_s)
                    T.copy(E[k * bK // ef, 0], e_s)
                else:
                    T.copy(A[0, k * bK // 2], a_s)
                    T.copy(E[0, k * bK // ef], e_s)
                if trans_B:
                    T.copy(B[0, k * bK], b_s)
                else:
                    T.copy(B[k * bK, 0], b_s)
                a_op, b_op = a_s, b_s
                if a_frag:
                    T.copy(a_s, a_f)
                    a_op = a_f
                if b_frag:
                    T.copy(b_s, b_f)
                    b_op = b_f
                T.gemm_sp(a_op, e_s, b_op, c_f, trans_A, trans_A, trans_B)
            T.copy(c_f, C)
    return main


CASES = [
    # dtype, meta, acc, trans_A, trans_B, a_frag, b_frag
    ("float16", "int16", "float32", False, True, False, False),
    ("float16", "int16", "float32", False, False, False, False),
    ("bfloat16", "int16", "float32", True, True, False, False),
    ("float16", "int32", "float32", True, False, False, False),
    ("int8", "int32", "int32", False, True, False, False),
    ("int8", "int16", "int32", False, True, False, False),
    ("float32", "int16", "float32", False, True, False, False),
    ("float16", "int16", "float32", False, True, True, False),
    ("float16", "int16", "float32", False, True, False, True),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,meta,acc,trans_A,trans_B,a_frag,b_frag", CASES)
def test_gemm_sp_matches_the_dense_product(device, dtype, meta, acc, trans_A, trans_B, a_frag,
                                           b_frag):
    rng = np.random.default_rng()
    M, N, K = 64, 64, 128
    bK = 64 if dtype == "int8" else 32
    tdt = getattr(torch, dtype)
    dense, sparse, codes = sparsify(M, K, tdt, rng)
    E = pack_metadata(codes, int(meta[3:]))
    B = torch.from_numpy(rng.integers(-2, 3, (K, N)))
    a_in = (sparse.T if trans_A else sparse).contiguous().to(tdt)
    e_in = (E.T if trans_A else E).contiguous()
    b_in = (B.T if trans_B else B).contiguous().to(tdt)
    func = _kernel(M, N, K, bK, dtype, meta, acc, trans_A, trans_B, a_frag, b_frag)
    kernel = tilelang.compile(func, out_idx=[3], target="cpu" if device == "cpu" else "cuda")
    C = kernel(a_in.to(device), e_in.to(device), b_in.to(device)).cpu()
    expect = dense.double() @ B.double()
    torch.testing.assert_close(C.double(), expect, rtol=0, atol=0)
    if device == "cpu" and HAS_COMPILER:
        tilelang.compile(func, out_idx=[3], target="cuda -arch=sm_90a")


def test_inconsistent_shapes_are_located():
    with pytest.raises(ValueError, match="do not describe one M x K") as info:
        @T.prim_func
        def k(C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128):
                a = T.alloc_shared((64, 16), "float16")
                e = T.alloc_shared((64, 4), "int16")   # covers 64 columns, A has 32
                b = T.alloc_shared((32, 64), "float16")
                c = T.alloc_fragment((64, 64), "float32")
                T.gemm_sp(a, e, b, c)
    assert "test_gemm_sp.py" in str(info.value)
    with pytest.raises(TypeError, match="metadata E must be an 8-, 16- or 32-bit integer"):
        @T.prim_func
        def k2(C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128):
                a = T.alloc_shared((64, 16), "float16")
                e = T.alloc_shared((64, 2), "float32")
                b = T.alloc_shared((32, 64), "float16")
                c = T.alloc_fragment((64, 64), "float32")
                T.gemm_sp(a, e, b, c)
