// tl/atomic.cuh — atomic read-modify-write, load and store with C++ memory orders.
//
//   tl::atomic_add(T* p, V v, MemoryOrder o = relaxed) -> old *p   (v converted to T)
//   tl::atomic_max / atomic_min (same signature)
//   tl::atomic_or / atomic_and / atomic_xor (same signature; 32/64-bit integers)
//       T = float, double, half_t, bfloat16_t, int, unsigned, long long, unsigned long long
//   tl::atomic_addx2(T* dst, const T* src) / atomic_addx4     2 or 4 consecutive elements
//       (half_t, bfloat16_t, float; also value forms with __half2, __nv_bfloat162, float2,
//       float4); returns the old values of the first pair / of the vector
//   tl::atomic_load(const T* p, o = seq_cst), tl::atomic_store(T* p, v, o = seq_cst)
//       T of 2, 4 or 8 bytes
//
// Orders (tl::MemoryOrder: relaxed, consume, acquire, release, acq_rel, seq_cst) map to PTX
// `atom.<sem>.gpu` (consume = acquire; seq_cst = fence.sc.gpu + acq_rel). Relaxed uses the
// CUDA builtins so the compiler can emit RED when the old value is unused. Operations PTX has
// no `atom.<sem>` form for (16-bit max/min, bf16 add before sm_90, x2/x4) put the equivalent
// fences around a relaxed atomic. Scope is always .gpu. max/min ignore a NaN argument (the
// value is left as it is), like tl::max.
#pragma once
#include "common.cuh"
#include "math.cuh"

namespace tl {

enum class MemoryOrder : int { relaxed = 0, consume = 1, acquire = 2, release = 3, acq_rel = 4,
                               seq_cst = 5 };

namespace detail {

TL_DEVICE void fence_before(MemoryOrder o) {
  if (o == MemoryOrder::seq_cst) asm volatile("fence.sc.gpu;\n" ::: "memory");
  else if (o == MemoryOrder::release || o == MemoryOrder::acq_rel)
    asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
}
TL_DEVICE void fence_after(MemoryOrder o) {
  if (o != MemoryOrder::relaxed && o != MemoryOrder::release)
    asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
}

// atom.<sem>.gpu.<op>.<type> d, [a], b;  one function per (op, type), switch on the order.
#define TL_ATOM_ORDERED_(NAME, OPTYPE, CT, C)                                              \
  TL_DEVICE CT NAME(CT* addr, CT v, MemoryOrder o) {                                       \
    CT old;                                                                                \
    switch (o) {                                                                           \
      case MemoryOrder::consume:                                                           \
      case MemoryOrder::acquire:                                                           \
        asm volatile("atom.acquire.gpu." OPTYPE " %0, [%1], %2;\n"                         \
                     : "=" C(old) : "l"(addr), C(v) : "memory");                           \
        break;                                                                             \
      case MemoryOrder::release:                                                           \
        asm volatile("atom.release.gpu." OPTYPE " %0, [%1], %2;\n"                         \
                     : "=" C(old) : "l"(addr), C(v) : "memory");                           \
        break;                                                                             \
      case MemoryOrder::acq_rel:                                                           \
        asm volatile("atom.acq_rel.gpu." OPTYPE " %0, [%1], %2;\n"                         \
                     : "=" C(old) : "l"(addr), C(v) : "memory");                           \
        break;                                                                             \
      case MemoryOrder::seq_cst:                                                           \
        asm volatile("fence.sc.gpu;\n\tatom.acq_rel.gpu." OPTYPE " %0, [%1], %2;\n"        \
                     : "=" C(old) : "l"(addr), C(v) : "memory");                           \
        break;                                                                             \
      default:                                                                             \
        asm volatile("atom.relaxed.gpu." OPTYPE " %0, [%1], %2;\n"                         \
                     : "=" C(old) : "l"(addr), C(v) : "memory");                           \
    }                                                                                      \
    return old;                                                                            \
  }
TL_ATOM_ORDERED_(atom_add_f32, "add.f32", float, "f")
TL_ATOM_ORDERED_(atom_add_f64, "add.f64", double, "d")
TL_ATOM_ORDERED_(atom_add_u32, "add.u32", unsigned, "r")
TL_ATOM_ORDERED_(atom_add_u64, "add.u64", unsigned long long, "l")
TL_ATOM_ORDERED_(atom_add_f16, "add.noftz.f16", unsigned short, "h")
#if TL_HAVE_SM90
TL_ATOM_ORDERED_(atom_add_bf16, "add.noftz.bf16", unsigned short, "h")
#endif
TL_ATOM_ORDERED_(atom_max_s32, "max.s32", int, "r")
TL_ATOM_ORDERED_(atom_max_u32, "max.u32", unsigned, "r")
TL_ATOM_ORDERED_(atom_max_s64, "max.s64", long long, "l")
TL_ATOM_ORDERED_(atom_max_u64, "max.u64", unsigned long long, "l")
TL_ATOM_ORDERED_(atom_min_s32, "min.s32", int, "r")
TL_ATOM_ORDERED_(atom_min_u32, "min.u32", unsigned, "r")
TL_ATOM_ORDERED_(atom_min_s64, "min.s64", long long, "l")
TL_ATOM_ORDERED_(atom_min_u64, "min.u64", unsigned long long, "l")
TL_ATOM_ORDERED_(atom_or_b32, "or.b32", unsigned, "r")
TL_ATOM_ORDERED_(atom_or_b64, "or.b64", unsigned long long, "l")
TL_ATOM_ORDERED_(atom_and_b32, "and.b32", unsigned, "r")
TL_ATOM_ORDERED_(atom_and_b64, "and.b64", unsigned long long, "l")
TL_ATOM_ORDERED_(atom_xor_b32, "xor.b32", unsigned, "r")
TL_ATOM_ORDERED_(atom_xor_b64, "xor.b64", unsigned long long, "l")
#undef TL_ATOM_ORDERED_

template <class T> inline constexpr bool is_i32_v = is_integral_v<T> && sizeof(T) == 4;
template <class T> inline constexpr bool is_i64_v = is_integral_v<T> && sizeof(T) == 8;

// Integer max/min through the ordered or builtin form, by size and signedness.
template <bool kMax, class T>
TL_DEVICE T int_minmax(T* p, T v, MemoryOrder o) {
  static_assert(is_i32_v<T> || is_i64_v<T>, "tl::atomic_max/min: 32- or 64-bit integers only");
  if constexpr (is_i32_v<T> && is_signed_int_v<T>) {
    int* q = reinterpret_cast<int*>(p);
    if (o == MemoryOrder::relaxed) return (T)(kMax ? atomicMax(q, (int)v) : atomicMin(q, (int)v));
    return (T)(kMax ? atom_max_s32(q, (int)v, o) : atom_min_s32(q, (int)v, o));
  } else if constexpr (is_i32_v<T>) {
    unsigned* q = reinterpret_cast<unsigned*>(p);
    if (o == MemoryOrder::relaxed)
      return (T)(kMax ? atomicMax(q, (unsigned)v) : atomicMin(q, (unsigned)v));
    return (T)(kMax ? atom_max_u32(q, (unsigned)v, o) : atom_min_u32(q, (unsigned)v, o));
  } else if constexpr (is_signed_int_v<T>) {
    long long* q = reinterpret_cast<long long*>(p);
    if (o == MemoryOrder::relaxed)
      return (T)(kMax ? atomicMax(q, (long long)v) : atomicMin(q, (long long)v));
    return (T)(kMax ? atom_max_s64(q, (long long)v, o) : atom_min_s64(q, (long long)v, o));
  } else {
    unsigned long long* q = reinterpret_cast<unsigned long long*>(p);
    if (o == MemoryOrder::relaxed)
      return (T)(kMax ? atomicMax(q, (unsigned long long)v) : atomicMin(q, (unsigned long long)v));
    return (T)(kMax ? atom_max_u64(q, (unsigned long long)v, o)
                    : atom_min_u64(q, (unsigned long long)v, o));
  }
}

// IEEE floats order like sign-magnitude integers. For v >= 0 the float max/min is the signed
// integer max/min of the bits (a negative current value has negative bits). For v < 0 the
// order of the bits is reversed and unsigned: max is the unsigned min, min the unsigned max.
template <bool kMax>
TL_DEVICE float float_minmax(float* p, float v, MemoryOrder o) {
  if (isnan(v)) return *reinterpret_cast<volatile float*>(p);
  int bits = __float_as_int(v);
  if (bits >= 0)
    return __int_as_float(int_minmax<kMax>(reinterpret_cast<int*>(p), bits, o));
  return __uint_as_float(int_minmax<!kMax>(reinterpret_cast<unsigned*>(p), (unsigned)bits, o));
}
template <bool kMax>
TL_DEVICE double double_minmax(double* p, double v, MemoryOrder o) {
  if (isnan(v)) return *reinterpret_cast<volatile double*>(p);
  long long bits = __double_as_longlong(v);
  if (bits >= 0)
    return __longlong_as_double(int_minmax<kMax>(reinterpret_cast<long long*>(p), bits, o));
  return __longlong_as_double((long long)int_minmax<!kMax>(
      reinterpret_cast<unsigned long long*>(p), (unsigned long long)bits, o));
}

// 16-bit floats: compare-and-swap loop on the 16-bit word (atomicCAS on ushort, sm_70+).
template <bool kMax, class T>
TL_DEVICE T half_minmax(T* p, T v, MemoryOrder o) {
  unsigned short* q = reinterpret_cast<unsigned short*>(p);
  fence_before(o);
  unsigned short old = *reinterpret_cast<volatile unsigned short*>(q), assumed;
  if (!isnan(v)) {
    do {
      assumed = old;
      T cur = bit_cast<T>(assumed);
      T want = kMax ? tl::max(cur, v) : tl::min(cur, v);
      if (bit_cast<unsigned short>(want) == assumed) break;
      old = atomicCAS(q, assumed, bit_cast<unsigned short>(want));
    } while (old != assumed);
  }
  fence_after(o);
  return bit_cast<T>(old);
}
}  // namespace detail

// ---- public RMW operations ---------------------------------------------------------------
template <class T, class V>
TL_DEVICE T atomic_add(T* p, V val, MemoryOrder o = MemoryOrder::relaxed) {
  const T v = cast<T>(val);
  if constexpr (is_same_v<T, float>) {
    return o == MemoryOrder::relaxed ? atomicAdd(p, v) : detail::atom_add_f32(p, v, o);
  } else if constexpr (is_same_v<T, double>) {
    return o == MemoryOrder::relaxed ? atomicAdd(p, v) : detail::atom_add_f64(p, v, o);
  } else if constexpr (is_same_v<T, half_t>) {
    if (o == MemoryOrder::relaxed) return atomicAdd(p, v);
    return bit_cast<half_t>(detail::atom_add_f16(reinterpret_cast<unsigned short*>(p),
                                                 bit_cast<unsigned short>(v), o));
  } else if constexpr (is_same_v<T, bfloat16_t>) {
    if (o == MemoryOrder::relaxed) return atomicAdd(p, v);
#if TL_SM90
    return bit_cast<bfloat16_t>(detail::atom_add_bf16(reinterpret_cast<unsigned short*>(p),
                                                      bit_cast<unsigned short>(v), o));
#else
    detail::fence_before(o);
    T old = atomicAdd(p, v);
    detail::fence_after(o);
    return old;
#endif
  } else if constexpr (detail::is_i32_v<T>) {
    unsigned* q = reinterpret_cast<unsigned*>(p);
    return (T)(o == MemoryOrder::relaxed ? atomicAdd(q, (unsigned)v)
                                         : detail::atom_add_u32(q, (unsigned)v, o));
  } else if constexpr (detail::is_i64_v<T>) {
    unsigned long long* q = reinterpret_cast<unsigned long long*>(p);
    return (T)(o == MemoryOrder::relaxed ? atomicAdd(q, (unsigned long long)v)
                                         : detail::atom_add_u64(q, (unsigned long long)v, o));
  } else {
    static_assert(is_same_v<T, float>, "tl::atomic_add: unsupported element type "
                  "(float, double, half_t, bfloat16_t, 32/64-bit integers)");
  }
}

#define TL_ATOMIC_MINMAX_(NAME, KMAX)                                                       \
  template <class T, class V>                                                               \
  TL_DEVICE T NAME(T* p, V val, MemoryOrder o = MemoryOrder::relaxed) {                     \
    const T v = cast<T>(val);                                                               \
    if constexpr (is_same_v<T, float>) return detail::float_minmax<KMAX>(p, v, o);          \
    else if constexpr (is_same_v<T, double>) return detail::double_minmax<KMAX>(p, v, o);   \
    else if constexpr (is_same_v<T, half_t> || is_same_v<T, bfloat16_t>)                    \
      return detail::half_minmax<KMAX>(p, v, o);                                            \
    else return detail::int_minmax<KMAX>(p, v, o);                                          \
  }
TL_ATOMIC_MINMAX_(atomic_max, true)
TL_ATOMIC_MINMAX_(atomic_min, false)
#undef TL_ATOMIC_MINMAX_

// Bitwise OR / AND / XOR of a 32- or 64-bit integer; returns the old value.
#define TL_ATOMIC_BITWISE_(NAME, OP, BUILTIN)                                                 \
  template <class T, class V>                                                                 \
  TL_DEVICE T NAME(T* p, V val, MemoryOrder o = MemoryOrder::relaxed) {                       \
    static_assert(detail::is_i32_v<T> || detail::is_i64_v<T>,                                 \
                  "tl::" #NAME ": 32- or 64-bit integers only");                              \
    if constexpr (detail::is_i32_v<T>) {                                                      \
      unsigned* q = reinterpret_cast<unsigned*>(p);                                           \
      if (o == MemoryOrder::relaxed) return (T)BUILTIN(q, (unsigned)(T)val);                  \
      return (T)detail::atom_##OP##_b32(q, (unsigned)(T)val, o);                              \
    } else {                                                                                  \
      unsigned long long* q = reinterpret_cast<unsigned long long*>(p);                       \
      if (o == MemoryOrder::relaxed) return (T)BUILTIN(q, (unsigned long long)(T)val);        \
      return (T)detail::atom_##OP##_b64(q, (unsigned long long)(T)val, o);                    \
    }                                                                                         \
  }
TL_ATOMIC_BITWISE_(atomic_or, or, atomicOr)
TL_ATOMIC_BITWISE_(atomic_and, and, atomicAnd)
TL_ATOMIC_BITWISE_(atomic_xor, xor, atomicXor)
#undef TL_ATOMIC_BITWISE_

// ---- loads and stores with an order ------------------------------------------------------------
template <class T>
TL_DEVICE T atomic_load(const T* p, MemoryOrder o = MemoryOrder::seq_cst) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                "tl::atomic_load: 2-, 4- or 8-byte types");
  if (o == MemoryOrder::seq_cst) asm volatile("fence.sc.gpu;\n" ::: "memory");
  const bool acq = o != MemoryOrder::relaxed && o != MemoryOrder::release;
  if constexpr (sizeof(T) == 2) {
    unsigned short r;
    if (acq) asm volatile("ld.acquire.gpu.b16 %0, [%1];\n" : "=h"(r) : "l"(p) : "memory");
    else asm volatile("ld.relaxed.gpu.b16 %0, [%1];\n" : "=h"(r) : "l"(p) : "memory");
    return bit_cast<T>(r);
  } else if constexpr (sizeof(T) == 4) {
    unsigned r;
    if (acq) asm volatile("ld.acquire.gpu.b32 %0, [%1];\n" : "=r"(r) : "l"(p) : "memory");
    else asm volatile("ld.relaxed.gpu.b32 %0, [%1];\n" : "=r"(r) : "l"(p) : "memory");
    return bit_cast<T>(r);
  } else {
    unsigned long long r;
    if (acq) asm volatile("ld.acquire.gpu.b64 %0, [%1];\n" : "=l"(r) : "l"(p) : "memory");
    else asm volatile("ld.relaxed.gpu.b64 %0, [%1];\n" : "=l"(r) : "l"(p) : "memory");
    return bit_cast<T>(r);
  }
}

template <class T, class V>
TL_DEVICE void atomic_store(T* p, V val, MemoryOrder o = MemoryOrder::seq_cst) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                "tl::atomic_store: 2-, 4- or 8-byte types");
  const T v = cast<T>(val);
  if (o == MemoryOrder::seq_cst) asm volatile("fence.sc.gpu;\n" ::: "memory");
  const bool rel = o == MemoryOrder::release || o == MemoryOrder::acq_rel;
  if constexpr (sizeof(T) == 2) {
    unsigned short b = bit_cast<unsigned short>(v);
    if (rel) asm volatile("st.release.gpu.b16 [%0], %1;\n" ::"l"(p), "h"(b) : "memory");
    else asm volatile("st.relaxed.gpu.b16 [%0], %1;\n" ::"l"(p), "h"(b) : "memory");
  } else if constexpr (sizeof(T) == 4) {
    unsigned b = bit_cast<unsigned>(v);
    if (rel) asm volatile("st.release.gpu.b32 [%0], %1;\n" ::"l"(p), "r"(b) : "memory");
    else asm volatile("st.relaxed.gpu.b32 [%0], %1;\n" ::"l"(p), "r"(b) : "memory");
  } else {
    unsigned long long b = bit_cast<unsigned long long>(v);
    if (rel) asm volatile("st.release.gpu.b64 [%0], %1;\n" ::"l"(p), "l"(b) : "memory");
    else asm volatile("st.relaxed.gpu.b64 [%0], %1;\n" ::"l"(p), "l"(b) : "memory");
  }
}

// ---- vector adds ---------------------------------------------------------------------------
TL_DEVICE __half2 atomic_addx2(half_t* dst, __half2 v) {
  return atomicAdd(reinterpret_cast<__half2*>(dst), v);
}
TL_DEVICE __nv_bfloat162 atomic_addx2(bfloat16_t* dst, __nv_bfloat162 v) {
  return atomicAdd(reinterpret_cast<__nv_bfloat162*>(dst), v);
}
TL_DEVICE float2 atomic_addx2(float* dst, float2 v) {
#if TL_SM90
  return atomicAdd(reinterpret_cast<float2*>(dst), v);
#else
  return make_float2(atomicAdd(dst, v.x), atomicAdd(dst + 1, v.y));
#endif
}
TL_DEVICE float4 atomic_addx4(float* dst, float4 v) {
#if TL_SM90
  return atomicAdd(reinterpret_cast<float4*>(dst), v);
#else
  return make_float4(atomicAdd(dst, v.x), atomicAdd(dst + 1, v.y), atomicAdd(dst + 2, v.z),
                     atomicAdd(dst + 3, v.w));
#endif
}
TL_DEVICE __half2 atomic_addx4(half_t* dst, __half2 lo, __half2 hi) {
  atomicAdd(reinterpret_cast<__half2*>(dst) + 1, hi);
  return atomicAdd(reinterpret_cast<__half2*>(dst), lo);
}
TL_DEVICE __nv_bfloat162 atomic_addx4(bfloat16_t* dst, __nv_bfloat162 lo, __nv_bfloat162 hi) {
  atomicAdd(reinterpret_cast<__nv_bfloat162*>(dst) + 1, hi);
  return atomicAdd(reinterpret_cast<__nv_bfloat162*>(dst), lo);
}

// Pointer forms: the source elements are read (and converted to the destination type).
template <class T, class S>
TL_DEVICE auto atomic_addx2(T* dst, const S* src) {
  if constexpr (is_same_v<T, half_t>) {
    return atomic_addx2(dst, __halves2half2(cast<half_t>(src[0]), cast<half_t>(src[1])));
  } else if constexpr (is_same_v<T, bfloat16_t>) {
    return atomic_addx2(dst, __halves2bfloat162(cast<bfloat16_t>(src[0]),
                                                cast<bfloat16_t>(src[1])));
  } else {
    static_assert(is_same_v<T, float>, "tl::atomic_addx2: half_t, bfloat16_t or float");
    return atomic_addx2(dst, make_float2(cast<float>(src[0]), cast<float>(src[1])));
  }
}
template <class T, class S>
TL_DEVICE auto atomic_addx4(T* dst, const S* src) {
  if constexpr (is_same_v<T, half_t>) {
    return atomic_addx4(dst, __halves2half2(cast<half_t>(src[0]), cast<half_t>(src[1])),
                        __halves2half2(cast<half_t>(src[2]), cast<half_t>(src[3])));
  } else if constexpr (is_same_v<T, bfloat16_t>) {
    return atomic_addx4(
        dst, __halves2bfloat162(cast<bfloat16_t>(src[0]), cast<bfloat16_t>(src[1])),
        __halves2bfloat162(cast<bfloat16_t>(src[2]), cast<bfloat16_t>(src[3])));
  } else {
    static_assert(is_same_v<T, float>, "tl::atomic_addx4: half_t, bfloat16_t or float");
    return atomic_addx4(dst, make_float4(cast<float>(src[0]), cast<float>(src[1]),
                                         cast<float>(src[2]), cast<float>(src[3])));
  }
}

}  // namespace tl
