// tl/gemm_sm90.cuh — block-level GEMM on wgmma (sm_90a): C (+)= op(A) @ op(B).
//
// The warpgroups of the block form a WGM x WGN grid (warpgroup g has gm = g % WGM,
// gn = g / WGM); warpgroup (gm, gn) computes rows {64*(gm + WGM*mr) .. +64 : mr < MR} and
// columns [gn*WN, (gn+1)*WN) with one m64 x WN x kK wgmma per (mr, k-step), WN = N / WGN.
// One wgmma reads 32 bytes of K: kK = 16 for f16/bf16, 32 for fp8 (e4m3/e5m2, any mix of A
// and B; both K-major, i.e. TransA = false and TransB = true, since 8-bit wgmma has no
// transpose).
//
// Register conventions (binding: tilelang/codegen/gemm_sm90.py builds the same Fragments):
//   C: register r = c + 4 * (nt + NT * mr), NT = WN / 8, holds
//        row = 64*(gm + WGM*mr) + 16*w + g + 8*(c>>1),  col = gn*WN + 8*nt + 2q + (c&1)
//      (w = warp in the warpgroup, lane = 4g + q): for each mr, the wgmma accumulator order.
//   A in registers (wgmma_gemm_rs): element i + 8 * (kt + KT * mr) holds
//        row = 64*(gm + WGM*mr) + 16*w + g + 8*((i>>1)&1),  col = 16*kt + 2q + (i&1) + 8*(i>>2)
//      which is the C order of a tile with N = K (an attention score tile feeds the next gemm).
//      fp8 A (16 elements per thread per k32 step, 4 per register): element i + 16 * (kt +
//      KT * mr) holds row = 64*(gm + WGM*mr) + 16*w + g + 8*((i>>2)&1),
//      col = 32*kt + 4q + (i&3) + 16*(i>>3).
//
// Shared operands use `SmemTile` layouts (tl/gemm_sm80.cuh) with a 32/64/128-byte swizzle,
// stored [column block][row][Swz bytes]; the tile base must be 1024-byte aligned (the planner
// aligns swizzled tiles). A K-major operand (A not transposed, B transposed) is described with
// SBO = 8 rows; an MN-major one (f16/bf16 only) with LBO = one column block, SBO = 8 rows.
//
// Generated kernels that define TL_WGMMA_SELECT (see tl/wgmma.cuh) get the 8-bit float
// wrappers only with TL_WGMMA_FP8; without it, an fp8 gemm is a static_assert.
#pragma once
#include "common.cuh"
#include "wgmma.cuh"
#if !defined(TL_WGMMA_SELECT) || defined(TL_WGMMA_FP8)
#include "wgmma_ops_fp8.cuh"
#else
namespace tl {
#if TL_HAVE_SM90A
template <int N, class TA, class TB, int ScaleA = 1, int ScaleB = 1>
TL_DEVICE void wgmma_ss_fp8(float*, uint64_t, uint64_t, int) {
  static_assert(N < 0, "8-bit wgmma wrappers left out (TL_WGMMA_SELECT without TL_WGMMA_FP8)");
}
template <int N, class TA, class TB, int ScaleA = 1, int ScaleB = 1>
TL_DEVICE void wgmma_rs_fp8(float*, const uint32_t*, uint64_t, int) {
  static_assert(N < 0, "8-bit wgmma wrappers left out (TL_WGMMA_SELECT without TL_WGMMA_FP8)");
}
#endif
}  // namespace tl
#endif

namespace tl {
namespace detail {

template <int Swz>
struct WgmmaSwzCode {
  static_assert(Swz == 32 || Swz == 64 || Swz == 128, "wgmma operands need a 32/64/128 B swizzle");
  static constexpr int value = Swz == 128 ? WgmmaSwizzle::k128B
                               : Swz == 64 ? WgmmaSwizzle::k64B : WgmmaSwizzle::k32B;
};

// The shared address a gemm builds its descriptors from, hidden from the compiler's value
// numbering by an empty volatile asm that "redefines" it: every gemm then builds its own
// descriptors next to its wgmmas (a few uniform-register instructions; the constant parts still
// fold). Left visible, the compiler computes the descriptors of a tile once for all the gemms
// that read it (the stages of an unrolled loop, an operand two gemms share) and hoists them out
// of the loop: up to one 64-bit value per k-step stays live in vector registers across
// everything between those gemms, and each wgmma first moves its pair into uniform registers
// (R2UR). Between the two gemms of an attention consumer that held the score tile's softmax at
// its register limit and spilled (the sparse MLA forward's consumer at 240 registers: 32 bytes
// of spills and 195 R2UR moves; built per gemm: no spill, no R2UR, 3192 -> 2984 instructions).
// TL_WGMMA_SHARED_DESC (the TL_EXPERIMENT switch `shared_wgmma_desc`, for an A/B timing)
// leaves the address visible.
TL_DEVICE uint32_t gemm_local_addr(uint32_t addr) {
#ifndef TL_WGMMA_SHARED_DESC
  asm volatile("" : "+r"(addr));
#endif
  return addr;
}

// Every sub-tile's descriptor is its tile base's (the same for all k-steps of an unrolled gemm,
// so computed once) advanced by the sub-tile's byte offset; building each from its own pointer
// took about ten instructions per wgmma.
template <int Swz>
TL_DEVICE uint64_t desc_at(const void* base, uint32_t lbo_bytes, uint32_t sbo_bytes, int byte) {
  return smem_desc_advance(make_smem_desc_addr(gemm_local_addr(smem_addr(base)),
                                               WgmmaSwzCode<Swz>::value, lbo_bytes, sbo_bytes),
                           byte);
}

// Descriptor of the operand sub-tile whose K-major rows start at tile row `r0` and whose
// k-range starts at element `k0` (K-major), for a tile of Rows rows of Swz-byte blocks.
template <typename T, int Rows, int Swz>
TL_HOST_DEVICE constexpr int kmajor_byte(int r0, int k0) {
  return (k0 * int(sizeof(T)) / Swz) * Rows * Swz + r0 * Swz + (k0 * int(sizeof(T)) % Swz);
}

template <typename T, int Rows, int Swz>
TL_DEVICE uint64_t desc_kmajor(const T* base, int r0, int k0) {
  return desc_at<Swz>(base, 16, 8 * Swz, kmajor_byte<T, Rows, Swz>(r0, k0));
}

// Bytes from a K-major sub-tile at column c0 to the one at c0 + k, and from an MN-major
// sub-tile at k row k0 to k0 + k: a gemm builds each operand's descriptor once at k = 0, where
// the runtime part enters (the warpgroup's slice: kmajor_byte is linear in the row), and
// advances it by these per k-step, constants when c0 is. Adding the runtime and the constant
// part before shifting them into the descriptor (each k-step's byte offset as a whole) cost a
// sign-extending shift and an add per wgmma (sparse_mla_bwd: 2248 -> 2208 SASS instructions).
template <typename T, int Rows, int Swz>
TL_HOST_DEVICE constexpr int kmajor_step(int c0, int k) {
  return kmajor_byte<T, Rows, Swz>(0, c0 + k) - kmajor_byte<T, Rows, Swz>(0, c0);
}

template <int Swz>
TL_HOST_DEVICE constexpr int mnmajor_step(int k) { return k * Swz; }

// Descriptor of an MN-major sub-tile: tile rows are k, columns are m/n; starts at k row `k0`
// and column `n0`.
template <typename T, int Rows, int Swz>
TL_DEVICE uint64_t desc_mnmajor(const T* base, int k0, int n0) {
  const int nb = n0 * int(sizeof(T));
  const int byte = (nb / Swz) * Rows * Swz + k0 * Swz + (nb % Swz);
  return desc_at<Swz>(base, Rows * Swz, 8 * Swz, byte);
}

// K elements one wgmma consumes (32 bytes of K-major operand).
template <typename T>
inline constexpr int kWgmmaK = 32 / int(sizeof(T));

// One m64 x N x kWgmmaK<TA> wgmma on f32 accumulators: f16/bf16 (transposes allowed) or fp8.
template <int N, int TransA, int TransB, typename TA, typename TB>
TL_DEVICE void wgmma_ss_any(float* d, uint64_t da, uint64_t db, int scale_d) {
  if constexpr (is_fp8_v<TA>) {
    static_assert(is_fp8_v<TB>, "wgmma: an fp8 A needs an fp8 B");
    static_assert(TransA == 0 && TransB == 0, "wgmma: fp8 operands must be K-major");
    wgmma_ss_fp8<N, TA, TB>(d, da, db, scale_d);
  } else {
    static_assert(is_same_v<TA, TB>, "wgmma: f16/bf16 operands must have one type");
    wgmma_ss<N, TA, 1, 1, TransA, TransB>(d, da, db, scale_d);
  }
}

template <int N, int TransB, typename TA, typename TB>
TL_DEVICE void wgmma_rs_any(float* d, const uint32_t* a, uint64_t db, int scale_d) {
  if constexpr (is_fp8_v<TA>) {
    static_assert(is_fp8_v<TB>, "wgmma: an fp8 A needs an fp8 B");
    static_assert(TransB == 0, "wgmma: fp8 operands must be K-major");
    wgmma_rs_fp8<N, TA, TB>(d, a, db, scale_d);
  } else {
    static_assert(is_same_v<TA, TB>, "wgmma: f16/bf16 operands must have one type");
    wgmma_rs<N, TA, 1, 1, TransB>(d, a, db, scale_d);
  }
}

}  // namespace detail

#if TL_HAVE_SM90A
// The warpgroup of thread `tid`, broadcast from lane 0 so that the compiler knows it is the
// same across the warp: the descriptors built from it then stay in uniform registers.
// Generated kernels compute it once, at the top (every thread there, all lanes converged),
// and pass it to every gemm.
TL_DEVICE int warpgroup_index(int tid) { return __shfl_sync(0xffffffffu, tid >> 7, 0); }

// FreshC: the gemm overwrites C (a clear known at compile time). C's registers are then
// redefined as unknown instead of pinned, so their old values die before the gemm and nothing
// zeroes them: the first wgmma of each row block has scale-d = 0.
template <bool FreshC, typename TC>
TL_DEVICE void fence_or_refresh(TC* C, int n) {
  if constexpr (FreshC) {
    wgmma_fresh_operands(C, n);
  } else {
    wgmma_fence_operands(C, n);
  }
}

// C (+)= op(A) @ op(B), A and B in shared memory. Returns after `wgmma.wait_group WgWait`:
// WgWait = 0 is synchronous (C complete); WgWait = 1 leaves this gemm in flight and only
// guarantees the previous one finished (a pipelined mainloop then waits once at the end);
// WgWait = -1 only commits (the caller waits with tl::wgmma_wait before touching C or A).
template <int M, int N, int K, int WGM, int WGN, bool TransA, bool TransB, int ARows, int ACols,
          int ASwz, int BRows, int BCols, int BSwz, int WgWait = 0, bool FreshC = false,
          typename TA, typename TB, typename TC>
TL_DEVICE void wgmma_gemm_ss(const TA* A, int a_r0, int a_c0, const TB* B, int b_r0, int b_c0,
                             TC* C, bool clear_accum, int wg) {
  constexpr int WN = N / WGN, MR = M / (64 * WGM), kRegs = WN / 2, kK = detail::kWgmmaK<TA>;
  static_assert(M % (64 * WGM) == 0 && N % WGN == 0 && WN % 8 == 0 && WN <= 256,
                "wgmma tile: M a multiple of 64 per warpgroup row, WN in 8..256 step 8");
  static_assert(K % kK == 0, "wgmma K step is 32 bytes (16 f16/bf16, 32 fp8 elements)");
  // `wg` < WGM * WGN (the gemm spans the role's warpgroups): a dimension of one warpgroup
  // needs no index, so a single-warpgroup gemm builds its descriptors from constants and
  // the loop counter only (uniform registers), not from the thread index
  const int gm = WGM == 1 ? 0 : wg % WGM, gn = WGN == 1 ? 0 : wg / WGM;
  fence_or_refresh<FreshC>(C, MR * kRegs);
  wgmma_fence();
  const uint64_t db0 = TransB ? detail::desc_kmajor<TB, BRows, BSwz>(B, b_r0 + gn * WN, b_c0)
                              : detail::desc_mnmajor<TB, BRows, BSwz>(B, b_r0, b_c0 + gn * WN);
#pragma unroll
  for (int mr = 0; mr < MR; ++mr) {
    const int m0 = 64 * (gm + WGM * mr);
    const uint64_t da0 = TransA ? detail::desc_mnmajor<TA, ARows, ASwz>(A, a_r0, a_c0 + m0)
                                : detail::desc_kmajor<TA, ARows, ASwz>(A, a_r0 + m0, a_c0);
#pragma unroll
    for (int k = 0; k < K; k += kK) {
      const uint64_t da = smem_desc_advance(
          da0, TransA ? detail::mnmajor_step<ASwz>(k) : detail::kmajor_step<TA, ARows, ASwz>(a_c0, k));
      const uint64_t db = smem_desc_advance(
          db0, TransB ? detail::kmajor_step<TB, BRows, BSwz>(b_c0, k) : detail::mnmajor_step<BSwz>(k));
      const int scale_d = ((FreshC || clear_accum) && k == 0) ? 0 : 1;
      detail::wgmma_ss_any<WN, TransA ? 1 : 0, TransB ? 0 : 1, TA, TB>(C + mr * kRegs, da, db,
                                                                     scale_d);
    }
  }
  wgmma_commit();
  if constexpr (WgWait >= 0) wgmma_wait<WgWait>();
  wgmma_fence_operands(C, MR * kRegs);
}

// C (+)= A @ op(B), A in registers (the layout in the header comment), B in shared memory.
template <int M, int N, int K, int WGM, int WGN, bool TransB, int BRows, int BCols, int BSwz,
          int WgWait = 0, bool FreshC = false, typename TA, typename TB, typename TC>
TL_DEVICE void wgmma_gemm_rs(const TA* A, const TB* B, int b_r0, int b_c0, TC* C,
                             bool clear_accum, int wg) {
  constexpr int kK = detail::kWgmmaK<TA>;
  constexpr int WN = N / WGN, MR = M / (64 * WGM), kRegs = WN / 2, KT = K / kK;
  static_assert(M % (64 * WGM) == 0 && N % WGN == 0 && WN % 8 == 0 && WN <= 256,
                "wgmma tile: M a multiple of 64 per warpgroup row, WN in 8..256 step 8");
  static_assert(K % kK == 0, "wgmma K step is 32 bytes (16 f16/bf16, 32 fp8 elements)");
  const int gn = WGN == 1 ? 0 : wg / WGM;  // as in wgmma_gemm_ss
  uint32_t* a_regs = const_cast<uint32_t*>(reinterpret_cast<const uint32_t*>(A));
  wgmma_fence_operands(a_regs, MR * KT * 4);
  fence_or_refresh<FreshC>(C, MR * kRegs);
  wgmma_fence();
  const uint64_t db0 = TransB ? detail::desc_kmajor<TB, BRows, BSwz>(B, b_r0 + gn * WN, b_c0)
                              : detail::desc_mnmajor<TB, BRows, BSwz>(B, b_r0, b_c0 + gn * WN);
#pragma unroll
  for (int mr = 0; mr < MR; ++mr) {
#pragma unroll
    for (int kt = 0; kt < KT; ++kt) {
      const int k = kK * kt;
      const uint64_t db = smem_desc_advance(
          db0, TransB ? detail::kmajor_step<TB, BRows, BSwz>(b_c0, k) : detail::mnmajor_step<BSwz>(k));
      const int scale_d = ((FreshC || clear_accum) && kt == 0) ? 0 : 1;
      // 4 registers = one k-step of A: 8 f16/bf16 or 16 fp8 elements
      detail::wgmma_rs_any<WN, TransB ? 0 : 1, TA, TB>(C + mr * kRegs, a_regs + 4 * (kt + KT * mr),
                                                      db, scale_d);
    }
  }
  wgmma_commit();
  if constexpr (WgWait >= 0) wgmma_wait<WgWait>();
  wgmma_fence_operands(C, MR * kRegs);
  wgmma_fence_operands(a_regs, MR * KT * 4);
}
#endif  // TL_HAVE_SM90A

}  // namespace tl
