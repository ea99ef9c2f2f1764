// tl/mma_sp.cuh — warp-level sparse mma wrappers (mma.sp, sm_80+; fp8 on sm_89+).
//
// A is 2:4 structured sparse (1:2 for tf32) along K: its fragment holds the kept values of a
// 16 x K tile (K/2 per row, in the dense mma's A layout for a 16 x K/2 tile), `e` the lane's
// metadata register (which lane holds which codes: tl/gemm_sp_sm80.cuh), read with sparsity
// selector 0. B is K x 8 in 4 registers: two dense K/2 x 8 B fragments, the first one for
// rows 0..K/2-1. All shapes are .row.col; D may alias C.
//
//   mma_sp_m16n8k32_f32_f16 (float d[4], const uint32_t a[4], const uint32_t b[4],
//                            const float c[4], uint32_t e)
//   mma_sp_m16n8k32_f16_f16 (uint32_t d[2], a[4], b[4], const uint32_t c[2], e)  f16 acc
//   mma_sp_m16n8k32_f32_bf16(float d[4], a[4], b[4], c[4], e)
//   mma_sp_m16n8k16_f32_tf32(float d[4], a[4], b[4], c[4], e)
//   mma_sp_m16n8k64_s32_s8 / _u8 (int d[4], a[4], b[4], const int c[4], e)      satfinite
//   mma_sp_m16n8k64_f32_e4m3 / _e5m2 (float d[4], a[4], b[4], c[4], e)          sm_89+
//
// The metadata's two indices per group increase (as compressors write them); compilers that
// know the ::ordered_metadata form (CUDA 12.5+), which states that, get it.
#pragma once
#include "common.cuh"

#if defined(__CUDACC_VER_MAJOR__) && \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 5))
#define TL_MMA_SP_ "mma.sp::ordered_metadata.sync.aligned."
#else
#define TL_MMA_SP_ "mma.sp.sync.aligned."
#endif

namespace tl {

#define TL_MMA_SP_4_(NAME, TYPES, T, REG)                                                    \
  TL_DEVICE void NAME(T* d, const uint32_t* a, const uint32_t* b, const T* c, uint32_t e) {  \
    asm volatile(TL_MMA_SP_ TYPES                                                            \
                 " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9, %10, %11},"                  \
                 " {%12, %13, %14, %15}, %16, 0x0;\n"                                        \
                 : "=" REG(d[0]), "=" REG(d[1]), "=" REG(d[2]), "=" REG(d[3])                \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),         \
                   "r"(b[2]), "r"(b[3]), REG(c[0]), REG(c[1]), REG(c[2]), REG(c[3]),         \
                   "r"(e));                                                                  \
  }

TL_MMA_SP_4_(mma_sp_m16n8k32_f32_f16, "m16n8k32.row.col.f32.f16.f16.f32", float, "f")
TL_MMA_SP_4_(mma_sp_m16n8k32_f32_bf16, "m16n8k32.row.col.f32.bf16.bf16.f32", float, "f")
TL_MMA_SP_4_(mma_sp_m16n8k16_f32_tf32, "m16n8k16.row.col.f32.tf32.tf32.f32", float, "f")
TL_MMA_SP_4_(mma_sp_m16n8k64_s32_s8, "m16n8k64.row.col.satfinite.s32.s8.s8.s32", int, "r")
TL_MMA_SP_4_(mma_sp_m16n8k64_s32_u8, "m16n8k64.row.col.satfinite.s32.u8.u8.s32", int, "r")
#if TL_HAVE_SM89
TL_MMA_SP_4_(mma_sp_m16n8k64_f32_e4m3, "m16n8k64.row.col.f32.e4m3.e4m3.f32", float, "f")
TL_MMA_SP_4_(mma_sp_m16n8k64_f32_e5m2, "m16n8k64.row.col.f32.e5m2.e5m2.f32", float, "f")
#endif
#undef TL_MMA_SP_4_

// f16 accumulate: C/D are 2 registers of f16x2.
TL_DEVICE void mma_sp_m16n8k32_f16_f16(uint32_t* d, const uint32_t* a, const uint32_t* b,
                                       const uint32_t* c, uint32_t e) {
  asm volatile(TL_MMA_SP_ "m16n8k32.row.col.f16.f16.f16.f16"
               " {%0, %1}, {%2, %3, %4, %5}, {%6, %7, %8, %9}, {%10, %11}, %12, 0x0;\n"
               : "=r"(d[0]), "=r"(d[1])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]),
                 "r"(b[3]), "r"(c[0]), "r"(c[1]), "r"(e));
}

}  // namespace tl
