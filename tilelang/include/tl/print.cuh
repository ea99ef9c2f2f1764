// tl/print.cuh — device printing in the exact formats of SEMANTICS §14 (T.print).
//
//   tl::print_msg(msg)
//     msg='<msg>' BlockIdx=(bx, by, bz), ThreadIdx=(tx, ty, tz)
//   tl::print_var(msg, value)
//     msg='<msg>' BlockIdx=(bx, by, bz), ThreadIdx=(tx, ty, tz): dtype=<t> value=<v>
//   tl::print_buffer_value(msg, buffer_name, flat_index, value)
//     msg='<msg>' BlockIdx=(...), ThreadIdx=(...): buffer=<name>, index=<i>, dtype=<t> value=<v>
//
// <t> is the C name (float, double, half_t, bfloat16_t, fp8_e4_t, fp8_e5_t, bool, signed char,
// unsigned char, short, unsigned short, int, uint, long long, unsigned long long, pointer);
// <v> is %f for floating types (16/8-bit floats converted to float), %d / %u / %lld / %llu
// for integers, true/false for bool, %p for pointers. Each call prints one line; which
// threads call it is the code generator's decision (§14).
#pragma once
#include "common.cuh"

namespace tl {

namespace detail {
enum PrintKind { kPrintF, kPrintI32, kPrintU32, kPrintI64, kPrintU64, kPrintBool, kPrintPtr };

template <class T> struct print_traits;
#define TL_PRINT_TRAITS_(T, NAME, KIND)                         \
  template <> struct print_traits<T> {                          \
    static constexpr const char* name = NAME;                   \
    static constexpr PrintKind kind = KIND;                     \
  };
TL_PRINT_TRAITS_(float, "float", kPrintF)
TL_PRINT_TRAITS_(double, "double", kPrintF)
TL_PRINT_TRAITS_(half_t, "half_t", kPrintF)
TL_PRINT_TRAITS_(bfloat16_t, "bfloat16_t", kPrintF)
TL_PRINT_TRAITS_(fp8_e4_t, "fp8_e4_t", kPrintF)
TL_PRINT_TRAITS_(fp8_e5_t, "fp8_e5_t", kPrintF)
TL_PRINT_TRAITS_(bool, "bool", kPrintBool)
TL_PRINT_TRAITS_(char, "char", kPrintI32)
TL_PRINT_TRAITS_(signed char, "signed char", kPrintI32)
TL_PRINT_TRAITS_(unsigned char, "unsigned char", kPrintU32)
TL_PRINT_TRAITS_(short, "short", kPrintI32)
TL_PRINT_TRAITS_(unsigned short, "unsigned short", kPrintU32)
TL_PRINT_TRAITS_(int, "int", kPrintI32)
TL_PRINT_TRAITS_(unsigned int, "uint", kPrintU32)
TL_PRINT_TRAITS_(long, "long long", kPrintI64)
TL_PRINT_TRAITS_(unsigned long, "unsigned long long", kPrintU64)
TL_PRINT_TRAITS_(long long, "long long", kPrintI64)
TL_PRINT_TRAITS_(unsigned long long, "unsigned long long", kPrintU64)
#undef TL_PRINT_TRAITS_
template <class T> struct print_traits<T*> {
  static constexpr const char* name = "pointer";
  static constexpr PrintKind kind = kPrintPtr;
};

#define TL_PRINT_HEAD_ "msg='%s' BlockIdx=(%d, %d, %d), ThreadIdx=(%d, %d, %d)"
#define TL_PRINT_IDS_                                                                      \
  (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z, (int)threadIdx.x, (int)threadIdx.y,   \
      (int)threadIdx.z

// One printf per value kind, so every format string is a literal.
#define TL_PRINT_BY_KIND_(PREFIX, ...)                                                         \
  if constexpr (traits::kind == detail::kPrintF)                                                       \
    printf(PREFIX "%f\n", __VA_ARGS__, (double)detail::print_float(v));                        \
  else if constexpr (traits::kind == detail::kPrintI32) printf(PREFIX "%d\n", __VA_ARGS__, (int)v);    \
  else if constexpr (traits::kind == detail::kPrintU32)                                                \
    printf(PREFIX "%u\n", __VA_ARGS__, (unsigned)v);                                           \
  else if constexpr (traits::kind == detail::kPrintI64)                                                \
    printf(PREFIX "%lld\n", __VA_ARGS__, (long long)v);                                        \
  else if constexpr (traits::kind == detail::kPrintU64)                                                \
    printf(PREFIX "%llu\n", __VA_ARGS__, (unsigned long long)v);                               \
  else if constexpr (traits::kind == detail::kPrintBool)                                               \
    printf(PREFIX "%s\n", __VA_ARGS__, v ? "true" : "false");                                  \
  else                                                                                         \
    printf(PREFIX "%p\n", __VA_ARGS__, (const void*)v);

template <class T> TL_DEVICE float print_float(T v) { return cast<float>(v); }
TL_DEVICE double print_float(double v) { return v; }
}  // namespace detail

TL_DEVICE void print_msg(const char* msg) {
  printf(TL_PRINT_HEAD_ "\n", msg, TL_PRINT_IDS_);
}

template <class T>
TL_DEVICE void print_var(const char* msg, T v) {
  using traits = detail::print_traits<T>;
  TL_PRINT_BY_KIND_(TL_PRINT_HEAD_ ": dtype=%s value=", msg, TL_PRINT_IDS_, traits::name)
}

template <class T>
TL_DEVICE void print_buffer_value(const char* msg, const char* buffer, int index, T v) {
  using traits = detail::print_traits<T>;
  TL_PRINT_BY_KIND_(TL_PRINT_HEAD_ ": buffer=%s, index=%d, dtype=%s value=", msg,
                    TL_PRINT_IDS_, buffer, index, traits::name)
}

#undef TL_PRINT_BY_KIND_
#undef TL_PRINT_IDS_
#undef TL_PRINT_HEAD_

}  // namespace tl
