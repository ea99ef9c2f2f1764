// tl/math.cuh — math overloads for float, double, half_t and bfloat16_t, fast approximations,
// and typed constants.
//
// Every function in the IR's math table (tl::exp, exp2, exp10, log, log2, log10, log1p, expm1,
// tanh, sin, cos, tan, asin, acos, atan, sinh, cosh, erf, sigmoid, rsqrt, rcp, sqrt, floor,
// ceil, round, trunc, nearbyint, abs, pow, fmod, atan2, isnan, isinf, isfinite) has one
// overload per float type; 16- and 8-bit floats compute in float and round once (what the CPU
// interpreter does). Integer arguments are accepted too (computed in double, converted back).
// Spellings generated code uses: fabs (abs of floats), htan (tan of 16-bit floats),
// RoundTiesAwayFromZero (= round; T.round itself is nearbyint).
//
// Fast forms (float only, one PTX instruction or two): fast_exp2 (ex2.approx.ftz),
// fast_exp, fast_log2 (lg2.approx.ftz), fast_log, fast_sin, fast_cos, fast_tanh
// (tanh.approx), fast_sigmoid, fast_rsqrt (rsqrt.approx.ftz), fast_rcp (rcp.approx.ftz).
//
// tl::max / tl::min: NaN-ignoring (like fmaxf / __hmax); tl::max_nan / min_nan propagate NaN.
// tl::infinity<T>(), tl::max_value<T>() (largest finite), tl::min_value<T>() (lowest finite).
// fp8 e4m3 has no infinity: infinity<fp8_e4_t>() is its largest finite value, 448.
// tl::floordiv / tl::floormod: Python's floor division and modulo for integers.
#pragma once
#include "common.cuh"

namespace tl {

// ---- fast approximations (float) ----------------------------------------------------------
// ex2.approx.ftz.f32: 2^x, max rel. error 2^-22.5 on normal results (PTX §9.7.3.x "ex2").
TL_DEVICE float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// lg2.approx.ftz.f32: log2(x).
TL_DEVICE float fast_log2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// tanh.approx.f32 (sm_75+): max abs. error ~2^-10.7.
TL_DEVICE float fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// rsqrt.approx.ftz.f32: 1/sqrt(x).
TL_DEVICE float fast_rsqrt(float x) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// rcp.approx.ftz.f32: 1/x.
TL_DEVICE float fast_rcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
TL_DEVICE float fast_exp(float x) { return fast_exp2(x * 1.4426950408889634f); }
TL_DEVICE float fast_log(float x) { return fast_log2(x) * 0.6931471805599453f; }
TL_DEVICE float fast_sin(float x) { return __sinf(x); }
TL_DEVICE float fast_cos(float x) { return __cosf(x); }
TL_DEVICE float fast_sigmoid(float x) { return fast_rcp(1.0f + fast_exp(-x)); }

// ---- overload sets ------------------------------------------------------------------------
#define TL_MATH_UNARY_(NAME, FF, DF)                                                   \
  TL_DEVICE float NAME(float x) { return FF(x); }                                       \
  TL_DEVICE double NAME(double x) { return DF(x); }                                     \
  TL_DEVICE half_t NAME(half_t x) { return __float2half_rn(FF(__half2float(x))); }      \
  TL_DEVICE bfloat16_t NAME(bfloat16_t x) {                                             \
    return __float2bfloat16_rn(FF(__bfloat162float(x)));                                \
  }                                                                                     \
  TL_DEVICE fp8_e4_t NAME(fp8_e4_t x) { return fp8_e4_t(FF(float(x))); }                \
  TL_DEVICE fp8_e5_t NAME(fp8_e5_t x) { return fp8_e5_t(FF(float(x))); }                \
  template <class T, enable_if_t<is_integral_v<T>, int> = 0>                            \
  TL_DEVICE T NAME(T x) { return (T)DF((double)x); }

namespace detail {
TL_DEVICE float sigmoidf(float x) { return 1.0f / (1.0f + ::expf(-x)); }
TL_DEVICE double sigmoidd(double x) { return 1.0 / (1.0 + ::exp(-x)); }
TL_DEVICE float rcpf(float x) { return 1.0f / x; }
TL_DEVICE double rcpd(double x) { return 1.0 / x; }
}  // namespace detail

TL_MATH_UNARY_(exp, ::expf, ::exp)
TL_MATH_UNARY_(exp2, ::exp2f, ::exp2)
TL_MATH_UNARY_(exp10, ::exp10f, ::exp10)
TL_MATH_UNARY_(log, ::logf, ::log)
TL_MATH_UNARY_(log2, ::log2f, ::log2)
TL_MATH_UNARY_(log10, ::log10f, ::log10)
TL_MATH_UNARY_(log1p, ::log1pf, ::log1p)
TL_MATH_UNARY_(expm1, ::expm1f, ::expm1)
TL_MATH_UNARY_(tanh, ::tanhf, ::tanh)
TL_MATH_UNARY_(sin, ::sinf, ::sin)
TL_MATH_UNARY_(cos, ::cosf, ::cos)
TL_MATH_UNARY_(tan, ::tanf, ::tan)
TL_MATH_UNARY_(asin, ::asinf, ::asin)
TL_MATH_UNARY_(acos, ::acosf, ::acos)
TL_MATH_UNARY_(atan, ::atanf, ::atan)
TL_MATH_UNARY_(sinh, ::sinhf, ::sinh)
TL_MATH_UNARY_(cosh, ::coshf, ::cosh)
TL_MATH_UNARY_(erf, ::erff, ::erf)
TL_MATH_UNARY_(sigmoid, detail::sigmoidf, detail::sigmoidd)
TL_MATH_UNARY_(rsqrt, ::rsqrtf, ::rsqrt)
TL_MATH_UNARY_(rcp, detail::rcpf, detail::rcpd)
TL_MATH_UNARY_(sqrt, ::sqrtf, ::sqrt)
TL_MATH_UNARY_(floor, ::floorf, ::floor)
TL_MATH_UNARY_(ceil, ::ceilf, ::ceil)
TL_MATH_UNARY_(round, ::roundf, ::round)
TL_MATH_UNARY_(trunc, ::truncf, ::trunc)
TL_MATH_UNARY_(nearbyint, ::nearbyintf, ::nearbyint)
// C's round (ties away from zero): T.round(x, "ties-away-from-zero"); the name is the one the
// reference's generated code uses
TL_MATH_UNARY_(RoundTiesAwayFromZero, ::roundf, ::round)
#undef TL_MATH_UNARY_

// tan of a 16-bit float (CUDA has hsin and hcos but no htan): in float, rounded once
TL_DEVICE half_t htan(half_t x) { return __float2half_rn(::tanf(__half2float(x))); }
TL_DEVICE bfloat16_t htan(bfloat16_t x) {
  return __float2bfloat16_rn(::tanf(__bfloat162float(x)));
}

// abs keeps integer types exact (no round trip through double).
TL_DEVICE float abs(float x) { return ::fabsf(x); }
TL_DEVICE double abs(double x) { return ::fabs(x); }
TL_DEVICE half_t abs(half_t x) { return __habs(x); }
TL_DEVICE bfloat16_t abs(bfloat16_t x) { return __habs(x); }
template <class T, enable_if_t<is_integral_v<T>, int> = 0>
TL_DEVICE T abs(T x) { return x < T(0) ? T(-x) : x; }
// IEEE operations on 16-bit floats, rounded once to nearest (T.ieee_*): CUDA's __hdiv, hrcp,
// hsqrt and hrsqrt go through approximate float instructions, so these compute in double
// (correctly rounded there) and round to the 16-bit type, which is the correctly rounded
// result: double has more than twice the precision plus two bits. Sums and products use the
// exact __hadd / __hsub / __hmul. The fma is __hfma, whose bfloat16 overload needs sm_80;
// before that the double fma (exact product, one rounding) is rounded to bfloat16.
namespace detail {
TL_DEVICE double to_double(half_t x) { return (double)__half2float(x); }
TL_DEVICE double to_double(bfloat16_t x) { return (double)__bfloat162float(x); }
TL_DEVICE half_t from_double(double x, half_t) { return __double2half(x); }
TL_DEVICE bfloat16_t from_double(double x, bfloat16_t) { return __double2bfloat16(x); }
}  // namespace detail
template <class T, enable_if_t<is_half_v<T> || is_bf16_v<T>, int> = 0>
TL_DEVICE T hdiv_rn(T a, T b) {
  return detail::from_double(__ddiv_rn(detail::to_double(a), detail::to_double(b)), a);
}
template <class T, enable_if_t<is_half_v<T> || is_bf16_v<T>, int> = 0>
TL_DEVICE T hrcp_rn(T a) {
  return detail::from_double(__drcp_rn(detail::to_double(a)), a);
}
template <class T, enable_if_t<is_half_v<T> || is_bf16_v<T>, int> = 0>
TL_DEVICE T hsqrt_rn(T a) {
  return detail::from_double(__dsqrt_rn(detail::to_double(a)), a);
}
template <class T, enable_if_t<is_half_v<T> || is_bf16_v<T>, int> = 0>
TL_DEVICE T hrsqrt_rn(T a) {
  return detail::from_double(__drcp_rn(__dsqrt_rn(detail::to_double(a))), a);
}
TL_DEVICE half_t hfma_rn(half_t a, half_t b, half_t c) { return __hfma(a, b, c); }
TL_DEVICE bfloat16_t hfma_rn(bfloat16_t a, bfloat16_t b, bfloat16_t c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __hfma(a, b, c);
#else
  return __double2bfloat16(::fma(detail::to_double(a), detail::to_double(b),
                                 detail::to_double(c)));
#endif
}

// fabs: abs of a float type (the name generated code uses for float operands)
TL_DEVICE float fabs(float x) { return ::fabsf(x); }
TL_DEVICE double fabs(double x) { return ::fabs(x); }
TL_DEVICE half_t fabs(half_t x) { return __habs(x); }
TL_DEVICE bfloat16_t fabs(bfloat16_t x) { return __habs(x); }

#define TL_MATH_BINARY_(NAME, FF, DF)                                                   \
  TL_DEVICE float NAME(float a, float b) { return FF(a, b); }                           \
  TL_DEVICE double NAME(double a, double b) { return DF(a, b); }                        \
  TL_DEVICE half_t NAME(half_t a, half_t b) {                                           \
    return __float2half_rn(FF(__half2float(a), __half2float(b)));                       \
  }                                                                                     \
  TL_DEVICE bfloat16_t NAME(bfloat16_t a, bfloat16_t b) {                               \
    return __float2bfloat16_rn(FF(__bfloat162float(a), __bfloat162float(b)));           \
  }                                                                                     \
  template <class T, enable_if_t<is_integral_v<T>, int> = 0>                            \
  TL_DEVICE T NAME(T a, T b) { return (T)DF((double)a, (double)b); }

TL_MATH_BINARY_(pow, ::powf, ::pow)
TL_MATH_BINARY_(fmod, ::fmodf, ::fmod)
TL_MATH_BINARY_(atan2, ::atan2f, ::atan2)
#undef TL_MATH_BINARY_

// Bit tests, so that --use_fast_math (which assumes no NaN/inf) cannot fold them away.
namespace detail {
TL_DEVICE unsigned fbits(float x) { return __float_as_uint(x) & 0x7FFFFFFFu; }
TL_DEVICE unsigned long long dbits(double x) {
  return (unsigned long long)__double_as_longlong(x) & 0x7FFFFFFFFFFFFFFFull;
}
}  // namespace detail
TL_DEVICE bool isnan(float x) { return detail::fbits(x) > 0x7F800000u; }
TL_DEVICE bool isinf(float x) { return detail::fbits(x) == 0x7F800000u; }
TL_DEVICE bool isfinite(float x) { return detail::fbits(x) < 0x7F800000u; }
TL_DEVICE bool isnan(double x) { return detail::dbits(x) > 0x7FF0000000000000ull; }
TL_DEVICE bool isinf(double x) { return detail::dbits(x) == 0x7FF0000000000000ull; }
TL_DEVICE bool isfinite(double x) { return detail::dbits(x) < 0x7FF0000000000000ull; }
TL_DEVICE bool isnan(half_t x) { return (__half_as_ushort(x) & 0x7FFF) > 0x7C00; }
TL_DEVICE bool isinf(half_t x) { return (__half_as_ushort(x) & 0x7FFF) == 0x7C00; }
TL_DEVICE bool isfinite(half_t x) { return (__half_as_ushort(x) & 0x7FFF) < 0x7C00; }
TL_DEVICE bool isnan(bfloat16_t x) { return (__bfloat16_as_ushort(x) & 0x7FFF) > 0x7F80; }
TL_DEVICE bool isinf(bfloat16_t x) { return (__bfloat16_as_ushort(x) & 0x7FFF) == 0x7F80; }
TL_DEVICE bool isfinite(bfloat16_t x) { return (__bfloat16_as_ushort(x) & 0x7FFF) < 0x7F80; }
template <class T, enable_if_t<is_integral_v<T>, int> = 0>
TL_DEVICE bool isnan(T) { return false; }
template <class T, enable_if_t<is_integral_v<T>, int> = 0>
TL_DEVICE bool isinf(T) { return false; }
template <class T, enable_if_t<is_integral_v<T>, int> = 0>
TL_DEVICE bool isfinite(T) { return true; }

// ---- max / min ----------------------------------------------------------------------------
TL_DEVICE float max(float a, float b) { return ::fmaxf(a, b); }
TL_DEVICE float min(float a, float b) { return ::fminf(a, b); }
TL_DEVICE double max(double a, double b) { return ::fmax(a, b); }
TL_DEVICE double min(double a, double b) { return ::fmin(a, b); }
TL_DEVICE half_t max(half_t a, half_t b) { return __hmax(a, b); }
TL_DEVICE half_t min(half_t a, half_t b) { return __hmin(a, b); }
TL_DEVICE bfloat16_t max(bfloat16_t a, bfloat16_t b) { return __hmax(a, b); }
TL_DEVICE bfloat16_t min(bfloat16_t a, bfloat16_t b) { return __hmin(a, b); }
TL_DEVICE fp8_e4_t max(fp8_e4_t a, fp8_e4_t b) { return fp8_e4_t(::fmaxf(float(a), float(b))); }
TL_DEVICE fp8_e4_t min(fp8_e4_t a, fp8_e4_t b) { return fp8_e4_t(::fminf(float(a), float(b))); }
TL_DEVICE fp8_e5_t max(fp8_e5_t a, fp8_e5_t b) { return fp8_e5_t(::fmaxf(float(a), float(b))); }
TL_DEVICE fp8_e5_t min(fp8_e5_t a, fp8_e5_t b) { return fp8_e5_t(::fminf(float(a), float(b))); }
template <class T, enable_if_t<is_integral_v<T>, int> = 0>
TL_DEVICE T max(T a, T b) { return a < b ? b : a; }
template <class T, enable_if_t<is_integral_v<T>, int> = 0>
TL_DEVICE T min(T a, T b) { return b < a ? b : a; }

TL_DEVICE half_t max_nan(half_t a, half_t b) { return __hmax_nan(a, b); }
TL_DEVICE half_t min_nan(half_t a, half_t b) { return __hmin_nan(a, b); }
TL_DEVICE bfloat16_t max_nan(bfloat16_t a, bfloat16_t b) { return __hmax_nan(a, b); }
TL_DEVICE bfloat16_t min_nan(bfloat16_t a, bfloat16_t b) { return __hmin_nan(a, b); }
TL_DEVICE float max_nan(float a, float b) {
  return (isnan(a) || isnan(b)) ? CUDART_NAN_F : ::fmaxf(a, b);
}
TL_DEVICE float min_nan(float a, float b) {
  return (isnan(a) || isnan(b)) ? CUDART_NAN_F : ::fminf(a, b);
}
TL_DEVICE double max_nan(double a, double b) {
  return (isnan(a) || isnan(b)) ? CUDART_NAN : ::fmax(a, b);
}
TL_DEVICE double min_nan(double a, double b) {
  return (isnan(a) || isnan(b)) ? CUDART_NAN : ::fmin(a, b);
}

// ---- integer floor division (Python semantics) --------------------------------------------
template <class A, class B>
TL_DEVICE auto floordiv(A a, B b) -> decltype(a / b) {
  static_assert(is_integral_v<A> && is_integral_v<B>, "tl::floordiv is for integers");
  auto q = a / b;
  auto r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
template <class A, class B>
TL_DEVICE auto floormod(A a, B b) -> decltype(a % b) {
  static_assert(is_integral_v<A> && is_integral_v<B>, "tl::floormod is for integers");
  auto r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <class A, class B>
TL_HOST_DEVICE constexpr auto ceildiv(A a, B b) -> decltype(a / b) { return (a + b - 1) / b; }

// ---- typed constants ----------------------------------------------------------------------
namespace detail {
template <class T> struct limits;
#define TL_LIMITS_(T, INF, MAX, LOW)                                \
  template <> struct limits<T> {                                    \
    static TL_DEVICE T inf() { return INF; }                        \
    static TL_DEVICE T max() { return MAX; }                        \
    static TL_DEVICE T lowest() { return LOW; }                     \
  };
TL_LIMITS_(float, CUDART_INF_F, 3.402823466e38f, -3.402823466e38f)
TL_LIMITS_(double, CUDART_INF, 1.7976931348623157e308, -1.7976931348623157e308)
TL_LIMITS_(half_t, __ushort_as_half(0x7C00), __ushort_as_half(0x7BFF), __ushort_as_half(0xFBFF))
TL_LIMITS_(bfloat16_t, __ushort_as_bfloat16(0x7F80), __ushort_as_bfloat16(0x7F7F),
           __ushort_as_bfloat16(0xFF7F))
TL_LIMITS_(fp8_e4_t, fp8_e4_t(448.0f), fp8_e4_t(448.0f), fp8_e4_t(-448.0f))
TL_LIMITS_(fp8_e5_t, bit_cast<fp8_e5_t>((uint8_t)0x7C), fp8_e5_t(57344.0f),
           fp8_e5_t(-57344.0f))
TL_LIMITS_(bool, true, true, false)
TL_LIMITS_(signed char, (signed char)127, (signed char)127, (signed char)-128)
TL_LIMITS_(unsigned char, (unsigned char)255, (unsigned char)255, (unsigned char)0)
TL_LIMITS_(short, (short)32767, (short)32767, (short)-32768)
TL_LIMITS_(unsigned short, (unsigned short)65535, (unsigned short)65535, (unsigned short)0)
TL_LIMITS_(int, 2147483647, 2147483647, -2147483647 - 1)
TL_LIMITS_(unsigned int, 4294967295u, 4294967295u, 0u)
TL_LIMITS_(long long, 9223372036854775807LL, 9223372036854775807LL,
           -9223372036854775807LL - 1)
TL_LIMITS_(unsigned long long, 18446744073709551615ULL, 18446744073709551615ULL, 0ULL)
TL_LIMITS_(long, (long)9223372036854775807LL, (long)9223372036854775807LL,
           (long)(-9223372036854775807LL - 1))
TL_LIMITS_(unsigned long, (unsigned long)18446744073709551615ULL,
           (unsigned long)18446744073709551615ULL, 0UL)
#undef TL_LIMITS_
}  // namespace detail

// +inf (integers: their largest value; fp8 e4m3: its largest finite value).
template <class T> TL_DEVICE T infinity() { return detail::limits<T>::inf(); }
template <class T> TL_DEVICE T max_value() { return detail::limits<T>::max(); }
template <class T> TL_DEVICE T min_value() { return detail::limits<T>::lowest(); }

}  // namespace tl
