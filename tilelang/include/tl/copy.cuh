// tl/copy.cuh — cp.async (sm_80+) and vector load/store helpers (HARDWARE §3).
//
//   tl::cp_async<Bytes>(smem_dst, gmem_src)                 Bytes = 4, 8 or 16; smem_dst a
//                                                           pointer or a shared-window address
//   tl::cp_async_zfill<Bytes>(smem_dst, gmem_src, src_bytes) copies src_bytes, zero-fills rest
//   tl::cp_async_pred<Bytes>(smem_dst, gmem_src, pred)      full copy if pred, else all zeros
//   tl::cp_async_commit()                                   cp.async.commit_group
//   tl::cp_async_wait<N>()                                  cp.async.wait_group N
//   tl::cp_async_wait_all()
//   tl::load_vec<Bytes>(p) / tl::store_vec<Bytes>(p, v)     one 1/2/4/8/16-byte access
//   tl::copy_vec<Bytes>(dst, src)                           *dst = *src in one access each
//   tl::copy_vec<V>(dst, src)                               the same, named by its vector type
//                                                           (float2, float4: float32 lanes)
//
// Rules the caller keeps (HARDWARE §3): both addresses aligned to Bytes; data written by
// cp.async is visible to *other* threads only after wait + __syncthreads(); commit even when a
// stage issued no copy so wait_group counts stay uniform. When a predicate is false, pass an
// in-bounds source address anyway (whether src-size 0 still dereferences it is unconfirmed).
#pragma once
#include "common.cuh"

namespace tl {

namespace detail {
template <int Bytes> struct vec_type;
template <> struct vec_type<1> { using type = uint8_t; };
template <> struct vec_type<2> { using type = uint16_t; };
template <> struct vec_type<4> { using type = uint32_t; };
template <> struct vec_type<8> { using type = uint2; };
template <> struct vec_type<16> { using type = uint4; };
}  // namespace detail
template <int Bytes> using vec_bytes_t = typename detail::vec_type<Bytes>::type;

// cp.async.{ca,cg}.shared.global [dst], [src], Bytes, src_bytes;
// .cg (L2 only) for 16-byte copies: streamed tiles gain nothing from L1.
// The destination is a shared-window address (`smem_addr`, or a tile's window address plus a
// byte offset, as generated code passes it) or a pointer into shared memory.
template <int Bytes>
TL_DEVICE void cp_async_zfill(uint32_t dst, const void* gmem_src, int src_bytes) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async copies 4, 8 or 16 bytes");
  if constexpr (Bytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src),
                 "r"(src_bytes)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(gmem_src),
                 "n"(Bytes), "r"(src_bytes)
                 : "memory");
  }
}

template <int Bytes>
TL_DEVICE void cp_async_zfill(void* smem_dst, const void* gmem_src, int src_bytes) {
  cp_async_zfill<Bytes>(smem_addr(smem_dst), gmem_src, src_bytes);
}

template <int Bytes>
TL_DEVICE void cp_async(uint32_t dst, const void* gmem_src) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async copies 4, 8 or 16 bytes");
  if constexpr (Bytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem_src)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(gmem_src),
                 "n"(Bytes)
                 : "memory");
  }
}

template <int Bytes>
TL_DEVICE void cp_async(void* smem_dst, const void* gmem_src) {
  cp_async<Bytes>(smem_addr(smem_dst), gmem_src);
}

template <int Bytes>
TL_DEVICE void cp_async_pred(void* smem_dst, const void* gmem_src, bool pred) {
  cp_async_zfill<Bytes>(smem_dst, gmem_src, pred ? Bytes : 0);
}

// Before sm_80 there is no cp.async: the compiler copies with plain loads and stores, which
// are complete when issued, so the group bookkeeping a pipeline still emits does nothing.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define TL_CP_ASYNC_ASM_(...)
#else
#define TL_CP_ASYNC_ASM_(...) asm volatile(__VA_ARGS__)
#endif

// cp.async.commit_group: close the group of this thread's uncommitted cp.async.
TL_DEVICE void cp_async_commit() { TL_CP_ASYNC_ASM_("cp.async.commit_group;\n" ::: "memory"); }

// cp.async.wait_group N: wait until at most N of this thread's groups are pending.
template <int N>
TL_DEVICE void cp_async_wait() {
  static_assert(N >= 0, "cp.async.wait_group needs N >= 0");
  TL_CP_ASYNC_ASM_("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

TL_DEVICE void cp_async_wait_all() { TL_CP_ASYNC_ASM_("cp.async.wait_all;\n" ::: "memory"); }

// ---- plain vector accesses ---------------------------------------------------------------
template <int Bytes>
TL_DEVICE vec_bytes_t<Bytes> load_vec(const void* p) {
  return *reinterpret_cast<const vec_bytes_t<Bytes>*>(p);
}
template <int Bytes>
TL_DEVICE void store_vec(void* p, const vec_bytes_t<Bytes>& v) {
  *reinterpret_cast<vec_bytes_t<Bytes>*>(p) = v;
}
template <int Bytes>
TL_DEVICE void copy_vec(void* dst, const void* src) {
  store_vec<Bytes>(dst, load_vec<Bytes>(src));
}
template <class V>
TL_DEVICE void copy_vec(void* dst, const void* src) {
  *reinterpret_cast<V*>(dst) = *reinterpret_cast<const V*>(src);
}

// ld.global.nc.v4: 16 bytes through the read-only path (data not written by this kernel).
TL_DEVICE uint4 ldg_nc_16(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

}  // namespace tl
