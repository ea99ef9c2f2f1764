// tl/tma.cuh — TMA (cp.async.bulk.tensor) and bulk copies, sm_90 (HARDWARE §7).
//
// `desc` is the generic address of a `const __grid_constant__ tl::TensorMap` kernel parameter
// (&param). Coordinates are element indices, innermost dimension first (c0 = dim 0); they may
// be negative or past the end on loads (out-of-bounds elements are filled).
//
//   tl::tma_load(desc, bar, smem_dst, c0[, c1 .. c4])          1-5 D; completes `bytes` on
//                                                             the mbarrier `bar`
//   tl::tma_load_multicast(desc, bar, smem_dst, cta_mask, c0[, .. c4])
//   tl::tma_load_im2col(desc, bar, smem_dst, c, w, h, n, off_w, off_h)   NHWC im2col columns
//   tl::tma_store(desc, smem_src, c0[, .. c4])                 bulk-group store
//   tl::tma_store_add(desc, smem_src, c0[, .. c4])             element-wise add into global
//   tl::tma_store_arrive()                                     cp.async.bulk.commit_group
//   tl::tma_store_wait<N>()                                    wait_group.read N (smem reusable)
//   tl::tma_store_wait_complete<N>()                           wait_group N (writes visible)
//   tl::prefetch_tma_descriptor(desc)                          prefetch.tensormap
//   tl::tma_load_1d(smem_dst, gmem_src, bytes, bar)            1-D bulk copy (no tensor map) to
//                                                             smem, completing `bytes` on `bar`
//   tl::tma_store_1d(gmem_dst, smem_src, bytes)                1-D bulk-group copy to global
//   tl::tma_store_cluster(dst, src, cta_rank, bytes, bar)      bulk copy of this CTA's smem
//                                                             into CTA `cta_rank`'s `dst`,
//                                                             completing `bytes` on its `bar`
//   tl::map_shared_rank(ptr, cta_rank)                         generic address of `ptr`'s
//                                                             object in CTA cta_rank
//   tl::copy_to_peer<N>(remote, src)                           the block's threads store N
//                                                             elements at `remote`
//
// Caller's duties: smem 128-byte aligned (1024 with 128B swizzle), the expected tx bytes on
// `bar` equal the full box bytes of every load landing on it in the phase, generic smem writes
// fenced with tl::fence_proxy_async() + a barrier before a store, and tma_store_wait before
// the source buffer is reused or the kernel exits.
#pragma once
#include "common.cuh"

namespace tl {

#if TL_HAVE_SM90

#define TL_TMA_LOAD_(DIMS, PARAMS, COORDS, ...)                                             \
  TL_DEVICE void tma_load(const void* desc, uint64_t* bar, void* smem_dst, PARAMS) {        \
    asm volatile("cp.async.bulk.tensor." #DIMS                                              \
                 "d.shared::cluster.global.mbarrier::complete_tx::bytes"                    \
                 " [%0], [%1, {" COORDS "}], [%2];\n" ::"r"(smem_addr(smem_dst)),           \
                 "l"(desc), "r"(smem_addr(bar)), __VA_ARGS__                                \
                 : "memory");                                                               \
  }
#define TL_TMA_MCAST_(DIMS, PARAMS, COORDS, ...)                                            \
  TL_DEVICE void tma_load_multicast(const void* desc, uint64_t* bar, void* smem_dst,        \
                                    uint16_t cta_mask, PARAMS) {                            \
    asm volatile("cp.async.bulk.tensor." #DIMS                                              \
                 "d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster" \
                 " [%0], [%1, {" COORDS "}], [%2], %3;\n" ::"r"(smem_addr(smem_dst)),       \
                 "l"(desc), "r"(smem_addr(bar)), "h"(cta_mask), __VA_ARGS__                 \
                 : "memory");                                                               \
  }
#define TL_TMA_STORE_(NAME, OP, DIMS, PARAMS, COORDS, ...)                                  \
  TL_DEVICE void NAME(const void* desc, const void* smem_src, PARAMS) {                     \
    asm volatile(OP "." #DIMS "d.global.shared::cta" OP_SUFFIX_##NAME                        \
                 " [%0, {" COORDS "}], [%1];\n" ::"l"(desc), "r"(smem_addr(smem_src)),      \
                 __VA_ARGS__                                                                \
                 : "memory");                                                               \
  }
#define OP_SUFFIX_tma_store ".bulk_group"
#define OP_SUFFIX_tma_store_add ".add.tile.bulk_group"

TL_TMA_LOAD_(1, int c0, "%3", "r"(c0))
TL_TMA_LOAD_(2, int c0 TL_COMMA int c1, "%3, %4", "r"(c0), "r"(c1))
TL_TMA_LOAD_(3, int c0 TL_COMMA int c1 TL_COMMA int c2, "%3, %4, %5", "r"(c0), "r"(c1),
             "r"(c2))
TL_TMA_LOAD_(4, int c0 TL_COMMA int c1 TL_COMMA int c2 TL_COMMA int c3, "%3, %4, %5, %6",
             "r"(c0), "r"(c1), "r"(c2), "r"(c3))
TL_TMA_LOAD_(5, int c0 TL_COMMA int c1 TL_COMMA int c2 TL_COMMA int c3 TL_COMMA int c4,
             "%3, %4, %5, %6, %7", "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4))

TL_TMA_MCAST_(1, int c0, "%4", "r"(c0))
TL_TMA_MCAST_(2, int c0 TL_COMMA int c1, "%4, %5", "r"(c0), "r"(c1))
TL_TMA_MCAST_(3, int c0 TL_COMMA int c1 TL_COMMA int c2, "%4, %5, %6", "r"(c0), "r"(c1),
              "r"(c2))
TL_TMA_MCAST_(4, int c0 TL_COMMA int c1 TL_COMMA int c2 TL_COMMA int c3, "%4, %5, %6, %7",
              "r"(c0), "r"(c1), "r"(c2), "r"(c3))
TL_TMA_MCAST_(5, int c0 TL_COMMA int c1 TL_COMMA int c2 TL_COMMA int c3 TL_COMMA int c4,
              "%4, %5, %6, %7, %8", "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4))

// im2col mode over an NHWC tensor (4-D map from cuTensorMapEncodeIm2col): `pixels per column`
// pixels of `channels per pixel` channels, starting at the pixel (w, h, n) of the bounding box
// and walking it W first, each read at (w + off_w, h + off_h); outside the tensor reads 0.
TL_DEVICE void tma_load_im2col(const void* desc, uint64_t* bar, void* smem_dst, int c, int w,
                               int h, int n, uint16_t off_w, uint16_t off_h) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2], {%7, %8};\n" ::"r"(smem_addr(smem_dst)),
      "l"(desc), "r"(smem_addr(bar)), "r"(c), "r"(w), "r"(h), "r"(n), "h"(off_w), "h"(off_h)
      : "memory");
}

#define TL_TMA_STORES_(NAME, OP)                                                             \
  TL_TMA_STORE_(NAME, OP, 1, int c0, "%2", "r"(c0))                                          \
  TL_TMA_STORE_(NAME, OP, 2, int c0 TL_COMMA int c1, "%2, %3", "r"(c0), "r"(c1))             \
  TL_TMA_STORE_(NAME, OP, 3, int c0 TL_COMMA int c1 TL_COMMA int c2, "%2, %3, %4", "r"(c0),  \
                "r"(c1), "r"(c2))                                                            \
  TL_TMA_STORE_(NAME, OP, 4, int c0 TL_COMMA int c1 TL_COMMA int c2 TL_COMMA int c3,         \
                "%2, %3, %4, %5", "r"(c0), "r"(c1), "r"(c2), "r"(c3))                        \
  TL_TMA_STORE_(NAME, OP, 5,                                                                 \
                int c0 TL_COMMA int c1 TL_COMMA int c2 TL_COMMA int c3 TL_COMMA int c4,      \
                "%2, %3, %4, %5, %6", "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4))
TL_TMA_STORES_(tma_store, "cp.async.bulk.tensor")
TL_TMA_STORES_(tma_store_add, "cp.reduce.async.bulk.tensor")

#undef TL_TMA_STORES_
#undef TL_TMA_LOAD_
#undef TL_TMA_MCAST_
#undef TL_TMA_STORE_
#undef OP_SUFFIX_tma_store
#undef OP_SUFFIX_tma_store_add

TL_DEVICE void tma_store_arrive() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

template <int N>
TL_DEVICE void tma_store_wait() {
  static_assert(N >= 0, "tma_store_wait needs N >= 0");
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

template <int N>
TL_DEVICE void tma_store_wait_complete() {
  static_assert(N >= 0, "tma_store_wait_complete needs N >= 0");
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

TL_DEVICE void prefetch_tma_descriptor(const void* desc) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(desc) : "memory");
}

// cp.async.bulk (no tensor map): `bytes` a multiple of 16, both addresses 16-byte aligned.
TL_DEVICE void tma_load_1d(void* smem_dst, const void* gmem_src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
      ::"r"(smem_addr(smem_dst)), "l"(gmem_src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

TL_DEVICE void tma_store_1d(void* gmem_dst, const void* smem_src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(gmem_dst),
               "r"(smem_addr(smem_src)), "r"(bytes)
               : "memory");
}

// Distributed shared memory: `dst` and `bar` are this CTA's addresses of the peer's tile and
// barrier (the same variables in every CTA), mapped into CTA `cta_rank` with mapa. The
// caller has announced the bytes on the peer's barrier (mbarrier_arrive_expect_tx_remote).
TL_DEVICE void tma_store_cluster(void* dst, const void* src, uint32_t cta_rank, uint32_t bytes,
                                 uint64_t* bar) {
  asm volatile(
      "{\n\t.reg .b32 rdst, rbar;\n\t"
      "mapa.shared::cluster.u32 rdst, %0, %2;\n\t"
      "mapa.shared::cluster.u32 rbar, %3, %2;\n\t"
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [rdst], [%1], %4,"
      " [rbar];\n}\n" ::"r"(smem_addr(dst)),
      "r"(smem_addr(src)), "r"(cta_rank), "r"(smem_addr(bar)), "r"(bytes)
      : "memory");
}

// This CTA's shared-memory object at `ptr`, as seen in CTA `cta_rank` of the cluster (a generic
// address; CUDA's cluster_group::map_shared_rank).
template <typename T>
TL_DEVICE T* map_shared_rank(T* ptr, uint32_t cta_rank) {
  uint64_t out;
  asm volatile("mapa.u64 %0, %1, %2;\n" : "=l"(out) : "l"(ptr), "r"(cta_rank));
  return reinterpret_cast<T*>(out);
}

// Every thread of the block stores its share of N elements at `remote` (a peer's tile, from
// map_shared_rank).
template <int N, typename T>
TL_DEVICE void copy_to_peer(T* remote, const T* src) {
  const int nthreads = blockDim.x * blockDim.y * blockDim.z;
  const int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  for (int i = tid; i < N; i += nthreads) remote[i] = src[i];
}

#endif  // TL_HAVE_SM90

}  // namespace tl
