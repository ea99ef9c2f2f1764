// tl/wide_access.cuh — explicit-width memory accesses (T.ldg32 ... T.stg256, T.lds32 ...
// T.sts128): one instruction moves 32, 64, 128 (or, as two instructions, 256) bits between
// memory and 32-bit words.
//
//   tl::load_global_<Bits>(words, src)                     ld.global(.v2/.v4).u32
//   tl::load_global_<Bits>_conditional(words, src, pred)   words are 0 where pred is false
//   tl::store_global_<Bits>(dst, w0, .., wN-1)             st.global(.v2/.v4).u32
//   tl::store_global_<Bits>_conditional(dst, w0, .., wN-1, pred)
//   tl::load_shared_<Bits>(words, src) / tl::store_shared_<Bits>(dst, w0, .., wN-1)
//
// `words` is the caller's uint32_t[Bits / 32] (registers once inlined). Rules the caller keeps:
// the address is aligned to Bits / 8 bytes (16 for the 256-bit forms), as the instructions
// require; a false predicate skips the memory access (the address may be anything).
#pragma once
#include "common.cuh"

namespace tl {

namespace detail {
// N words from global memory under a predicate; the words keep their (zero) value when it is
// false. "memory": ordered with the kernel's other accesses of the same addresses.
template <int N> struct global_words;

template <> struct global_words<1> {
  TL_DEVICE static void load(uint32_t* w, const void* src, bool pred) {
    uint32_t a = 0;
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p ld.global.u32 %0, [%1];\n}\n"
                 : "+r"(a) : "l"(src), "r"((int)pred) : "memory");
    w[0] = a;
  }
  TL_DEVICE static void store(void* dst, const uint32_t* w, bool pred) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p st.global.u32 [%0], %1;\n}\n"
                 :: "l"(dst), "r"(w[0]), "r"((int)pred) : "memory");
  }
};

template <> struct global_words<2> {
  TL_DEVICE static void load(uint32_t* w, const void* src, bool pred) {
    uint32_t a = 0, b = 0;
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %3, 0;\n"
                 " @p ld.global.v2.u32 {%0, %1}, [%2];\n}\n"
                 : "+r"(a), "+r"(b) : "l"(src), "r"((int)pred) : "memory");
    w[0] = a;
    w[1] = b;
  }
  TL_DEVICE static void store(void* dst, const uint32_t* w, bool pred) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %3, 0;\n"
                 " @p st.global.v2.u32 [%0], {%1, %2};\n}\n"
                 :: "l"(dst), "r"(w[0]), "r"(w[1]), "r"((int)pred) : "memory");
  }
};

template <> struct global_words<4> {
  TL_DEVICE static void load(uint32_t* w, const void* src, bool pred) {
    uint32_t a = 0, b = 0, c = 0, d = 0;
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n"
                 " @p ld.global.v4.u32 {%0, %1, %2, %3}, [%4];\n}\n"
                 : "+r"(a), "+r"(b), "+r"(c), "+r"(d) : "l"(src), "r"((int)pred) : "memory");
    w[0] = a;
    w[1] = b;
    w[2] = c;
    w[3] = d;
  }
  TL_DEVICE static void store(void* dst, const uint32_t* w, bool pred) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n"
                 " @p st.global.v4.u32 [%0], {%1, %2, %3, %4};\n}\n"
                 :: "l"(dst), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]), "r"((int)pred)
                 : "memory");
  }
};

// 256 bits: two 128-bit accesses (one instruction only on sm_100, which this library does not
// target)
template <> struct global_words<8> {
  TL_DEVICE static void load(uint32_t* w, const void* src, bool pred) {
    global_words<4>::load(w, src, pred);
    global_words<4>::load(w + 4, static_cast<const char*>(src) + 16, pred);
  }
  TL_DEVICE static void store(void* dst, const uint32_t* w, bool pred) {
    global_words<4>::store(dst, w, pred);
    global_words<4>::store(static_cast<char*>(dst) + 16, w + 4, pred);
  }
};

template <int N> TL_DEVICE void load_shared_words(uint32_t* w, const void* src) {
  if constexpr (N == 1) {
    w[0] = *static_cast<const uint32_t*>(src);
  } else if constexpr (N == 2) {
    uint2 v = *static_cast<const uint2*>(src);
    w[0] = v.x;
    w[1] = v.y;
  } else {
    static_assert(N == 4, "shared accesses move 1, 2 or 4 words");
    uint4 v = *static_cast<const uint4*>(src);
    w[0] = v.x;
    w[1] = v.y;
    w[2] = v.z;
    w[3] = v.w;
  }
}
}  // namespace detail

TL_DEVICE void load_global_32(uint32_t* w, const void* src) {
  detail::global_words<1>::load(w, src, true);
}
TL_DEVICE void load_global_64(uint32_t* w, const void* src) {
  detail::global_words<2>::load(w, src, true);
}
TL_DEVICE void load_global_128(uint32_t* w, const void* src) {
  detail::global_words<4>::load(w, src, true);
}
TL_DEVICE void load_global_256(uint32_t* w, const void* src) {
  detail::global_words<8>::load(w, src, true);
}
TL_DEVICE void load_global_32_conditional(uint32_t* w, const void* src, bool pred) {
  detail::global_words<1>::load(w, src, pred);
}
TL_DEVICE void load_global_64_conditional(uint32_t* w, const void* src, bool pred) {
  detail::global_words<2>::load(w, src, pred);
}
TL_DEVICE void load_global_128_conditional(uint32_t* w, const void* src, bool pred) {
  detail::global_words<4>::load(w, src, pred);
}
TL_DEVICE void load_global_256_conditional(uint32_t* w, const void* src, bool pred) {
  detail::global_words<8>::load(w, src, pred);
}

TL_DEVICE void store_global_32(void* dst, uint32_t a) {
  const uint32_t w[1] = {a};
  detail::global_words<1>::store(dst, w, true);
}
TL_DEVICE void store_global_64(void* dst, uint32_t a, uint32_t b) {
  const uint32_t w[2] = {a, b};
  detail::global_words<2>::store(dst, w, true);
}
TL_DEVICE void store_global_128(void* dst, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  const uint32_t w[4] = {a, b, c, d};
  detail::global_words<4>::store(dst, w, true);
}
TL_DEVICE void store_global_256(void* dst, uint32_t a, uint32_t b, uint32_t c, uint32_t d,
                                uint32_t e, uint32_t f, uint32_t g, uint32_t h) {
  const uint32_t w[8] = {a, b, c, d, e, f, g, h};
  detail::global_words<8>::store(dst, w, true);
}
TL_DEVICE void store_global_32_conditional(void* dst, uint32_t a, bool pred) {
  const uint32_t w[1] = {a};
  detail::global_words<1>::store(dst, w, pred);
}
TL_DEVICE void store_global_64_conditional(void* dst, uint32_t a, uint32_t b, bool pred) {
  const uint32_t w[2] = {a, b};
  detail::global_words<2>::store(dst, w, pred);
}
TL_DEVICE void store_global_128_conditional(void* dst, uint32_t a, uint32_t b, uint32_t c,
                                            uint32_t d, bool pred) {
  const uint32_t w[4] = {a, b, c, d};
  detail::global_words<4>::store(dst, w, pred);
}
TL_DEVICE void store_global_256_conditional(void* dst, uint32_t a, uint32_t b, uint32_t c,
                                            uint32_t d, uint32_t e, uint32_t f, uint32_t g,
                                            uint32_t h, bool pred) {
  const uint32_t w[8] = {a, b, c, d, e, f, g, h};
  detail::global_words<8>::store(dst, w, pred);
}

TL_DEVICE void load_shared_32(uint32_t* w, const void* src) { detail::load_shared_words<1>(w, src); }
TL_DEVICE void load_shared_64(uint32_t* w, const void* src) { detail::load_shared_words<2>(w, src); }
TL_DEVICE void load_shared_128(uint32_t* w, const void* src) {
  detail::load_shared_words<4>(w, src);
}
TL_DEVICE void store_shared_32(void* dst, uint32_t a) { *static_cast<uint32_t*>(dst) = a; }
TL_DEVICE void store_shared_64(void* dst, uint32_t a, uint32_t b) {
  *static_cast<uint2*>(dst) = make_uint2(a, b);
}
TL_DEVICE void store_shared_128(void* dst, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  *static_cast<uint4*>(dst) = make_uint4(a, b, c, d);
}

}  // namespace tl
