// tl/mma.cuh — warp-level mma.sync wrappers (sm_80+; fp8 on sm_89+), HARDWARE §1.
//
// All shapes are .row.col (A row-major M x K, B column-major K x N). Operands are the
// per-lane fragment registers of HARDWARE §1's tables; D may alias C.
//
//   mma_m16n8k16_f32_f16 (float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4])
//   mma_m16n8k16_f32_bf16(float d[4], a[4], b[2], c[4])
//   mma_m16n8k16_f16_f16 (uint32_t d[2], a[4], b[2], const uint32_t c[2])   f16 accumulate
//   mma_m16n8k8_f32_tf32 (float d[4], a[4], b[2], c[4])
//   mma_m16n8k32_s32_s8  (int d[4], a[4], b[2], const int c[4])             satfinite
//   mma_m16n8k32_s32_u8  (int d[4], a[4], b[2], c[4])                       satfinite
//   mma_m16n8k64_s32_s4 / _u4 (int d[4], a[4], b[2], c[4])                  satfinite; a
//                        register holds 8 values (lower index in the lower bits), so the
//                        byte layout of an atom is that of m16n8k32 s8
//   mma_m16n8k32_f32_e4m3 / _e5m2 (float d[4], a[4], b[2], c[4])            sm_89+
//   mma_m16n8k32_f32_e4m3_e5m2 / _e5m2_e4m3                                mixed, sm_89+
#pragma once
#include "common.cuh"

namespace tl {

#define TL_MMA_F32_(NAME, TYPES)                                                            \
  TL_DEVICE void NAME(float* d, const uint32_t* a, const uint32_t* b, const float* c) {     \
    asm volatile("mma.sync.aligned." TYPES                                                  \
                 " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"   \
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                           \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),        \
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));                             \
  }

TL_MMA_F32_(mma_m16n8k16_f32_f16, "m16n8k16.row.col.f32.f16.f16.f32")
TL_MMA_F32_(mma_m16n8k16_f32_bf16, "m16n8k16.row.col.f32.bf16.bf16.f32")
TL_MMA_F32_(mma_m16n8k8_f32_tf32, "m16n8k8.row.col.f32.tf32.tf32.f32")
#if TL_HAVE_SM89
TL_MMA_F32_(mma_m16n8k32_f32_e4m3, "m16n8k32.row.col.f32.e4m3.e4m3.f32")
TL_MMA_F32_(mma_m16n8k32_f32_e5m2, "m16n8k32.row.col.f32.e5m2.e5m2.f32")
TL_MMA_F32_(mma_m16n8k32_f32_e4m3_e5m2, "m16n8k32.row.col.f32.e4m3.e5m2.f32")
TL_MMA_F32_(mma_m16n8k32_f32_e5m2_e4m3, "m16n8k32.row.col.f32.e5m2.e4m3.f32")
#endif
#undef TL_MMA_F32_

// f16 accumulate: C/D are 2 registers of f16x2.
TL_DEVICE void mma_m16n8k16_f16_f16(uint32_t* d, const uint32_t* a, const uint32_t* b,
                                    const uint32_t* c) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"
               " {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%8, %9};\n"
               : "=r"(d[0]), "=r"(d[1])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]),
                 "r"(c[1]));
}

#define TL_MMA_S32_(NAME, TYPES)                                                            \
  TL_DEVICE void NAME(int* d, const uint32_t* a, const uint32_t* b, const int* c) {         \
    asm volatile("mma.sync.aligned." TYPES                                                  \
                 " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"   \
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])                           \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),        \
                   "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));                             \
  }
TL_MMA_S32_(mma_m16n8k32_s32_s8, "m16n8k32.row.col.satfinite.s32.s8.s8.s32")
TL_MMA_S32_(mma_m16n8k32_s32_u8, "m16n8k32.row.col.satfinite.s32.u8.u8.s32")
TL_MMA_S32_(mma_m16n8k64_s32_s4, "m16n8k64.row.col.satfinite.s32.s4.s4.s32")
TL_MMA_S32_(mma_m16n8k64_s32_u4, "m16n8k64.row.col.satfinite.s32.u4.u4.s32")
#undef TL_MMA_S32_

// fp32 -> tf32 (round to nearest, ties away; the low 13 mantissa bits become 0).
TL_DEVICE uint32_t float_to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

}  // namespace tl
