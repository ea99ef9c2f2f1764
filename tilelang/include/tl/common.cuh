// tl/common.cuh — types, macros and conversions every other header builds on.
//
// Provides:
//   TL_DEVICE / TL_HOST_DEVICE        inline qualifiers for device helpers
//   TL_SM90 / TL_SM90A                1 when compiling device code for sm_90+ / sm_90a
//   half_t, bfloat16_t, fp8_e4_t, fp8_e5_t   (global and in tl::) = __half, __nv_bfloat16,
//                                     __nv_fp8_e4m3, __nv_fp8_e5m2
//   fp4_e2_t                          one float4_e2m1fn value (low nibble of a byte);
//                                     tl::fp4_load / tl::fp4_store address one value of a
//                                     tensor packed two to a byte (even index: low nibble)
//   tl::wrap_s4 / wrap_u4, store_nibble int4 / uint4 values (a byte in registers) and the
//                                     atomic store of one nibble of packed memory
//   int8_t..uint64_t                  (NVRTC has no <cstdint>; defined here under __CUDACC_RTC__)
//   tl::bit_cast<To>(x)               same-size reinterpretation
//   tl::cast<To>(x)                   value conversion between every scalar type (round to
//                                     nearest even; fp8 saturates to the largest finite value)
//   tl::vec<T, N>                     N elements of T, aligned for one vector access;
//                                     elementwise + - * /, tl::broadcast<T, N>(x)
//   packed conversions                float2 <-> half2 / bfloat162, float2 -> fp8x2;
//                                     tl::store_pair(dst, pair) stores a pair's two values
//   tl::device_assert(cond, msg)      prints and traps when cond is false
//   tl::TensorMap                     the 128-byte CUtensorMap, for __grid_constant__ params
#pragma once

#ifdef __CUDACC_RTC__
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef unsigned long long uintptr_t;
#else
#include <cstdint>
#include <cstdio>   // printf (NVRTC declares it built in)
#include <cstring>  // memcpy
#endif
// the short names CUDA sources written for the reference use (its generated code declares them)
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <math_constants.h>

#define TL_DEVICE __device__ __forceinline__
#define TL_HOST_DEVICE __host__ __device__ __forceinline__
#define TL_COMMA ,  // a comma inside one macro argument

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TL_SM90 1
#else
#define TL_SM90 0
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TL_SM90A 1
#else
#define TL_SM90A 0
#endif
// Device-only helpers that need an architecture are defined when compiling device code for it,
// and also in nvcc's host pass (which parses kernels but emits no device code).
#if !defined(__CUDA_ARCH__) || TL_SM90
#define TL_HAVE_SM90 1
#else
#define TL_HAVE_SM90 0
#endif
#if !defined(__CUDA_ARCH__) || TL_SM90A
#define TL_HAVE_SM90A 1
#else
#define TL_HAVE_SM90A 0
#endif
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
#define TL_HAVE_SM89 1
#else
#define TL_HAVE_SM89 0
#endif

using half_t = __half;
using bfloat16_t = __nv_bfloat16;
using fp8_e4_t = __nv_fp8_e4m3;
using fp8_e5_t = __nv_fp8_e5m2;
// float4_e2m1fn (sign, 2 exponent bits, 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their
// negatives; no inf, no NaN). Our own type, not cuda_fp4.h's, so that every supported
// toolkit compiles it; conversions are tl::cast.
struct fp4_e2_t {
  unsigned char bits;  // the code in the low nibble
};
// float8_e8m0fnu, the MX formats' scale: 2^(code - 127); code 255 is NaN; no sign, no zero.
// Converted as torch converts (the float32 exponent, rounded up when the first dropped
// mantissa bit is set, ties of a subnormal to even; inf / NaN / overflow -> NaN, the sign
// dropped), read as float like CUDA's fp8 classes.
struct fp8_e8_t {
  unsigned char bits;
  fp8_e8_t() = default;
  TL_DEVICE explicit fp8_e8_t(float x) {
    unsigned int b = __float_as_uint(x), e = (b >> 23) & 0xFFu;
    bool up = (b & 0x400000u) && ((b & 0x3FFFFFu) || e > 0);
    bits = (unsigned char)(e == 0xFFu ? 0xFFu : e + (up ? 1u : 0u));  // 254 + 1: NaN
  }
  TL_DEVICE explicit fp8_e8_t(double x) : fp8_e8_t((float)x) {}
  TL_DEVICE operator float() const {
    return bits == 0xFF ? __uint_as_float(0x7FC00000u)
                        : bits ? __uint_as_float((unsigned int)bits << 23) : 0x1p-127f;
  }
};

namespace tl {

using ::half_t;
using ::bfloat16_t;
using ::fp8_e4_t;
using ::fp8_e5_t;
using ::fp4_e2_t;
using ::fp8_e8_t;

// ---- minimal type traits (NVRTC has no <type_traits> without the CCCL headers) ------------
template <class A, class B> struct is_same { static constexpr bool value = false; };
template <class A> struct is_same<A, A> { static constexpr bool value = true; };
template <class A, class B> inline constexpr bool is_same_v = is_same<A, B>::value;

template <class T> struct is_integral { static constexpr bool value = false; };
#define TL_INTEGRAL_(T) template <> struct is_integral<T> { static constexpr bool value = true; };
TL_INTEGRAL_(bool) TL_INTEGRAL_(char) TL_INTEGRAL_(signed char) TL_INTEGRAL_(unsigned char)
TL_INTEGRAL_(short) TL_INTEGRAL_(unsigned short) TL_INTEGRAL_(int) TL_INTEGRAL_(unsigned int)
TL_INTEGRAL_(long) TL_INTEGRAL_(unsigned long) TL_INTEGRAL_(long long)
TL_INTEGRAL_(unsigned long long)
#undef TL_INTEGRAL_
template <class T> inline constexpr bool is_integral_v = is_integral<T>::value;
// Signedness is asked of integers only: `T(-1) < T(0)` is not a constant expression for the
// 8-bit float classes (and `&&` does not spare the instantiation), so casts from fp8 would not
// compile if the test were written on every T.
template <class T, bool = is_integral_v<T>> struct is_signed_int {
  static constexpr bool value = false;
};
template <class T> struct is_signed_int<T, true> { static constexpr bool value = T(-1) < T(0); };
template <class T> inline constexpr bool is_signed_int_v = is_signed_int<T>::value;

template <bool B, class T = void> struct enable_if {};
template <class T> struct enable_if<true, T> { using type = T; };
template <bool B, class T = void> using enable_if_t = typename enable_if<B, T>::type;

template <class T> inline constexpr bool is_fp8_v =
    is_same_v<T, fp8_e4_t> || is_same_v<T, fp8_e5_t>;
template <class T> inline constexpr bool is_half_v = is_same_v<T, half_t>;
template <class T> inline constexpr bool is_bf16_v = is_same_v<T, bfloat16_t>;

// ---- reinterpretation ------------------------------------------------------------------------
template <class To, class From>
TL_HOST_DEVICE To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "tl::bit_cast: types must have the same size");
  To to;
  memcpy(&to, &from, sizeof(To));
  return to;
}

// ---- value conversion ------------------------------------------------------------------------
namespace detail {
// Every scalar to float / double (16- and 8-bit floats widen exactly).
TL_DEVICE float to_float(float x) { return x; }
TL_DEVICE float to_float(double x) { return (float)x; }
TL_DEVICE float to_float(half_t x) { return __half2float(x); }
TL_DEVICE float to_float(bfloat16_t x) { return __bfloat162float(x); }
TL_DEVICE float to_float(fp8_e4_t x) { return (float)x; }
TL_DEVICE float to_float(fp8_e5_t x) { return (float)x; }
TL_DEVICE float to_float(fp8_e8_t x) { return (float)x; }
TL_DEVICE float to_float(fp4_e2_t x) {
  const float magnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  float m = magnitude[x.bits & 7];
  return (x.bits & 8) ? -m : m;
}
// Round to nearest (ties to even code), saturate to +-6; NaN becomes +6 (CUDA's conversion).
// Compared in double: every float and double source rounds once.
TL_DEVICE fp4_e2_t to_fp4(double x) {
  if (x != x) return fp4_e2_t{7};
  double a = x < 0 ? -x : x;
  unsigned char code = a <= 0.25 ? 0 : a < 0.75 ? 1 : a <= 1.25 ? 2 : a < 1.75 ? 3
                     : a <= 2.5 ? 4 : a < 3.5 ? 5 : a <= 5.0 ? 6 : 7;
  return fp4_e2_t{(unsigned char)(code | (signbit(x) ? 8 : 0))};
}
template <class T, enable_if_t<is_integral_v<T>, int> = 0>
TL_DEVICE float to_float(T x) { return (float)x; }

template <class T> TL_DEVICE double to_double(T x) {
  if constexpr (is_integral_v<T> || is_same_v<T, double> || is_same_v<T, float>) {
    return (double)x;
  } else {
    return (double)to_float(x);
  }
}

template <class T> TL_DEVICE half_t to_half(T x) {
  if constexpr (is_same_v<T, float>) return __float2half_rn(x);
  else if constexpr (is_same_v<T, double>) return __double2half(x);
  else if constexpr (is_same_v<T, bool>) return __float2half_rn(x ? 1.0f : 0.0f);
  else if constexpr (is_signed_int_v<T> && sizeof(T) <= 4) return __int2half_rn((int)x);
  else if constexpr (is_integral_v<T> && sizeof(T) <= 4) return __uint2half_rn((unsigned)x);
  else if constexpr (is_signed_int_v<T>) return __ll2half_rn((long long)x);
  else if constexpr (is_integral_v<T>) return __ull2half_rn((unsigned long long)x);
  else return __float2half_rn(to_float(x));  // bf16 / fp8: float holds them exactly
}

template <class T> TL_DEVICE bfloat16_t to_bf16(T x) {
  if constexpr (is_same_v<T, float>) return __float2bfloat16_rn(x);
  else if constexpr (is_same_v<T, double>) return __double2bfloat16(x);
  else if constexpr (is_same_v<T, bool>) return __float2bfloat16_rn(x ? 1.0f : 0.0f);
  else if constexpr (is_signed_int_v<T> && sizeof(T) <= 4) return __int2bfloat16_rn((int)x);
  else if constexpr (is_integral_v<T> && sizeof(T) <= 4) return __uint2bfloat16_rn((unsigned)x);
  else if constexpr (is_signed_int_v<T>) return __ll2bfloat16_rn((long long)x);
  else if constexpr (is_integral_v<T>) return __ull2bfloat16_rn((unsigned long long)x);
  else return __float2bfloat16_rn(to_float(x));
}
}  // namespace detail

// tl::cast<To>(x): the conversion the IR's Cast node means.
template <class To, class From>
TL_DEVICE To cast(From x) {
  if constexpr (is_same_v<To, From>) {
    return x;
  } else if constexpr (is_same_v<To, bool>) {
    return detail::to_float(x) != 0.0f;
  } else if constexpr (is_same_v<To, half_t>) {
    return detail::to_half(x);
  } else if constexpr (is_same_v<To, bfloat16_t>) {
    return detail::to_bf16(x);
  } else if constexpr (is_same_v<To, fp4_e2_t>) {
    return detail::to_fp4(detail::to_double(x));
  } else if constexpr (is_same_v<To, fp8_e8_t>) {
    return fp8_e8_t(detail::to_float(x));
  } else if constexpr (is_fp8_v<To>) {
    if constexpr (is_same_v<From, double>) return To(x);
    else if constexpr (is_same_v<From, half_t> || is_same_v<From, bfloat16_t>) return To(x);
    else return To(detail::to_float(x));  // constructors round to nearest, saturate (finite)
  } else if constexpr (is_same_v<To, double>) {
    return detail::to_double(x);
  } else if constexpr (is_same_v<To, float>) {
    return detail::to_float(x);
  } else {
    static_assert(is_integral_v<To>, "tl::cast: unsupported destination type");
    if constexpr (is_integral_v<From> || is_same_v<From, float> || is_same_v<From, double>) {
      return (To)x;
    } else {
      return (To)detail::to_float(x);  // C semantics: truncate toward zero
    }
  }
}

// The two values of a packed conversion's result (lower index first) into dst[0], dst[1].
template <class T, class Pair>
TL_DEVICE void store_pair(T* dst, Pair pair) {
  static_assert(sizeof(Pair) == 2 * sizeof(T), "tl::store_pair: a pair of two T");
  struct two { T v[2]; };
  two t = bit_cast<two>(pair);
  dst[0] = t.v[0];
  dst[1] = t.v[1];
}

// ---- float4_e2m1fn elements of a global tensor, two to a byte --------------------------------
TL_DEVICE fp4_e2_t fp4_load(const fp4_e2_t* base, int64_t i) {
  unsigned char byte = reinterpret_cast<const unsigned char*>(base)[i >> 1];
  return fp4_e2_t{(unsigned char)((i & 1) ? byte >> 4 : byte & 15)};
}
// Writes one nibble atomically, so that threads storing the two values of one byte both land:
// compare-and-swap of the aligned 32-bit word holding it, its other bits unchanged (allocations
// are 256-byte aligned, so the word lies inside the tensor's allocation).
// (global or shared memory: a shared allocation's words lie inside the block's arena).
TL_DEVICE void store_nibble(void* byte_address, int high, unsigned int code) {
  uintptr_t byte = reinterpret_cast<uintptr_t>(byte_address);
  unsigned int* word = reinterpret_cast<unsigned int*>(byte & ~(uintptr_t)3);
  unsigned int shift = (unsigned int)((byte & 3) * 8 + (high ? 4 : 0));
  unsigned int bits = (code & 15u) << shift, mask = 15u << shift;
  unsigned int seen = *word, expected;
  do {
    expected = seen;
    seen = atomicCAS(word, expected, (expected & ~mask) | bits);
  } while (seen != expected);
}
TL_DEVICE void fp4_store(fp4_e2_t* base, int64_t i, fp4_e2_t v) {
  store_nibble(reinterpret_cast<unsigned char*>(base) + (i >> 1), (int)(i & 1), v.bits);
}

// ---- int4 / uint4 values: a byte in registers, packed two to a byte in memory ---------------
// (transform/pack_sub_byte.py reads a nibble with shifts and stores it with tl::store_nibble)
TL_HOST_DEVICE signed char wrap_s4(int x) {
  return (signed char)((int)((unsigned)x << 28) >> 28);
}
TL_HOST_DEVICE unsigned char wrap_u4(int x) { return (unsigned char)(x & 15); }
// from a float, as every float -> integer conversion: truncated, saturated to the type's range
TL_HOST_DEVICE signed char sat_s4(int x) { return (signed char)(x < -8 ? -8 : x > 7 ? 7 : x); }
TL_HOST_DEVICE unsigned char sat_u4(int x) {
  return (unsigned char)(x < 0 ? 0 : x > 15 ? 15 : x);
}

// ---- packed conversions ---------------------------------------------------------------------
TL_DEVICE __half2 float2_to_half2(float2 v) { return __float22half2_rn(v); }
TL_DEVICE float2 half2_to_float2(__half2 v) { return __half22float2(v); }
TL_DEVICE __nv_bfloat162 float2_to_bf162(float2 v) { return __float22bfloat162_rn(v); }
TL_DEVICE float2 bf162_to_float2(__nv_bfloat162 v) { return __bfloat1622float2(v); }
// Two floats -> one 32-bit register of two f16/bf16 (lower index in the low half), the
// fragment element order of mma/ldmatrix (HARDWARE §1).
TL_DEVICE uint32_t pack_half2(float lo, float hi) {
  return bit_cast<uint32_t>(__floats2half2_rn(lo, hi));
}
TL_DEVICE uint32_t pack_bf162(float lo, float hi) {
  return bit_cast<uint32_t>(__floats2bfloat162_rn(lo, hi));
}
// Two floats -> two fp8 in 16 bits (saturating to finite), and back.
TL_DEVICE uint16_t float2_to_fp8x2_e4m3(float2 v) {
  return (uint16_t)__nv_cvt_float2_to_fp8x2(v, __NV_SATFINITE, __NV_E4M3);
}
TL_DEVICE uint16_t float2_to_fp8x2_e5m2(float2 v) {
  return (uint16_t)__nv_cvt_float2_to_fp8x2(v, __NV_SATFINITE, __NV_E5M2);
}
TL_DEVICE float2 fp8x2_e4m3_to_float2(uint16_t v) {
  return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(v, __NV_E4M3)));
}
TL_DEVICE float2 fp8x2_e5m2_to_float2(uint16_t v) {
  return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(v, __NV_E5M2)));
}

// ---- vectors ------------------------------------------------------------------------------
namespace detail {
TL_HOST_DEVICE constexpr int vec_align(int bytes) {
  int a = bytes & -bytes;  // largest power of two dividing the size
  return a > 16 ? 16 : a;
}
}  // namespace detail

// N elements of T; aligned so that a power-of-two size up to 16 B is one memory access.
template <class T, int N>
struct alignas(detail::vec_align(sizeof(T) * N)) vec {
  static_assert(N >= 1, "tl::vec needs at least one element");
  T data[N];
  TL_HOST_DEVICE T& operator[](int i) { return data[i]; }
  TL_HOST_DEVICE const T& operator[](int i) const { return data[i]; }
};

#define TL_VEC_OP_(OP)                                                                 \
  template <class T, int N>                                                            \
  TL_DEVICE vec<T, N> operator OP(const vec<T, N>& a, const vec<T, N>& b) {            \
    vec<T, N> r;                                                                       \
    _Pragma("unroll") for (int i = 0; i < N; ++i) r.data[i] = a.data[i] OP b.data[i];  \
    return r;                                                                          \
  }
TL_VEC_OP_(+)
TL_VEC_OP_(-)
TL_VEC_OP_(*)
TL_VEC_OP_(/)
#undef TL_VEC_OP_

template <class T, int N>
TL_DEVICE vec<T, N> broadcast(T x) {
  vec<T, N> r;
#pragma unroll
  for (int i = 0; i < N; ++i) r.data[i] = x;
  return r;
}

// ---- misc ---------------------------------------------------------------------------------
TL_DEVICE void device_assert(bool cond, const char* msg) {
  if (!cond) {
    printf("Device assertion failed: %s (block (%d, %d, %d), thread (%d, %d, %d))\n", msg,
           (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z, (int)threadIdx.x,
           (int)threadIdx.y, (int)threadIdx.z);
    __trap();
  }
}

// Shared-window address of a pointer into shared memory (the operand of PTX .shared forms).
TL_DEVICE uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The 128-byte opaque TMA descriptor (CUtensorMap), passed by value as a kernel parameter:
//   __global__ void k(const __grid_constant__ tl::TensorMap desc)
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};
static_assert(sizeof(TensorMap) == 128, "tl::TensorMap must be 128 bytes");

}  // namespace tl

// Kernel parameters spell the descriptor by the driver API's name (cuda.h's CUtensorMap, of the
// same size and alignment); kernels are compiled without cuda.h.
#ifndef __cuda_cuda_h__
typedef tl::TensorMap CUtensorMap;
#endif
