"""The header wrappers on a real GPU, against torch with exact (integer-valued) data: casts,
warp reductions, atomics, mma/ldmatrix fragments, cp.async, TMA + mbarrier (+ the 128B
swizzle), wgmma (SS and RS, 128B-swizzled descriptors). Skipped without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from rt_helpers import DEV, arch, build, ptr, run, sm
from tilelang.runtime import CudaKernelFunction, compile_cuda, encode_tiled_rowmajor

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu
rng = np.random.default_rng(11)


CASTS = r"""
#include "tl.cuh"
extern "C" __global__ void casts(const float* x, half_t* h, bfloat16_t* b, uint8_t* e4,
                                 uint8_t* e5, int* i, bfloat16_t* bi, const int* xi,
                                 float* back, int n) {
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n) return;
  float v = x[k];
  h[k] = tl::cast<half_t>(v);
  b[k] = tl::cast<bfloat16_t>(v);
  e4[k] = tl::bit_cast<uint8_t>(tl::cast<fp8_e4_t>(v));
  e5[k] = tl::bit_cast<uint8_t>(tl::cast<fp8_e5_t>(v));
  i[k] = tl::cast<int>(v);
  bi[k] = tl::cast<bfloat16_t>(xi[k]);
  back[k] = tl::cast<float>(tl::cast<half_t>(tl::cast<bfloat16_t>(v)));
}
"""


def test_casts_round_like_torch():
    fn = build(CASTS, "casts", ["ptr"] * 9 + ["int32"])
    n = 20000
    x = torch.tensor(rng.standard_normal(n) * 10 ** rng.uniform(-6, 2.5, n),
                     dtype=torch.float32, device=DEV)
    x[:6] = torch.tensor([0.0, -0.0, 447.9, -448.0, 1e-9, 2.5], device=DEV)
    xi = torch.tensor(rng.integers(-2**31, 2**31, n), dtype=torch.int32, device=DEV)
    outs = [torch.empty(n, dtype=t, device=DEV) for t in
            (torch.float16, torch.bfloat16, torch.uint8, torch.uint8, torch.int32,
             torch.bfloat16)]
    back = torch.empty(n, device=DEV)
    run(fn, ((n + 255) // 256, 1, 1), (256, 1, 1),
        [ptr(x)] + [ptr(o) for o in outs[:5]] + [ptr(outs[5]), ptr(xi), ptr(back), n])
    h, b, e4, e5, i, bi = outs
    assert torch.equal(h.view(torch.int16), x.half().view(torch.int16))
    assert torch.equal(b.view(torch.int16), x.bfloat16().view(torch.int16))
    m = x.abs() <= 448  # beyond that torch gives NaN, the header saturates (checked below)
    assert torch.equal(e4[m], x[m].to(torch.float8_e4m3fn).view(torch.uint8))
    assert torch.equal(e5, x.to(torch.float8_e5m2).view(torch.uint8))
    assert torch.equal(i, x.to(torch.int32))  # truncation toward zero
    assert torch.equal(bi.view(torch.int16), xi.to(torch.bfloat16).view(torch.int16))
    assert torch.equal(back, x.bfloat16().half().float())
    big = torch.tensor([1e5, -1e6, 1e30], device=DEV)  # fp8 saturates to finite
    e4b = torch.empty(3, dtype=torch.uint8, device=DEV)
    e5b = torch.empty(3, dtype=torch.uint8, device=DEV)
    scratch = [torch.empty(3, dtype=t, device=DEV) for t in
               (torch.float16, torch.bfloat16, torch.int32, torch.bfloat16, torch.float32)]
    run(fn, (1, 1, 1), (32, 1, 1), [ptr(big), ptr(scratch[0]), ptr(scratch[1]), ptr(e4b),
                                    ptr(e5b), ptr(scratch[2]), ptr(scratch[3]), ptr(xi),
                                    ptr(scratch[4]), 3])
    e4f = e4b.view(torch.float8_e4m3fn).float().tolist()
    e5f = e5b.view(torch.float8_e5m2).float().tolist()
    assert e4f == [448.0, -448.0, 448.0] and e5f == [57344.0, -57344.0, 57344.0]


REDUCE = r"""
#include "tl.cuh"
extern "C" __global__ void red(const float* x, const int* xi, float* o) {
  int t = threadIdx.x;
  float v = x[t];
  int w = xi[t];
  o[0 * 64 + t] = tl::warp_allreduce<tl::SumOp, 31>(v);
  o[1 * 64 + t] = tl::warp_allreduce<tl::SumOp, 3>(v);
  o[2 * 64 + t] = tl::warp_allreduce<tl::MaxOp, 28>(v);
  o[3 * 64 + t] = tl::warp_allreduce_lanes<tl::MinOp, 4, 2>(v);
  o[4 * 64 + t] = (float)tl::warp_allreduce<tl::BitXorOp, 31>(w);
  o[5 * 64 + t] = tl::warp_allreduce<tl::AbsMaxOp, 31>(v);
  o[6 * 64 + t] = tl::cast<float>(tl::warp_allreduce<tl::SumOp, 31>(tl::cast<half_t>(v)));
  __shared__ float ws[2];
  o[7 * 64 + t] = tl::block_allreduce<tl::SumOp, 2>(v, ws);
}
"""


def _group_reduce(x, mask, op):
    out = np.empty_like(x)
    for t in range(len(x)):
        lanes = [u for u in range(len(x)) if (u // 32 == t // 32) and
                 ((u % 32) & ~mask) == ((t % 32) & ~mask)]
        out[t] = op(x[lanes])
    return out


def test_warp_reductions():
    fn = build(REDUCE, "red", ["ptr", "ptr", "ptr"])
    x = rng.integers(-50, 50, 64).astype(np.float32)
    xi = rng.integers(0, 1 << 20, 64).astype(np.int32)
    o = torch.empty(8 * 64, device=DEV)
    xd, xid = torch.tensor(x, device=DEV), torch.tensor(xi, device=DEV)  # alive during the run
    run(fn, (1, 1, 1), (64, 1, 1), [ptr(xd), ptr(xid), ptr(o)])
    o = o.cpu().numpy().reshape(8, 64)
    np.testing.assert_array_equal(o[0], _group_reduce(x, 31, np.sum))
    np.testing.assert_array_equal(o[1], _group_reduce(x, 3, np.sum))
    np.testing.assert_array_equal(o[2], _group_reduce(x, 28, np.max))
    np.testing.assert_array_equal(o[3], _group_reduce(x, 6, np.min))
    np.testing.assert_array_equal(o[4], _group_reduce(xi, 31, np.bitwise_xor.reduce))
    np.testing.assert_array_equal(o[5], _group_reduce(np.abs(x), 31, np.max))
    np.testing.assert_array_equal(o[6], _group_reduce(x, 31, np.sum))  # exact in half
    np.testing.assert_array_equal(o[7], np.full(64, x.sum(), np.float32))


ATOMIC = r"""
#include "tl.cuh"
extern "C" __global__ void atoms(float* f, half_t* h, bfloat16_t* b, int* iv, long long* lv,
                                 double* dv, float* fmm, half_t* hmm, int* imm,
                                 const float* vals, int* prev, float* f2, half_t* h2, int n) {
  int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= n) return;
  float v = vals[k];
  tl::atomic_add(f, 1.0f);
  tl::atomic_add(f + 1, 2, tl::MemoryOrder::acq_rel);
  tl::atomic_add(f + 2, 1.0f, tl::MemoryOrder::seq_cst);
  tl::atomic_add(h, 1.0f);
  tl::atomic_add(h + 1, 1.0f, tl::MemoryOrder::release);
  tl::atomic_add(b + (k & 7), 1.0f);
  tl::atomic_add(b + 8 + (k & 7), 1.0f, tl::MemoryOrder::acquire);
  prev[k] = tl::atomic_add(iv, 1);
  tl::atomic_add(iv + 1, 3, tl::MemoryOrder::acq_rel);
  tl::atomic_add(lv, 5LL);
  tl::atomic_add(lv + 1, 7LL, tl::MemoryOrder::release);
  tl::atomic_add(dv, 0.5);
  tl::atomic_add(dv + 1, 0.25, tl::MemoryOrder::seq_cst);
  tl::atomic_max(fmm, v);
  tl::atomic_min(fmm + 1, v, tl::MemoryOrder::acq_rel);
  tl::atomic_max(dv + 2, (double)v);
  tl::atomic_min(dv + 3, (double)v);
  tl::atomic_max(hmm, tl::cast<half_t>(v));
  tl::atomic_min(hmm + 1, v, tl::MemoryOrder::release);
  tl::atomic_max(imm, (int)v);
  tl::atomic_min(imm + 1, (int)v, tl::MemoryOrder::acquire);
  const float one_two[4] = {1.0f, 2.0f, 1.0f, 1.0f};
  tl::atomic_addx2(f2, one_two);
  tl::atomic_addx4(f2 + 4, one_two);
  tl::atomic_addx2(h2, one_two);
  tl::atomic_addx4(h2 + 4, one_two);
  if (k == 0) tl::atomic_store(f + 3, 42.0f, tl::MemoryOrder::release);
}
"""


def test_atomics():
    fn = build(ATOMIC, "atoms", ["ptr"] * 13 + ["int32"])
    n = 1000
    vals = torch.tensor(rng.integers(-500, 500, n).astype(np.float32), device=DEV)
    f = torch.zeros(4, device=DEV)
    h = torch.zeros(2, dtype=torch.float16, device=DEV)
    b = torch.zeros(16, dtype=torch.bfloat16, device=DEV)
    iv = torch.zeros(2, dtype=torch.int32, device=DEV)
    lv = torch.zeros(2, dtype=torch.int64, device=DEV)
    dv = torch.tensor([0.0, 0.0, -1e300, 1e300], dtype=torch.float64, device=DEV)
    fmm = torch.tensor([-1e30, 1e30], device=DEV)
    hmm = torch.tensor([-60000.0, 60000.0], dtype=torch.float16, device=DEV)
    imm = torch.tensor([-2**31, 2**31 - 1], dtype=torch.int32, device=DEV)
    prev = torch.full((n,), -1, dtype=torch.int32, device=DEV)
    f2 = torch.zeros(8, device=DEV)
    h2 = torch.zeros(8, dtype=torch.float16, device=DEV)
    run(fn, ((n + 127) // 128, 1, 1), (128, 1, 1),
        [ptr(t) for t in (f, h, b, iv, lv, dv, fmm, hmm, imm, vals, prev, f2, h2)] + [n])
    assert f.tolist() == [n, 2 * n, n, 42.0]
    assert h.tolist() == [n, n]
    assert b.float().tolist() == [n / 8] * 16
    assert iv.tolist() == [n, 3 * n]
    assert sorted(prev.tolist()) == list(range(n))  # return_prev: each old value once
    assert lv.tolist() == [5 * n, 7 * n]
    assert dv.tolist() == [0.5 * n, 0.25 * n, vals.max().item(), vals.min().item()]
    assert fmm.tolist() == [vals.max().item(), vals.min().item()]
    assert hmm.float().tolist() == [vals.max().item(), vals.min().item()]
    assert imm.tolist() == [int(vals.max().item()), int(vals.min().item())]
    assert f2.tolist() == [n, 2 * n, 0, 0, n, 2 * n, n, n]
    assert h2.float().tolist() == [n, 2 * n, 0, 0, n, 2 * n, n, n]


MMA = r"""
#include "tl.cuh"
// One warp computes C (16 x 8, f32) = A (16 x K) @ B (K x 8) with one mma.sync; fragments as
// in HARDWARE §1. 16-bit A and B go through shared memory and ldmatrix; tf32 and s8 are
// loaded into registers directly from the fragment formulas.
template <class T>
__device__ void mma16(const T* A, const T* Bt, float* C) {  // Bt is N x K (K contiguous)
  __shared__ __align__(16) T sA[16 * 16];
  __shared__ __align__(16) T sB[8 * 16];
  const int l = threadIdx.x, g = l >> 2, q = l & 3;
  for (int i = l; i < 256; i += 32) sA[i] = A[i];
  for (int i = l; i < 128; i += 32) sB[i] = Bt[i];
  __syncwarp();
  uint32_t a[4], b[2];
  tl::ldmatrix_x4(a, &sA[(l % 16) * 16 + 8 * (l / 16)]);
  tl::ldmatrix_x2(b, &sB[(l % 8) * 16 + 8 * ((l / 8) & 1)]);
  float c[4] = {0.f, 0.f, 0.f, 0.f}, d[4];
  if constexpr (tl::is_same_v<T, half_t>) tl::mma_m16n8k16_f32_f16(d, a, b, c);
  else tl::mma_m16n8k16_f32_bf16(d, a, b, c);
  for (int i = 0; i < 4; ++i) C[(g + 8 * (i >> 1)) * 8 + 2 * q + (i & 1)] = d[i];
}

extern "C" __global__ void mma_f16(const half_t* A, const half_t* Bt, float* C) {
  mma16(A, Bt, C);
}
extern "C" __global__ void mma_bf16(const bfloat16_t* A, const bfloat16_t* Bt, float* C) {
  mma16(A, Bt, C);
}
extern "C" __global__ void mma_tf32(const float* A, const float* B, float* C) {  // A 16x8, B 8x8
  const int l = threadIdx.x, g = l >> 2, q = l & 3;
  uint32_t a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = tl::float_to_tf32(A[(g + 8 * (i & 1)) * 8 + q + 4 * (i >> 1)]);
  for (int i = 0; i < 2; ++i) b[i] = tl::float_to_tf32(B[(q + 4 * i) * 8 + g]);
  float c[4] = {0.f, 0.f, 0.f, 0.f}, d[4];
  tl::mma_m16n8k8_f32_tf32(d, a, b, c);
  for (int i = 0; i < 4; ++i) C[(g + 8 * (i >> 1)) * 8 + 2 * q + (i & 1)] = d[i];
}
extern "C" __global__ void mma_s8(const int8_t* A, const int8_t* Bt, int* C) {  // A 16x32, Bt 8x32
  const int l = threadIdx.x, g = l >> 2, q = l & 3;
  uint32_t a[4], b[2];
  for (int r = 0; r < 4; ++r)  // register r holds elements 4r..4r+3
    a[r] = *reinterpret_cast<const uint32_t*>(&A[(g + 8 * (r & 1)) * 32 + 4 * q + 16 * (r >> 1)]);
  for (int r = 0; r < 2; ++r)
    b[r] = *reinterpret_cast<const uint32_t*>(&Bt[g * 32 + 4 * q + 16 * r]);
  int c[4] = {0, 0, 0, 0}, d[4];
  tl::mma_m16n8k32_s32_s8(d, a, b, c);
  for (int i = 0; i < 4; ++i) C[(g + 8 * (i >> 1)) * 8 + 2 * q + (i & 1)] = d[i];
}
"""


def test_mma_fragments_match_hardware_tables():
    r = compile_cuda(MMA, arch())
    for name, dt in (("mma_f16", torch.float16), ("mma_bf16", torch.bfloat16)):
        fn = CudaKernelFunction(r.cubin, name, ["ptr"] * 3)
        A = torch.tensor(rng.integers(-8, 8, (16, 16)), dtype=dt, device=DEV)
        B = torch.tensor(rng.integers(-8, 8, (16, 8)), dtype=dt, device=DEV)
        C = torch.empty(16, 8, device=DEV)
        run(fn, (1, 1, 1), (32, 1, 1), [ptr(A), ptr(B.t().contiguous()), ptr(C)])
        assert torch.equal(C, A.float() @ B.float()), name
    fn = CudaKernelFunction(r.cubin, "mma_tf32", ["ptr"] * 3)
    A = torch.tensor(rng.integers(-8, 8, (16, 8)), dtype=torch.float32, device=DEV)
    B = torch.tensor(rng.integers(-8, 8, (8, 8)), dtype=torch.float32, device=DEV)
    C = torch.empty(16, 8, device=DEV)
    run(fn, (1, 1, 1), (32, 1, 1), [ptr(A), ptr(B), ptr(C)])
    assert torch.equal(C, A @ B)
    fn = CudaKernelFunction(r.cubin, "mma_s8", ["ptr"] * 3)
    A = torch.tensor(rng.integers(-128, 128, (16, 32)), dtype=torch.int8, device=DEV)
    B = torch.tensor(rng.integers(-128, 128, (32, 8)), dtype=torch.int8, device=DEV)
    C = torch.empty(16, 8, dtype=torch.int32, device=DEV)
    run(fn, (1, 1, 1), (32, 1, 1), [ptr(A), ptr(B.t().contiguous()), ptr(C)])
    assert torch.equal(C.cpu(), A.cpu().int() @ B.cpu().int())


CP_ASYNC = r"""
#include "tl.cuh"
extern "C" __global__ void cpa(const uint8_t* src, uint8_t* dst, const int* sizes) {
  __shared__ __align__(16) uint8_t s[3][32][16];
  const int t = threadIdx.x;
  for (int i = 0; i < 16; ++i) s[0][t][i] = s[1][t][i] = s[2][t][i] = 0xEE;
  __syncthreads();
  tl::cp_async_zfill<16>(&s[0][t][0], src + 16 * t, sizes[t] & 15 ? sizes[t] & 15 : 16 * (sizes[t] & 16) / 16);
  tl::cp_async_pred<8>(&s[1][t][0], src + 16 * t, t & 1);
  tl::cp_async<4>(&s[2][t][4], src + 16 * t + 4);
  tl::cp_async_commit();
  tl::cp_async_wait<0>();
  __syncthreads();
  for (int i = 0; i < 16; ++i) {
    dst[(0 * 32 + t) * 16 + i] = s[0][t][i];
    dst[(1 * 32 + t) * 16 + i] = s[1][t][i];
    dst[(2 * 32 + t) * 16 + i] = s[2][t][i];
  }
}
"""


def test_cp_async_copies_and_zero_fills():
    fn = build(CP_ASYNC, "cpa", ["ptr"] * 3)
    src = torch.tensor(rng.integers(1, 255, 32 * 16), dtype=torch.uint8, device=DEV)
    sizes = torch.tensor(rng.integers(0, 32, 32), dtype=torch.int32, device=DEV)
    dst = torch.empty(3 * 32 * 16, dtype=torch.uint8, device=DEV)
    run(fn, (1, 1, 1), (32, 1, 1), [ptr(src), ptr(dst), ptr(sizes)])
    s, d = src.cpu().numpy().reshape(32, 16), dst.cpu().numpy().reshape(3, 32, 16)
    for t, sz in enumerate(sizes.tolist()):
        k = sz & 15 if sz & 15 else 16 * (sz & 16) // 16
        assert list(d[0, t, :k]) == list(s[t, :k]) and not d[0, t, k:].any()
        if t & 1:
            assert list(d[1, t, :8]) == list(s[t, :8])
        else:
            assert not d[1, t, :8].any()
        assert (d[1, t, 8:] == 0xEE).all()
        assert list(d[2, t, 4:8]) == list(s[t, 4:8]) and (d[2, t, :4] == 0xEE).all()


TMA = r"""
#include "tl.cuh"
// Each block loads one 32 x 64 box of a half tensor with TMA (no swizzle or 128B swizzle),
// dumps the raw shared bytes, then stores box + 1 back with a TMA store.
extern "C" __global__ void tma_copy(const __grid_constant__ tl::TensorMap tin,
                                    const __grid_constant__ tl::TensorMap tout,
                                    half_t* raw) {
  extern __shared__ unsigned char dyn[];
  half_t* tile = reinterpret_cast<half_t*>(
      (reinterpret_cast<uintptr_t>(dyn) + 1023) & ~uintptr_t(1023));  // 1024-aligned
  __shared__ __align__(8) uint64_t bar;
  const int c0 = blockIdx.x * 64, c1 = blockIdx.y * 32;
  if (threadIdx.x == 0) {
    tl::prefetch_tma_descriptor(&tin);
    tl::mbarrier_init(&bar, 1);
    tl::fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    tl::mbarrier_arrive_expect_tx(&bar, 32 * 64 * sizeof(half_t));
    tl::tma_load(&tin, &bar, tile, c0, c1);
  }
  tl::mbarrier_wait(&bar, 0);
  half_t* out = raw + (blockIdx.y * gridDim.x + blockIdx.x) * 32 * 64;
  for (int i = threadIdx.x; i < 32 * 64; i += blockDim.x) out[i] = tile[i];
  __syncthreads();
  for (int i = threadIdx.x; i < 32 * 64; i += blockDim.x)
    tile[i] = tl::cast<half_t>(tl::cast<float>(tile[i]) + 1.0f);
  tl::fence_proxy_async();
  __syncthreads();
  if (threadIdx.x == 0) {
    tl::tma_store(&tout, tile, c0, c1);
    tl::tma_store_arrive();
    tl::tma_store_wait<0>();
  }
}
"""


@pytest.mark.skipif(sm() < 90, reason="TMA needs sm_90")
@pytest.mark.parametrize("swizzle", [0, 3])
def test_tma_load_store_and_swizzle(swizzle):
    fn = build(TMA, "tma_copy", ["tensor_map", "tensor_map", "ptr"])
    M, K = 100, 200  # ragged in both dimensions
    x = torch.tensor(rng.integers(-500, 500, (M, K)), dtype=torch.float16, device=DEV)
    y = torch.zeros(M, K, dtype=torch.float16, device=DEV)
    gx, gy = (K + 63) // 64, (M + 31) // 32
    raw = torch.full((gy, gx, 32, 64), 7.0, dtype=torch.float16, device=DEV)
    tin = encode_tiled_rowmajor("float16", ptr(x), (M, K), (K, 1), (32, 64), swizzle=swizzle)
    tout = encode_tiled_rowmajor("float16", ptr(y), (M, K), (K, 1), (32, 64), swizzle=swizzle)
    run(fn, (gx, gy, 1), (128, 1, 1), [tin, tout, ptr(raw)], smem=32 * 64 * 2 + 1024)
    padded = torch.zeros(gy * 32, gx * 64, dtype=torch.float16)
    padded[:M, :K] = x.cpu()
    raw = raw.cpu().view(torch.int16).numpy()
    for by in range(gy):
        for bx in range(gx):
            box = padded[by * 32:(by + 1) * 32, bx * 64:(bx + 1) * 64].view(torch.int16)
            got = raw[by, bx].reshape(-1)  # raw shared memory in 2-byte units
            for r in range(32):
                for c in range(0, 64, 8):  # one 16-byte chunk at a time
                    byte = r * 128 + c * 2
                    if swizzle == 3:
                        byte ^= (r & 7) << 4  # HARDWARE §4: chunk ^= row % 8
                    np.testing.assert_array_equal(got[byte // 2: byte // 2 + 8],
                                                  box[r, c:c + 8].numpy())
    assert torch.equal(y, x + 1)  # the store clipped the out-of-bounds part of each box


WGMMA = r"""
#include "tl.cuh"
// One warpgroup: D (64 x N, f32) = A (64 x 64) @ B^T, B stored N x 64, both bf16 K-major in
// shared memory with the 128B swizzle (HARDWARE §4/§6), four k16 steps of +32 bytes.
// RS variant: A comes from registers in the §5 A layout.
template <int N, bool RS>
__device__ void wg(const bfloat16_t* A, const bfloat16_t* B, float* D) {
  extern __shared__ unsigned char dyn[];
  unsigned char* base = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(dyn) + 1023) & ~uintptr_t(1023));
  unsigned char* sA = base;
  unsigned char* sB = base + 64 * 128;
  const int tid = threadIdx.x;
  for (int i = tid; i < 64 * 64; i += 128) {
    int m = i / 64, k = i % 64, byte = (m * 128 + 2 * k) ^ ((m & 7) << 4);
    *reinterpret_cast<bfloat16_t*>(sA + byte) = A[i];
  }
  for (int i = tid; i < N * 64; i += 128) {
    int n = i / 64, k = i % 64, byte = (n * 128 + 2 * k) ^ ((n & 7) << 4);
    *reinterpret_cast<bfloat16_t*>(sB + byte) = B[i];
  }
  tl::fence_proxy_async();
  __syncthreads();
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  uint64_t da = tl::make_smem_desc(sA, tl::WgmmaSwizzle::k128B, 16, 1024);
  uint64_t db = tl::make_smem_desc(sB, tl::WgmmaSwizzle::k128B, 16, 1024);
  const int w = tid >> 5, g = (tid & 31) >> 2, q = tid & 3;
  uint32_t a[4][4];
  if (RS) {
    for (int kb = 0; kb < 4; ++kb)
      for (int r = 0; r < 4; ++r) {  // register r = elements 2r, 2r+1
        int row = 16 * w + g + 8 * (r & 1), col = 16 * kb + 2 * q + 8 * (r >> 1);
        a[kb][r] = tl::pack_bf162(tl::cast<float>(A[row * 64 + col]),
                                  tl::cast<float>(A[row * 64 + col + 1]));
      }
  }
  tl::wgmma_fence_operands(d, N / 2);
  tl::wgmma_fence();
#pragma unroll
  for (int kb = 0; kb < 4; ++kb) {
    if (RS) tl::wgmma_rs<N, bfloat16_t>(d, a[kb], tl::smem_desc_advance(db, 32 * kb), 1);
    else tl::wgmma_ss<N, bfloat16_t>(d, tl::smem_desc_advance(da, 32 * kb),
                                     tl::smem_desc_advance(db, 32 * kb), kb > 0);
  }
  tl::wgmma_commit();
  tl::wgmma_wait<0>();
  tl::wgmma_fence_operands(d, N / 2);
  for (int r = 0; r < N / 2; ++r)
    D[(16 * w + g + 8 * ((r >> 1) & 1)) * N + 8 * (r >> 2) + 2 * q + (r & 1)] = d[r];
}
extern "C" __global__ void wg_ss_128(const bfloat16_t* A, const bfloat16_t* B, float* D) {
  wg<128, false>(A, B, D);
}
extern "C" __global__ void wg_ss_8(const bfloat16_t* A, const bfloat16_t* B, float* D) {
  wg<8, false>(A, B, D);
}
extern "C" __global__ void wg_rs_64(const bfloat16_t* A, const bfloat16_t* B, float* D) {
  wg<64, true>(A, B, D);
}
"""


@pytest.mark.skipif(arch() != "sm_90a", reason="wgmma needs sm_90a")
@pytest.mark.parametrize("name,n", [("wg_ss_128", 128), ("wg_ss_8", 8), ("wg_rs_64", 64)])
def test_wgmma_against_torch(name, n):
    r = compile_cuda(WGMMA, "sm_90a")
    fn = CudaKernelFunction(r.cubin, name, ["ptr"] * 3)
    A = torch.tensor(rng.integers(-8, 8, (64, 64)), dtype=torch.bfloat16, device=DEV)
    B = torch.tensor(rng.integers(-8, 8, (n, 64)), dtype=torch.bfloat16, device=DEV)
    D = torch.full((64, n), float("nan"), device=DEV)
    run(fn, (1, 1, 1), (128, 1, 1), [ptr(A), ptr(B), ptr(D)], smem=64 * 128 + n * 128 + 1024)
    assert torch.equal(D, A.float() @ B.float().t())
