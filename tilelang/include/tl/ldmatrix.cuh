// tl/ldmatrix.cuh — ldmatrix (sm_75+) and stmatrix (sm_90+) wrappers (HARDWARE §2).
//
//   tl::ldmatrix_x1(r0, p)          / ldmatrix_x1_trans
//   tl::ldmatrix_x2(r0, r1, p)      / ldmatrix_x2_trans
//   tl::ldmatrix_x4(r0..r3, p)      / ldmatrix_x4_trans
//   tl::ldmatrix_x{1,2,4}[_trans](uint32_t* r, p)   array forms (r[0..n-1]); `p` a pointer or
//                                                  a 32-bit shared-memory address
//   tl::stmatrix_x{1,2,4}[_trans](p, r...)  sm_90
//   tl::pack_b16x2(lo, hi)                 two 16-bit elements as one register
//
// `p` is this lane's row address in shared memory: lane t supplies row t%8 of matrix t/8
// (lanes 0-7 for x1, 0-15 for x2, all for x4); each row is 8 b16 elements = 16 bytes, 16-byte
// aligned. Without .trans, register j of lane t holds matrix j row t/4, columns 2(t%4) (low
// half) and 2(t%4)+1 (high half); .trans swaps rows and columns.
#pragma once
#include "common.cuh"

namespace tl {

// The instructions take a 32-bit shared-memory address (`a`); the pointer forms convert.
#define TL_LDMATRIX_(NAME, SHAPE, N, OUTS, ...)                                                \
  TL_DEVICE void NAME(uint32_t* r, uint32_t a) {                                            \
    asm volatile("ldmatrix.sync.aligned.m8n8." SHAPE ".shared.b16 " OUTS ", [%" #N "];\n"    \
                 : __VA_ARGS__                                                              \
                 : "r"(a));                                                                 \
  }                                                                                         \
  TL_DEVICE void NAME(uint32_t* r, const void* p) { NAME(r, smem_addr(p)); }

TL_LDMATRIX_(ldmatrix_x1, "x1", 1, "{%0}", "=r"(r[0]))
TL_LDMATRIX_(ldmatrix_x2, "x2", 2, "{%0, %1}", "=r"(r[0]), "=r"(r[1]))
TL_LDMATRIX_(ldmatrix_x4, "x4", 4, "{%0, %1, %2, %3}", "=r"(r[0]), "=r"(r[1]), "=r"(r[2]),
             "=r"(r[3]))
TL_LDMATRIX_(ldmatrix_x1_trans, "x1.trans", 1, "{%0}", "=r"(r[0]))
TL_LDMATRIX_(ldmatrix_x2_trans, "x2.trans", 2, "{%0, %1}", "=r"(r[0]), "=r"(r[1]))
TL_LDMATRIX_(ldmatrix_x4_trans, "x4.trans", 4, "{%0, %1, %2, %3}", "=r"(r[0]), "=r"(r[1]),
             "=r"(r[2]), "=r"(r[3]))
#undef TL_LDMATRIX_

TL_DEVICE void ldmatrix_x1(uint32_t& r0, const void* p) { ldmatrix_x1(&r0, p); }
TL_DEVICE void ldmatrix_x2(uint32_t& r0, uint32_t& r1, const void* p) {
  uint32_t r[2];
  ldmatrix_x2(r, p);
  r0 = r[0], r1 = r[1];
}
TL_DEVICE void ldmatrix_x4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                           const void* p) {
  uint32_t r[4];
  ldmatrix_x4(r, p);
  r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
TL_DEVICE void ldmatrix_x1_trans(uint32_t& r0, const void* p) { ldmatrix_x1_trans(&r0, p); }
TL_DEVICE void ldmatrix_x2_trans(uint32_t& r0, uint32_t& r1, const void* p) {
  uint32_t r[2];
  ldmatrix_x2_trans(r, p);
  r0 = r[0], r1 = r[1];
}
TL_DEVICE void ldmatrix_x4_trans(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                                 const void* p) {
  uint32_t r[4];
  ldmatrix_x4_trans(r, p);
  r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}

#if TL_HAVE_SM90
// stmatrix: the inverse of ldmatrix (same lane/address/register distribution), sm_90+.
TL_DEVICE void stmatrix_x1(void* p, uint32_t r0) {
  asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};\n" ::"r"(smem_addr(p)),
               "r"(r0)
               : "memory");
}
TL_DEVICE void stmatrix_x2(void* p, uint32_t r0, uint32_t r1) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};\n" ::"r"(smem_addr(p)),
               "r"(r0), "r"(r1)
               : "memory");
}
TL_DEVICE void stmatrix_x4(void* p, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                   smem_addr(p)),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}
TL_DEVICE void stmatrix_x1_trans(void* p, uint32_t r0) {
  asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};\n" ::"r"(
                   smem_addr(p)),
               "r"(r0)
               : "memory");
}
TL_DEVICE void stmatrix_x2_trans(void* p, uint32_t r0, uint32_t r1) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};\n" ::"r"(
                   smem_addr(p)),
               "r"(r0), "r"(r1)
               : "memory");
}
TL_DEVICE void stmatrix_x4_trans(void* p, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(
                   smem_addr(p)),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}
TL_DEVICE void stmatrix_x4(void* p, const uint32_t* r) { stmatrix_x4(p, r[0], r[1], r[2], r[3]); }
TL_DEVICE void stmatrix_x4_trans(void* p, const uint32_t* r) {
  stmatrix_x4_trans(p, r[0], r[1], r[2], r[3]);
}
// Two 16-bit elements as one register of a stmatrix / mma fragment (lo in the low half).
template <class E>
TL_DEVICE uint32_t pack_b16x2(E lo, E hi) {
  static_assert(sizeof(E) == 2, "tl::pack_b16x2: 16-bit elements");
  struct two { E v[2]; };
  return bit_cast<uint32_t>(two{{lo, hi}});
}
#endif  // TL_HAVE_SM90

}  // namespace tl
