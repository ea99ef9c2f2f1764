// tl/packed_x2.cuh — packed two-lane arithmetic (T.add2 ... T.abs2) on float2, __half2 and
// __nv_bfloat162, one packed instruction where the GPU has one.
//
//   tl::load_packed2<P>(p)        the two elements at p (aligned to sizeof(P)) as one P
//   tl::store_packed2<P>(p, v)    v into the two elements at p
//   tl::add2 / sub2 / mul2 / max2 / min2 (a, b), tl::fma2(a, b, c) (a * b + c, one rounding),
//   tl::abs2(a)                   lane-wise; max2 / min2 return the other lane's value where
//                                 one is NaN (fmaxf / __hmax2)
//
// half2: CUDA's __hadd2 ...; bfloat162: the same from sm_80, in float (rounded back) before. float2: the sm_100 f32x2 instructions (add/sub/mul/fma .rn.f32x2),
// two scalar operations before that.
#pragma once
#include "common.cuh"

namespace tl {

template <typename P, typename E>
TL_DEVICE P load_packed2(const E* p) {
  static_assert(sizeof(P) == 2 * sizeof(E), "load_packed2: P holds two elements");
  return *reinterpret_cast<const P*>(p);
}

template <typename P, typename E>
TL_DEVICE void store_packed2(E* p, P v) {
  static_assert(sizeof(P) == 2 * sizeof(E), "store_packed2: P holds two elements");
  *reinterpret_cast<P*>(p) = v;
}

#define TL_PACKED2_HALF_(P)                                                          \
  TL_DEVICE P add2(P a, P b) { return __hadd2(a, b); }                                \
  TL_DEVICE P sub2(P a, P b) { return __hsub2(a, b); }                                \
  TL_DEVICE P mul2(P a, P b) { return __hmul2(a, b); }                                \
  TL_DEVICE P fma2(P a, P b, P c) { return __hfma2(a, b, c); }                        \
  TL_DEVICE P max2(P a, P b) { return __hmax2(a, b); }                                \
  TL_DEVICE P min2(P a, P b) { return __hmin2(a, b); }                                \
  TL_DEVICE P abs2(P a) { return __habs2(a); }
TL_PACKED2_HALF_(__half2)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
// no bfloat16 arithmetic before sm_80: in float, rounded back
#define TL_BF2_(name, expr)                                                         \
  TL_DEVICE __nv_bfloat162 name(__nv_bfloat162 a2, __nv_bfloat162 b2) {             \
    float2 a = __bfloat1622float2(a2), b = __bfloat1622float2(b2);                  \
    return __floats2bfloat162_rn(expr(a.x, b.x), expr(a.y, b.y));                    \
  }
#define TL_ADD_(x, y) ((x) + (y))
#define TL_SUB_(x, y) ((x) - (y))
#define TL_MUL_(x, y) ((x) * (y))
TL_BF2_(add2, TL_ADD_)
TL_BF2_(sub2, TL_SUB_)
TL_BF2_(mul2, TL_MUL_)
TL_BF2_(max2, fmaxf)
TL_BF2_(min2, fminf)
#undef TL_ADD_
#undef TL_SUB_
#undef TL_MUL_
#undef TL_BF2_
TL_DEVICE __nv_bfloat162 fma2(__nv_bfloat162 a2, __nv_bfloat162 b2, __nv_bfloat162 c2) {
  float2 a = __bfloat1622float2(a2), b = __bfloat1622float2(b2), c = __bfloat1622float2(c2);
  return __floats2bfloat162_rn(fmaf(a.x, b.x, c.x), fmaf(a.y, b.y, c.y));
}
TL_DEVICE __nv_bfloat162 abs2(__nv_bfloat162 a2) {
  float2 a = __bfloat1622float2(a2);
  return __floats2bfloat162_rn(fabsf(a.x), fabsf(a.y));
}
#else
TL_PACKED2_HALF_(__nv_bfloat162)
#endif
#undef TL_PACKED2_HALF_

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define TL_F32X2_(name, op)                                                                  \
  TL_DEVICE float2 name(float2 a, float2 b) {                                               \
    unsigned long long r, x = *reinterpret_cast<unsigned long long*>(&a),                   \
                          y = *reinterpret_cast<unsigned long long*>(&b);                   \
    asm(op ".rn.f32x2 %0, %1, %2;\n" : "=l"(r) : "l"(x), "l"(y));                           \
    return *reinterpret_cast<float2*>(&r);                                                  \
  }
TL_F32X2_(add2, "add")
TL_F32X2_(sub2, "sub")
TL_F32X2_(mul2, "mul")
#undef TL_F32X2_
TL_DEVICE float2 fma2(float2 a, float2 b, float2 c) {
  unsigned long long r, x = *reinterpret_cast<unsigned long long*>(&a),
                        y = *reinterpret_cast<unsigned long long*>(&b),
                        z = *reinterpret_cast<unsigned long long*>(&c);
  asm("fma.rn.f32x2 %0, %1, %2, %3;\n" : "=l"(r) : "l"(x), "l"(y), "l"(z));
  return *reinterpret_cast<float2*>(&r);
}
#else
TL_DEVICE float2 add2(float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); }
TL_DEVICE float2 sub2(float2 a, float2 b) { return make_float2(a.x - b.x, a.y - b.y); }
TL_DEVICE float2 mul2(float2 a, float2 b) { return make_float2(a.x * b.x, a.y * b.y); }
TL_DEVICE float2 fma2(float2 a, float2 b, float2 c) {
  return make_float2(fmaf(a.x, b.x, c.x), fmaf(a.y, b.y, c.y));
}
#endif
TL_DEVICE float2 max2(float2 a, float2 b) { return make_float2(fmaxf(a.x, b.x), fmaxf(a.y, b.y)); }
TL_DEVICE float2 min2(float2 a, float2 b) { return make_float2(fminf(a.x, b.x), fminf(a.y, b.y)); }
TL_DEVICE float2 abs2(float2 a) { return make_float2(fabsf(a.x), fabsf(a.y)); }

}  // namespace tl
