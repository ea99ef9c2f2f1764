// tl/gemm_sm80.cuh — block-level GEMM on mma.sync (sm_80+): C (+)= op(A) @ op(B).
//
// The warps of the block form a WM x WN grid over the M x N tile (warp w has
// wm = w % WM, wn = w / WM); each warp computes a (M/WM) x (N/WN) sub-tile in m16n8 mma
// atoms, MT = (M/WM)/16 by NT = (N/WN)/8 of them.
//
// Register conventions (binding: tilelang/layout/mma.py describes the same maps):
//   C: register r = c + 4 * (nt + NT * mt) holds
//        row = wm*(M/WM) + mt*16 + g + 8*(c>>1),  col = wn*(N/WN) + nt*8 + 2q + (c&1)
//      with lane = 4g + q.
//   A in registers (gemm_rs, gemm_rr), 16-bit: element i + 8 * (kt + KT * mt) holds
//        row = wm*(M/WM) + mt*16 + g + 8*((i>>1)&1),  col = kt*16 + 2q + (i&1) + 8*(i>>2).
//   B in registers (gemm_sr, gemm_rr), 16-bit: element i + 4 * (kt + KT * nt) holds
//        k = kt*16 + 2q + (i&1) + 8*(i>>1),  n = wn*(N/WN) + nt*8 + g.
//   (other widths: tilelang.layout.mma_a_fragment / mma_b_fragment; an atom's elements are
//   always the instruction's 4 A / 2 B registers, in order.)
//
// Shared operands are tiles laid out by `SmemTile` (= tilelang.layout.swizzled): a
// Rows x Cols tile of T whose rows of Swz bytes (0: row-major) are XOR-swizzled in 16-byte
// chunks and stored column-block-major. The gemm reads the sub-tile starting at (r0, c0).
// A is stored M x K (K contiguous) or, with TransA, K x M; B is stored K x N or, with TransB,
// N x K. K-major 16-bit operands and every 8/32-bit K-major operand load with ldmatrix;
// MN-major 16-bit operands with ldmatrix.trans; MN-major 8/32-bit operands element-wise.
// gemm_fma_ss computes the same C on the CUDA cores (float64 operands; GPUs before sm_80).
// int4 / uint4 operands come as tiles of s4x2_t / u4x2_t (bytes of two values; K-major only,
// as the .s4 / .u4 instructions are): every size above counts bytes.
#pragma once
#include "common.cuh"
#include "ldmatrix.cuh"
#include "mma.cuh"

namespace tl {

template <typename T, int Rows, int Cols, int Swz>
struct SmemTile {
  static_assert(Swz == 0 || Swz == 32 || Swz == 64 || Swz == 128, "swizzle is 0/32/64/128 B");
  static constexpr int kEpc = 16 / int(sizeof(T));           // elements per 16-byte chunk
  static constexpr int kChunks = Swz / 16;                     // chunks per pattern row
  static constexpr int kBlk = Swz ? Swz / int(sizeof(T)) : Cols;  // elements per block row
  static_assert(Swz == 0 || Cols % kBlk == 0, "rows must be whole swizzle blocks");

  TL_HOST_DEVICE static constexpr int offset(int r, int c) {
    if constexpr (Swz == 0) {
      return r * Cols + c;
    } else {
      const int chunk = c / kEpc, e = c % kEpc;
      const int kb = chunk / kChunks, ch = chunk % kChunks;
      const int phase = Swz == 128 ? (r & 7) : Swz == 64 ? ((r >> 1) & 3) : ((r >> 2) & 1);
      return (kb * Rows + r) * kBlk + ((ch ^ phase) * kEpc) + e;
    }
  }

  // The shared address of (r + dr, c + dc) from the address of (r, c). The swizzle phase
  // repeats every 8 rows, so moving down a multiple of 8 rows adds a constant. Moving right by
  // dc (a multiple of two 16-byte chunks) from a column in chunk 0 or 1 of a block row changes
  // chunk bits the column does not use, so the swizzle's XOR of those bits is an XOR with a
  // constant. The tile starts at a multiple of 8 swizzle rows (plan_shared places swizzled
  // tiles so), so the XOR applies to the address itself, which a lane computes per call and
  // which changes with the pipeline stage: the compiler derives each atom's address where it
  // is used (one LOP3) instead of keeping one loop-invariant register per k-step
  // (FlashAttention on 4 warps spilled those).
  // `steps_from(c0)`: whether the steps may start from column c0 (+ the lane's chunk 0 or 1).
  TL_HOST_DEVICE static constexpr bool steps_from(int c0) { return Swz == 0 || c0 % kBlk == 0; }
  TL_DEVICE static uint32_t step_addr(uint32_t addr, int dr, int dc) {
    constexpr int B = int(sizeof(T));
    if constexpr (Swz == 0) {
      return addr + (dr * Cols + dc) * B;
    } else {
      const int dch = dc / kEpc;
      return ((addr + dr * kBlk * B) ^ ((dch % kChunks) * 16)) +
             (dch / kChunks) * Rows * kBlk * B;
    }
  }
};

// Two int4 / uint4 values of a packed tile (even index in the low nibble): the element type
// of T.gemm's packed operands, whose byte pointers tl::as_packed<s4x2_t / u4x2_t> re-types.
struct s4x2_t { signed char bits; };
struct u4x2_t { unsigned char bits; };
template <typename P>
TL_DEVICE const P* as_packed(const void* bytes) { return reinterpret_cast<const P*>(bytes); }

// A float32 register operand whose values are all TF32 numbers already (converted from
// bfloat16, float16, ...: transform/analysis/exact_values.py): the mma takes its registers as
// they are instead of rounding each one (to_tf32) every time it is read.
struct tf32_exact_t { float value; };
TL_DEVICE const tf32_exact_t* as_tf32_exact(const float* p) {
  return reinterpret_cast<const tf32_exact_t*>(p);
}

namespace detail {

template <typename T>
struct MmaTraits;  // per element type: k of one atom and the instruction

template <>
struct MmaTraits<half_t> {
  static constexpr int kK = 16;
  TL_DEVICE static void mma(float* d, const uint32_t* a, const uint32_t* b) {
    mma_m16n8k16_f32_f16(d, a, b, d);
  }
  TL_DEVICE static void mma(half_t* d, const uint32_t* a, const uint32_t* b) {
    uint32_t* r = reinterpret_cast<uint32_t*>(d);
    mma_m16n8k16_f16_f16(r, a, b, r);
  }
};
template <>
struct MmaTraits<bfloat16_t> {
  static constexpr int kK = 16;
  TL_DEVICE static void mma(float* d, const uint32_t* a, const uint32_t* b) {
    mma_m16n8k16_f32_bf16(d, a, b, d);
  }
};
template <>
struct MmaTraits<float> {
  static constexpr int kK = 8;
  TL_DEVICE static void mma(float* d, const uint32_t* a, const uint32_t* b) {
    mma_m16n8k8_f32_tf32(d, a, b, d);
  }
};
template <>
struct MmaTraits<tf32_exact_t> : MmaTraits<float> {};
template <>
struct MmaTraits<int8_t> {
  static constexpr int kK = 32;
  TL_DEVICE static void mma(int* d, const uint32_t* a, const uint32_t* b) {
    mma_m16n8k32_s32_s8(d, a, b, d);
  }
};
template <>
struct MmaTraits<uint8_t> {
  static constexpr int kK = 32;
  TL_DEVICE static void mma(int* d, const uint32_t* a, const uint32_t* b) {
    mma_m16n8k32_s32_u8(d, a, b, d);
  }
};
// Packed 4-bit integers: T is a byte of two values, so the tile geometry, the ldmatrix loads
// and K (kK = 32 bytes = 64 values) count bytes; only the instruction differs from int8.
template <>
struct MmaTraits<s4x2_t> {
  static constexpr int kK = 32;
  TL_DEVICE static void mma(int* d, const uint32_t* a, const uint32_t* b) {
    mma_m16n8k64_s32_s4(d, a, b, d);
  }
};
template <>
struct MmaTraits<u4x2_t> {
  static constexpr int kK = 32;
  TL_DEVICE static void mma(int* d, const uint32_t* a, const uint32_t* b) {
    mma_m16n8k64_s32_u4(d, a, b, d);
  }
};
#if TL_HAVE_SM89
template <>
struct MmaTraits<fp8_e4_t> {
  static constexpr int kK = 32;
  TL_DEVICE static void mma(float* d, const uint32_t* a, const uint32_t* b) {
    mma_m16n8k32_f32_e4m3(d, a, b, d);
  }
};
template <>
struct MmaTraits<fp8_e5_t> {
  static constexpr int kK = 32;
  TL_DEVICE static void mma(float* d, const uint32_t* a, const uint32_t* b) {
    mma_m16n8k32_f32_e5m2(d, a, b, d);
  }
};
#endif

template <typename T>
TL_DEVICE uint32_t pack_elems(const T* p) {  // 4 bytes of consecutive elements
  return *reinterpret_cast<const uint32_t*>(p);
}

template <typename T>
TL_DEVICE void to_tf32(uint32_t* r, int n) {  // float operands only (not tf32_exact_t)
  if constexpr (is_same_v<T, float>) {
#pragma unroll
    for (int i = 0; i < n; ++i) r[i] = float_to_tf32(__uint_as_float(r[i]));
  }
}

// Bytes per element pair packed in one 32-bit register: 16-bit types hold 2, 8-bit 4, 32-bit 1.
template <typename T>
struct Pack {
  static constexpr int kPerReg = 4 / int(sizeof(T));
};

// Gather P consecutive elements (along the stored tile's row index) into one register.
template <typename T, typename Tile>
TL_DEVICE uint32_t gather(const T* base, int row, int col, int step_rows) {
  constexpr int P = Pack<T>::kPerReg;
  uint32_t v = 0;
#pragma unroll
  for (int e = 0; e < P; ++e) {
    T x = base[Tile::offset(row + e * step_rows, col)];
    uint32_t bits;
    if constexpr (sizeof(T) == 4) bits = *reinterpret_cast<uint32_t*>(&x);
    else bits = *reinterpret_cast<uint8_t*>(&x);
    v |= bits << (8 * int(sizeof(T)) * e);
  }
  return v;
}

// The A fragment (4 registers) of the 16 x kK atom at logical (m0, k0). The tile stores
// A[m][k] at (r0 + m, c0 + k), or with Trans at (r0 + k, c0 + m).
template <typename T, typename Tile, bool Trans>
TL_DEVICE void load_a(uint32_t* a, const T* base, int r0, int c0, int m0, int k0, int lane) {
  constexpr int kK = MmaTraits<T>::kK;
  const int j = lane >> 3;  // the 8x(16 bytes) matrix this lane addresses
  if constexpr (!Trans) {
    // matrices: (m half j&1, k half j>>1); a k half is 16 bytes (m0 % 16 == 0, k0 is 32 bytes)
    const int m = (lane & 7) + 8 * (j & 1);
    const int k = (16 / int(sizeof(T))) * (j >> 1);
    if (Tile::steps_from(c0))
      ldmatrix_x4(a, Tile::step_addr(smem_addr(base + Tile::offset(r0 + m, c0 + k)), m0, k0));
    else
      ldmatrix_x4(a, base + Tile::offset(r0 + m0 + m, c0 + k0 + k));
    to_tf32<T>(a, 4);
  } else if constexpr (sizeof(T) == 2) {
    // MN-major 16-bit: transposed 8x8 matrices, same (m half, k half) order
    const int k = 8 * (j >> 1) + (lane & 7);
    const int m = 8 * (j & 1);
    if (Tile::steps_from(c0))
      ldmatrix_x4_trans(a, Tile::step_addr(smem_addr(base + Tile::offset(r0 + k, c0 + m)), k0,
                                           m0));
    else
      ldmatrix_x4_trans(a, base + Tile::offset(r0 + k0 + k, c0 + m0 + m));
  } else {
    // MN-major 8/32-bit: element-wise in the mma A layout (rows g / g+8, k halves)
    const int g = lane >> 2, q = lane & 3;
    constexpr int P = Pack<T>::kPerReg;
#pragma unroll
    for (int reg = 0; reg < 4; ++reg) {
      const int m = m0 + g + 8 * (reg & 1);
      const int k = k0 + (kK / 2) * (reg >> 1) + P * q;
      a[reg] = gather<T, Tile>(base, r0 + k, c0 + m, 1);
    }
    to_tf32<T>(a, 4);
  }
}

// The B fragment (2 registers) of the kK x 8 atom at logical (k0, n0). The tile stores B[k][n]
// at (r0 + k, c0 + n), or with Trans at (r0 + n, c0 + k). `pair` loads atoms n0 and n0 + 8.
template <typename T, typename Tile, bool Trans, bool Pair>
TL_DEVICE void load_b(uint32_t* b0, uint32_t* b1, const T* base, int r0, int c0, int n0, int k0,
                      int lane) {
  constexpr int kK = MmaTraits<T>::kK;
  const int j = lane >> 3;
  if constexpr (Trans) {
    // K-major: matrices (n half j>>1, k half j&1) -> b0[0], b0[1], b1[0], b1[1]
    const int n = (lane & 7) + (Pair ? 8 * (j >> 1) : 0);
    const int k = (16 / int(sizeof(T))) * (j & 1);
    const uint32_t addr = Tile::steps_from(c0) && n0 % 8 == 0
        ? Tile::step_addr(smem_addr(base + Tile::offset(r0 + n, c0 + k)), n0, k0)
        : smem_addr(base + Tile::offset(r0 + n0 + n, c0 + k0 + k));
    uint32_t r[4];
    if constexpr (Pair) {
      ldmatrix_x4(r, addr);
      b1[0] = r[2]; b1[1] = r[3];
    } else {
      ldmatrix_x2(r, addr);
    }
    b0[0] = r[0]; b0[1] = r[1];
    to_tf32<T>(b0, 2);
    if constexpr (Pair) to_tf32<T>(b1, 2);
  } else if constexpr (sizeof(T) == 2) {
    // N-major 16-bit: transposed; lanes 0-15 address k rows at n0, lanes 16-31 at n0 + 8
    const int k = lane & 15;
    const int n = Pair ? 8 * (lane >> 4) : 0;
    const uint32_t addr = Tile::steps_from(c0) && n0 % 16 == 0
        ? Tile::step_addr(smem_addr(base + Tile::offset(r0 + k, c0 + n)), k0, n0)
        : smem_addr(base + Tile::offset(r0 + k0 + k, c0 + n0 + n));
    uint32_t r[4];
    if constexpr (Pair) {
      ldmatrix_x4_trans(r, addr);
      b1[0] = r[2]; b1[1] = r[3];
    } else {
      ldmatrix_x2_trans(r, addr);
    }
    b0[0] = r[0]; b0[1] = r[1];
  } else {
    const int g = lane >> 2, q = lane & 3;
    constexpr int P = Pack<T>::kPerReg;
#pragma unroll
    for (int t = 0; t < (Pair ? 2 : 1); ++t) {
      uint32_t* out = t == 0 ? b0 : b1;
#pragma unroll
      for (int reg = 0; reg < 2; ++reg) {
        const int k = k0 + (kK / 2) * reg + P * q;
        out[reg] = gather<T, Tile>(base, r0 + k, c0 + n0 + 8 * t + g, 1);
      }
      to_tf32<T>(out, 2);
    }
  }
}

// All B atoms of a warp tile row of NT atoms at n-origin nbase.
template <typename T, typename Tile, bool Trans, int NT>
TL_DEVICE void load_b_row(uint32_t (*b)[2], const T* base, int r0, int c0, int nbase, int k0,
                          int lane) {
#pragma unroll
  for (int nt = 0; nt + 1 < NT; nt += 2)
    load_b<T, Tile, Trans, true>(b[nt], b[nt + 1], base, r0, c0, nbase + nt * 8, k0, lane);
  if constexpr (NT % 2)
    load_b<T, Tile, Trans, false>(b[NT - 1], b[NT - 1], base, r0, c0, nbase + (NT - 1) * 8, k0,
                                  lane);
}

template <typename TC, int N>
TL_DEVICE void zero(TC* c) {
#pragma unroll
  for (int i = 0; i < N; ++i) c[i] = TC(0);
}

}  // namespace detail

// C (+)= op(A) @ op(B) with A and B in shared memory.
template <int M, int N, int K, int WM, int WN, bool TransA, bool TransB, int ARows, int ACols,
          int ASwz, int BRows, int BCols, int BSwz, typename TA, typename TB, typename TC>
TL_DEVICE void gemm_ss(const TA* A, int a_r0, int a_c0, const TB* B, int b_r0, int b_c0, TC* C,
                       bool clear_accum, int tid) {
  using Traits = detail::MmaTraits<TA>;
  constexpr int kK = Traits::kK;
  constexpr int WarpM = M / WM, WarpN = N / WN;
  constexpr int MT = WarpM / 16, NT = WarpN / 8;
  static_assert(M % (16 * WM) == 0 && N % (8 * WN) == 0, "warp tile must be whole mma atoms");
  static_assert(K % kK == 0, "K must be a multiple of the mma atom's k");
  using TileA = SmemTile<TA, ARows, ACols, ASwz>;
  using TileB = SmemTile<TB, BRows, BCols, BSwz>;
  const int warp = tid >> 5, lane = tid & 31;
  const int wm = warp % WM, wn = warp / WM;
  if (clear_accum) detail::zero<TC, MT * NT * 4>(C);
#pragma unroll
  for (int k = 0; k < K; k += kK) {
    uint32_t a[MT][4];
    uint32_t b[NT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      detail::load_a<TA, TileA, TransA>(a[mt], A, a_r0, a_c0, wm * WarpM + mt * 16, k, lane);
    detail::load_b_row<TB, TileB, TransB, NT>(b, B, b_r0, b_c0, wn * WarpN, k, lane);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        Traits::mma(C + 4 * (nt + NT * mt), a[mt], b[nt]);
      }
    }
  }
}

// C (+)= op(A) @ op(B) on the CUDA cores (one multiply-add per element and k), for operand
// types without an mma.sync atom here (float64) and GPUs before sm_80. Each lane owns the
// accumulator elements of the mma layout above (register r = c + 4 * (nt + NT * mt)), so the
// layout of C is that of gemm_ss and nothing else changes. Products are formed in TC.
template <int M, int N, int K, int WM, int WN, bool TransA, bool TransB, int ARows, int ACols,
          int ASwz, int BRows, int BCols, int BSwz, typename TA, typename TB, typename TC>
TL_DEVICE void gemm_fma_ss(const TA* A, int a_r0, int a_c0, const TB* B, int b_r0, int b_c0,
                           TC* C, bool clear_accum, int tid) {
  constexpr int WarpM = M / WM, WarpN = N / WN;
  constexpr int MT = WarpM / 16, NT = WarpN / 8;
  static_assert(M % (16 * WM) == 0 && N % (8 * WN) == 0, "warp tile must be whole mma atoms");
  using TileA = SmemTile<TA, ARows, ACols, ASwz>;
  using TileB = SmemTile<TB, BRows, BCols, BSwz>;
  const int warp = tid >> 5, lane = tid & 31;
  const int wm = warp % WM, wn = warp / WM, g = lane >> 2, q = lane & 3;
  if (clear_accum) detail::zero<TC, MT * NT * 4>(C);
#pragma unroll 1
  for (int k = 0; k < K; ++k) {
    TC a[MT][2], b[NT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = wm * WarpM + mt * 16 + g + 8 * h;
        a[mt][h] = TC(TransA ? A[TileA::offset(a_r0 + k, a_c0 + row)]
                             : A[TileA::offset(a_r0 + row, a_c0 + k)]);
      }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int col = wn * WarpN + nt * 8 + 2 * q + j;
        b[nt][j] = TC(TransB ? B[TileB::offset(b_r0 + col, b_c0 + k)]
                             : B[TileB::offset(b_r0 + k, b_c0 + col)]);
      }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          TC& acc = C[c + 4 * (nt + NT * mt)];
          acc = acc + a[mt][c >> 1] * b[nt][c & 1];
        }
  }
}

// C (+)= A @ op(B) with A in registers (the mma A layout above) and B in shared memory.
template <int M, int N, int K, int WM, int WN, bool TransB, int BRows, int BCols, int BSwz,
          typename TA, typename TB, typename TC>
TL_DEVICE void gemm_rs(const TA* A, const TB* B, int b_r0, int b_c0, TC* C, bool clear_accum,
                       int tid) {
  using Traits = detail::MmaTraits<TA>;
  constexpr int kK = Traits::kK;
  constexpr int WarpM = M / WM, WarpN = N / WN;
  constexpr int MT = WarpM / 16, NT = WarpN / 8, KT = K / kK;
  constexpr int kElemsPerAtom = 16 * kK / 32;  // A elements per lane per 16 x kK atom
  static_assert(M % (16 * WM) == 0 && N % (8 * WN) == 0, "warp tile must be whole mma atoms");
  using TileB = SmemTile<TB, BRows, BCols, BSwz>;
  const int warp = tid >> 5, lane = tid & 31;
  const int wn = warp / WM;
  if (clear_accum) detail::zero<TC, MT * NT * 4>(C);
#pragma unroll
  for (int kt = 0; kt < KT; ++kt) {
    const int k = kt * kK;
    uint32_t b[NT][2];
    detail::load_b_row<TB, TileB, TransB, NT>(b, B, b_r0, b_c0, wn * WarpN, k, lane);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      uint32_t a[4];
      const TA* src = A + kElemsPerAtom * (kt + KT * mt);
#pragma unroll
      for (int r = 0; r < 4; ++r) a[r] = reinterpret_cast<const uint32_t*>(src)[r];
      detail::to_tf32<TA>(a, 4);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) Traits::mma(C + 4 * (nt + NT * mt), a, b[nt]);
    }
  }
}

namespace detail {
// The 4 A registers of atom (kt, mt) / the 2 B registers of atom (kt, nt) of a register
// operand (the layouts above), converted to tf32 for 32-bit types.
template <typename T, int KT>
TL_DEVICE void a_regs(uint32_t* a, const T* A, int kt, int mt) {
  constexpr int kElems = 16 * MmaTraits<T>::kK / 32;
  const uint32_t* src = reinterpret_cast<const uint32_t*>(A + kElems * (kt + KT * mt));
#pragma unroll
  for (int r = 0; r < 4; ++r) a[r] = src[r];
  to_tf32<T>(a, 4);
}
template <typename T, int KT>
TL_DEVICE void b_regs(uint32_t* b, const T* B, int kt, int nt) {
  constexpr int kElems = 8 * MmaTraits<T>::kK / 32;
  const uint32_t* src = reinterpret_cast<const uint32_t*>(B + kElems * (kt + KT * nt));
  b[0] = src[0];
  b[1] = src[1];
  to_tf32<T>(b, 2);
}
}  // namespace detail

// C (+)= op(A) @ B with A in shared memory and B in registers (the mma B layout above).
template <int M, int N, int K, int WM, int WN, bool TransA, int ARows, int ACols, int ASwz,
          typename TA, typename TB, typename TC>
TL_DEVICE void gemm_sr(const TA* A, int a_r0, int a_c0, const TB* B, TC* C, bool clear_accum,
                       int tid) {
  using Traits = detail::MmaTraits<TA>;
  constexpr int kK = Traits::kK;
  constexpr int WarpM = M / WM, WarpN = N / WN;
  constexpr int MT = WarpM / 16, NT = WarpN / 8, KT = K / kK;
  static_assert(M % (16 * WM) == 0 && N % (8 * WN) == 0, "warp tile must be whole mma atoms");
  static_assert(K % kK == 0, "K must be a multiple of the mma atom's k");
  using TileA = SmemTile<TA, ARows, ACols, ASwz>;
  const int warp = tid >> 5, lane = tid & 31;
  const int wm = warp % WM;
  if (clear_accum) detail::zero<TC, MT * NT * 4>(C);
#pragma unroll
  for (int kt = 0; kt < KT; ++kt) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      detail::load_a<TA, TileA, TransA>(a[mt], A, a_r0, a_c0, wm * WarpM + mt * 16, kt * kK,
                                        lane);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint32_t b[2];
      detail::b_regs<TB, KT>(b, B, kt, nt);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) Traits::mma(C + 4 * (nt + NT * mt), a[mt], b);
    }
  }
}

// C (+)= A @ B with both operands in registers.
template <int M, int N, int K, int WM, int WN, typename TA, typename TB, typename TC>
TL_DEVICE void gemm_rr(const TA* A, const TB* B, TC* C, bool clear_accum, int tid) {
  using Traits = detail::MmaTraits<TA>;
  constexpr int kK = Traits::kK;
  constexpr int WarpM = M / WM, WarpN = N / WN;
  constexpr int MT = WarpM / 16, NT = WarpN / 8, KT = K / kK;
  static_assert(M % (16 * WM) == 0 && N % (8 * WN) == 0, "warp tile must be whole mma atoms");
  static_assert(K % kK == 0, "K must be a multiple of the mma atom's k");
  (void)tid;
  if (clear_accum) detail::zero<TC, MT * NT * 4>(C);
#pragma unroll
  for (int kt = 0; kt < KT; ++kt) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      uint32_t a[4];
      detail::a_regs<TA, KT>(a, A, kt, mt);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        uint32_t b[2];
        detail::b_regs<TB, KT>(b, B, kt, nt);
        Traits::mma(C + 4 * (nt + NT * mt), a, b);
      }
    }
  }
}

}  // namespace tl
