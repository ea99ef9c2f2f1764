// tl/ptx_compat.cuh — T.ptx_ldmatrix / T.ptx_mma over per-thread element arrays (what the
// reference's intrinsics emitters issue; tilelang/language/ptx.py states their meaning).
//
//   tl::ptx_ldmatrix<N, Trans>(T* dst, const void* src)   N = 1, 2, 4 matrices; register i
//                                                         goes to dst[i * 4 / sizeof(T) ...]
//   tl::ptx_mma_m16n8k16_fp16_fp32(const half_t* a, const half_t* b, float* c)   c += a @ b
//   ... one per supported (shape, operand type, accumulator type), see below
//
// Registers and elements are exchanged with memcpy, so the element arrays need no 4-byte
// alignment; with constant offsets nvcc keeps everything in registers.
#pragma once
#include "common.cuh"
#include "ldmatrix.cuh"
#include "mma.cuh"

namespace tl {

template <int N, bool Trans, typename T>
TL_DEVICE void ptx_ldmatrix(T* dst, const void* src) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
  uint32_t r[N];
  if constexpr (N == 1) {
    if constexpr (Trans) ldmatrix_x1_trans(r, src); else ldmatrix_x1(r, src);
  } else if constexpr (N == 2) {
    if constexpr (Trans) ldmatrix_x2_trans(r, src); else ldmatrix_x2(r, src);
  } else {
    if constexpr (Trans) ldmatrix_x4_trans(r, src); else ldmatrix_x4(r, src);
  }
  memcpy(dst, r, sizeof(r));
}

// A (4 regs) and B (2 regs) from element arrays; C/D as the wrapper's register type.
#define TL_PTX_MMA_(NAME, MMA, TE, TC)                                                      \
  TL_DEVICE void NAME(const TE* a, const TE* b, TC* c) {                                    \
    uint32_t ra[4], rb[2];                                                                  \
    memcpy(ra, a, sizeof(ra));                                                              \
    memcpy(rb, b, sizeof(rb));                                                              \
    MMA(c, ra, rb, c);                                                                      \
  }

TL_PTX_MMA_(ptx_mma_m16n8k16_fp16_fp32, mma_m16n8k16_f32_f16, half_t, float)
TL_PTX_MMA_(ptx_mma_m16n8k16_bf16_fp32, mma_m16n8k16_f32_bf16, bfloat16_t, float)
TL_PTX_MMA_(ptx_mma_m16n8k32_int8_int32, mma_m16n8k32_s32_s8, signed char, int)
TL_PTX_MMA_(ptx_mma_m16n8k32_uint8_int32, mma_m16n8k32_s32_u8, unsigned char, int)
#if TL_HAVE_SM89
TL_PTX_MMA_(ptx_mma_m16n8k32_e4m3_fp32, mma_m16n8k32_f32_e4m3, fp8_e4_t, float)
TL_PTX_MMA_(ptx_mma_m16n8k32_e5m2_fp32, mma_m16n8k32_f32_e5m2, fp8_e5_t, float)
#endif
#undef TL_PTX_MMA_

// f16 accumulators: C/D are two f16x2 registers.
TL_DEVICE void ptx_mma_m16n8k16_fp16_fp16(const half_t* a, const half_t* b, half_t* c) {
  uint32_t ra[4], rb[2], rc[2];
  memcpy(ra, a, sizeof(ra));
  memcpy(rb, b, sizeof(rb));
  memcpy(rc, c, sizeof(rc));
  mma_m16n8k16_f16_f16(rc, ra, rb, rc);
  memcpy(c, rc, sizeof(rc));
}

// tf32: float32 operands rounded to TF32 (cvt.rna), as the interpreter does.
TL_DEVICE void ptx_mma_m16n8k8_tf32_fp32(const float* a, const float* b, float* c) {
  uint32_t ra[4], rb[2];
#pragma unroll
  for (int i = 0; i < 4; ++i) ra[i] = float_to_tf32(a[i]);
#pragma unroll
  for (int i = 0; i < 2; ++i) rb[i] = float_to_tf32(b[i]);
  mma_m16n8k8_f32_tf32(c, ra, rb, c);
}

}  // namespace tl
