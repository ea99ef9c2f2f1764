// tl/gemm_sp_sm80.cuh — block-level 2:4 structured-sparse GEMM on mma.sp (sm_80+):
// C (+)= op(A) @ op(B), A given as its kept values (M x K/2) and metadata E (T.gemm_sp).
//
// Warps, warp tiles and the accumulator registers are those of tl/gemm_sm80.cuh (tl::gemm_ss).
// Let k = MmaTraits<TA>::kK, the K of the dense mma for the element type (16 f16/bf16, 8 tf32,
// 32 8-bit). One mma.sp covers 2k of K (m16n8k32 / m16n8k16 / m16n8k64) and takes
//   A: the 16 x k tile of kept values, in the dense m16n8k A fragment layout (so a shared A is
//      read by gemm_sm80's load_a on the compressed tile, registers are tilelang.layout
//      .mma_a_fragment of the compressed M x K/2 tile);
//   B: the 2k x 8 tile as two dense k x 8 B fragments (registers: mma_b_fragment, M x K);
//   E: one 32-bit metadata register per lane, assembled from the 4-bit codes (one per group of
//      4 elements, of 2 for tf32) that E packs from the lowest bits of each integer up. With
//      lane = 4g + q and atom rows m0..m0+15, groups G = 2k/4 or 2k/2 per atom row from G*ks:
//        16/32-bit types (8 groups per row): bits 0-15 = the codes of row m0+g, groups
//          4*(q&1)..4*(q&1)+3; bits 16-31 = the same groups of row m0+g+8. Lanes q = 0, 1 are
//          the ones read (sparsity selector 0); q = 2, 3 hold copies.
//        8-bit types (16 groups per row): row m0 + g + 8*(q&1), groups 8*(q>>1)..8*(q>>1)+7.
//      A code of 0 (E zero-filled outside the tensor) becomes 0b0100: keep elements 0 and 1
//      (float32: element 0). The instruction leaves 0 undefined; interp/sparse.py gives it this
//      meaning too, so padded rows and K tails decompress to the zeros they hold.
//
// Operands A and B are described by SmemOperand<Trans, Rows, Cols, Swz> (a shared tile laid
// out as gemm_sm80's SmemTile, read from (r0, c0); Trans: stored K-major for A, N x K for B)
// or RegOperand (the thread's fragment registers; r0 and c0 unused). E is a shared tile of
// 8/16/32-bit integers, M x K/e or with TransE K/e x M.
#pragma once
#include "gemm_sm80.cuh"
#include "mma_sp.cuh"

namespace tl {

namespace detail {

template <typename T>
struct SpMmaTraits;  // per element type: the mma.sp of 2 * MmaTraits<T>::kK

#define TL_SP_TRAITS_(T, TC, FN)                                                          \
  template <>                                                                             \
  struct SpMmaTraits<T> {                                                                 \
    TL_DEVICE static void mma(TC* d, const uint32_t* a, const uint32_t* b, uint32_t e) {  \
      FN(d, a, b, d, e);                                                                  \
    }                                                                                     \
  };
TL_SP_TRAITS_(bfloat16_t, float, mma_sp_m16n8k32_f32_bf16)
TL_SP_TRAITS_(float, float, mma_sp_m16n8k16_f32_tf32)
TL_SP_TRAITS_(int8_t, int, mma_sp_m16n8k64_s32_s8)
TL_SP_TRAITS_(uint8_t, int, mma_sp_m16n8k64_s32_u8)
#if TL_HAVE_SM89
TL_SP_TRAITS_(fp8_e4_t, float, mma_sp_m16n8k64_f32_e4m3)
TL_SP_TRAITS_(fp8_e5_t, float, mma_sp_m16n8k64_f32_e5m2)
#endif
#undef TL_SP_TRAITS_
template <>
struct SpMmaTraits<half_t> {  // float32 or float16 accumulators
  TL_DEVICE static void mma(float* d, const uint32_t* a, const uint32_t* b, uint32_t e) {
    mma_sp_m16n8k32_f32_f16(d, a, b, d, e);
  }
  TL_DEVICE static void mma(half_t* d, const uint32_t* a, const uint32_t* b, uint32_t e) {
    uint32_t* r = reinterpret_cast<uint32_t*>(d);
    mma_sp_m16n8k32_f16_f16(r, a, b, r, e);
  }
};

template <int Bytes>
struct UnsignedOf;
template <>
struct UnsignedOf<1> { using type = uint8_t; };
template <>
struct UnsignedOf<2> { using type = uint16_t; };
template <>
struct UnsignedOf<4> { using type = uint32_t; };

// The bits of metadata element (row, col) of the logical M x K/e metadata.
template <typename TE, typename Tile, bool Trans>
TL_DEVICE uint32_t meta_bits(const TE* E, int r0, int c0, int row, int col) {
  const TE v = Trans ? E[Tile::offset(r0 + col, c0 + row)] : E[Tile::offset(r0 + row, c0 + col)];
  return uint32_t(bit_cast<typename UnsignedOf<sizeof(TE)>::type>(v));
}

// The Count (4 or 8) codes of groups g0 .. g0 + Count - 1 of a row (g0 a multiple of Count).
template <typename TE, typename Tile, bool Trans, int Count>
TL_DEVICE uint32_t meta_codes(const TE* E, int r0, int c0, int row, int g0) {
  constexpr int kPer = 2 * int(sizeof(TE));  // codes per metadata element
  if constexpr (kPer >= Count) {
    const uint32_t v = meta_bits<TE, Tile, Trans>(E, r0, c0, row, g0 / kPer) >> (4 * (g0 % kPer));
    return Count == 8 ? v : (v & 0xFFFFu);
  } else {
    uint32_t v = 0;
#pragma unroll
    for (int i = 0; i < Count / kPer; ++i)
      v |= meta_bits<TE, Tile, Trans>(E, r0, c0, row, g0 / kPer + i) << (4 * kPer * i);
    return v;
  }
}

// Codes 0 (padding) -> 0b0100.
TL_DEVICE uint32_t meta_fill_padding(uint32_t v) {
  uint32_t nonzero = v | (v >> 1);
  nonzero |= nonzero >> 2;  // bit 0 of each code: any of its bits set
  return v | ((~nonzero & 0x11111111u) << 2);
}

// The lane's metadata register for the atom at rows m0.. and sparse k-step ks.
template <typename TA, typename TE, typename Tile, bool Trans>
TL_DEVICE uint32_t load_meta(const TE* E, int r0, int c0, int m0, int ks, int lane) {
  const int g = lane >> 2, q = lane & 3;
  uint32_t v;
  if constexpr (sizeof(TA) == 1) {
    v = meta_codes<TE, Tile, Trans, 8>(E, r0, c0, m0 + g + 8 * (q & 1), 16 * ks + 8 * (q >> 1));
  } else {
    const int g0 = 8 * ks + 4 * (q & 1);
    v = meta_codes<TE, Tile, Trans, 4>(E, r0, c0, m0 + g, g0) |
        (meta_codes<TE, Tile, Trans, 4>(E, r0, c0, m0 + g + 8, g0) << 16);
  }
  return meta_fill_padding(v);
}

}  // namespace detail

template <bool Trans, int Rows, int Cols, int Swz>
struct SmemOperand {
  // The A fragment of the atom at rows m0.. (warp tile row mt) and sparse k-step ks.
  template <typename T, int KS>
  TL_DEVICE static void load_a(uint32_t* a, const T* base, int r0, int c0, int m0, int mt,
                               int ks, int lane) {
    detail::load_a<T, SmemTile<T, Rows, Cols, Swz>, Trans>(a, base, r0, c0, m0,
                                                           ks * detail::MmaTraits<T>::kK, lane);
  }
  // The B fragments of the NT atoms of a warp tile at columns n0.., sparse k-step ks.
  template <typename T, int NT, int KS>
  TL_DEVICE static void load_b(uint32_t (*b)[4], const T* base, int r0, int c0, int n0, int ks,
                               int lane) {
    using Tile = SmemTile<T, Rows, Cols, Swz>;
    constexpr int kK = detail::MmaTraits<T>::kK;
    uint32_t lo[NT][2], hi[NT][2];
    detail::load_b_row<T, Tile, Trans, NT>(lo, base, r0, c0, n0, 2 * ks * kK, lane);
    detail::load_b_row<T, Tile, Trans, NT>(hi, base, r0, c0, n0, (2 * ks + 1) * kK, lane);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      b[nt][0] = lo[nt][0]; b[nt][1] = lo[nt][1];
      b[nt][2] = hi[nt][0]; b[nt][3] = hi[nt][1];
    }
  }
};

struct RegOperand {
  // 4 registers of consecutive elements (copied bytewise: an 8-bit register array need not be
  // 4-byte aligned; in registers the copy is free)
  template <typename T>
  TL_DEVICE static void regs4(uint32_t* r, const T* src) {
    memcpy(r, src, 16);
    detail::to_tf32<T>(r, 4);
  }
  template <typename T, int KS>
  TL_DEVICE static void load_a(uint32_t* a, const T* regs, int, int, int, int mt, int ks, int) {
    constexpr int kElems = 16 * detail::MmaTraits<T>::kK / 32;  // per lane per 16 x k atom
    regs4(a, regs + kElems * (ks + KS * mt));
  }
  template <typename T, int NT, int KS>
  TL_DEVICE static void load_b(uint32_t (*b)[4], const T* regs, int, int, int, int ks, int) {
    constexpr int kElems = 8 * detail::MmaTraits<T>::kK / 32;  // per lane per k x 8 atom
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) regs4(b[nt], regs + kElems * (2 * ks + 2 * KS * nt));
  }
};

template <int M, int N, int K, int WM, int WN, typename OpA, typename OpB, bool TransE,
          int ERows, int ECols, int ESwz, typename TA, typename TE, typename TB, typename TC>
TL_DEVICE void gemm_sp(const TA* A, int a_r0, int a_c0, const TE* E, int e_r0, int e_c0,
                       const TB* B, int b_r0, int b_c0, TC* C, bool clear_accum, int tid) {
  constexpr int kSpK = 2 * detail::MmaTraits<TA>::kK;
  constexpr int WarpM = M / WM, WarpN = N / WN;
  constexpr int MT = WarpM / 16, NT = WarpN / 8, KS = K / kSpK;
  static_assert(M % (16 * WM) == 0 && N % (8 * WN) == 0, "warp tile must be whole mma atoms");
  static_assert(K % kSpK == 0, "K must be a multiple of the mma.sp atom's k");
  using TileE = SmemTile<TE, ERows, ECols, ESwz>;
  const int warp = tid >> 5, lane = tid & 31;
  const int wm = warp % WM, wn = warp / WM;
  if (clear_accum) detail::zero<TC, MT * NT * 4>(C);
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    uint32_t a[MT][4], e[MT], b[NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int m0 = wm * WarpM + mt * 16;
      OpA::template load_a<TA, KS>(a[mt], A, a_r0, a_c0, m0, mt, ks, lane);
      e[mt] = detail::load_meta<TA, TE, TileE, TransE>(E, e_r0, e_c0, m0, ks, lane);
    }
    OpB::template load_b<TB, NT, KS>(b, B, b_r0, b_c0, wn * WarpN, ks, lane);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
        detail::SpMmaTraits<TA>::mma(C + 4 * (nt + NT * mt), a[mt], b[nt], e[mt]);
    }
  }
}

}  // namespace tl
