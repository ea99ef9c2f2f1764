// tl/wgmma.cuh — warpgroup MMA support (sm_90a), HARDWARE §5–§6.
//
//   tl::wgmma_fence()                 wgmma.fence.sync.aligned (before the first wgmma and
//                                     after any register access to D or A fragments)
//   tl::wgmma_commit()                wgmma.commit_group.sync.aligned
//   tl::wgmma_wait<N>()               wgmma.wait_group.sync.aligned N
//   tl::wgmma_wait_in_place<N>()      the same, not moved by ptxas (see below)
//   tl::wgmma_fence_operand(x)        empty asm pinning a register ("+f"/"+r") so the
//                                     compiler cannot move its uses across fence/wait
//   tl::wgmma_fence_operands(d, n)    the same over an array
//   tl::wgmma_fresh_operands(d, n)    empty asm defining them ("=f"/"=r"): old values dead
//   tl::make_smem_desc(ptr, swizzle, lbo_bytes, sbo_bytes, base_offset = 0) -> uint64_t
//   tl::smem_desc_advance(desc, bytes) -> desc with the start address moved by `bytes`
//   tl::WgmmaSwizzle::{kNone, k128B, k64B, k32B}   descriptor layout codes 0, 1, 2, 3
//
// Descriptor (§6): bits 0-13 start address >> 4; 16-29 LBO >> 4; 32-45 SBO >> 4; 49-51 base
// offset; 62-63 layout (0 none, 1 128B, 2 64B, 3 32B — *not* TMA's swizzle enum order).
// K-major swizzled: LBO unused (pass 16 -> field 1), SBO = 8-row-group stride (1024 for
// packed 128B rows); advance +32 B per k16 step inside a 128-byte row.
//
// The wrappers themselves (one per N) are generated: tl/wgmma_ops.cuh (f16/bf16 -> f32;
// skipped when TL_NO_WGMMA_OPS is defined) and, not included here, tl/wgmma_ops_extra.cuh
// (f16 -> f16, tf32, e4m3, e5m2 -> f32) and tl/wgmma_ops_fp8.cuh (e4m3/e5m2 in any A/B mix ->
// f32 or f16; included by tl/gemm_sm90.cuh).
//
// Shape selection: a source that defines TL_WGMMA_SELECT before including tl.cuh gets only
// the shapes it names with TL_WGMMA_N<N> (N = the warpgroup's tile width, 8..256) and the
// 8-bit float wrappers only with TL_WGMMA_FP8; dispatching to anything left out is a
// static_assert. Generated kernels do this (codegen/module.py): parsing every shape is most
// of the headers' NVRTC time. Without TL_WGMMA_SELECT everything is defined.
#pragma once
#include "common.cuh"

namespace tl {

struct WgmmaSwizzle {
  static constexpr int kNone = 0;
  static constexpr int k128B = 1;
  static constexpr int k64B = 2;
  static constexpr int k32B = 3;
};

// Shared-memory matrix descriptor from a generic pointer into shared memory.
TL_HOST_DEVICE uint64_t make_smem_desc_addr(uint32_t smem_byte_addr, int swizzle,
                                            uint32_t lbo_bytes, uint32_t sbo_bytes,
                                            uint32_t base_offset = 0) {
  uint64_t d = 0;
  d |= (uint64_t)((smem_byte_addr & 0x3FFFFu) >> 4);
  d |= (uint64_t)((lbo_bytes & 0x3FFFFu) >> 4) << 16;
  d |= (uint64_t)((sbo_bytes & 0x3FFFFu) >> 4) << 32;
  d |= (uint64_t)(base_offset & 0x7u) << 49;
  d |= (uint64_t)(swizzle & 0x3) << 62;
  return d;
}

TL_DEVICE uint64_t make_smem_desc(const void* smem_ptr, int swizzle, uint32_t lbo_bytes,
                                  uint32_t sbo_bytes, uint32_t base_offset = 0) {
  return make_smem_desc_addr(smem_addr(smem_ptr), swizzle, lbo_bytes, sbo_bytes, base_offset);
}

// Move the start address by `bytes` (a multiple of 16); the other fields are unchanged as long
// as the address stays inside the 256 KB shared window (the 14-bit field then never carries),
// so the add is on the low word alone: one 32-bit add, where a 64-bit one costs a carry and a
// sign extension per wgmma.
TL_HOST_DEVICE uint64_t smem_desc_advance(uint64_t desc, int bytes) {
  const uint32_t lo = (uint32_t)desc + (uint32_t)(bytes >> 4);
  return (desc & 0xFFFFFFFF00000000ull) | lo;
}

#if TL_HAVE_SM90A
TL_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

TL_DEVICE void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N>
TL_DEVICE void wgmma_wait() {
  static_assert(N >= 0, "wgmma.wait_group needs N >= 0");
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// wgmma_wait<N> in a basic block of its own. ptxas schedules within basic blocks and hoists a
// wait above independent work placed before it (a softmax meant to overlap the gemm: it then
// stalls on the gemm first); a branch it cannot fold keeps the wait where it is written.
// Both sides wait, so the (block-uniform) condition does not matter.
template <int N>
TL_DEVICE void wgmma_wait_in_place() {
  if (blockIdx.x != 0xffffffffu) {
    wgmma_wait<N>();
  } else {
    wgmma_wait<N>();
  }
}
#endif  // TL_HAVE_SM90A

TL_DEVICE void wgmma_fence_operand(float& x) { asm volatile("" : "+f"(x)::"memory"); }
TL_DEVICE void wgmma_fence_operand(uint32_t& x) { asm volatile("" : "+r"(x)::"memory"); }

template <class T>
TL_DEVICE void wgmma_fence_operands(T* d, int n) {
#pragma unroll
  for (int i = 0; i < n; ++i) wgmma_fence_operand(d[i]);
}

// A value the compiler must treat as unknown, with no input: the accumulator of a wgmma whose
// first instruction has scale-d = 0 (it ignores D). Without it the in/out asm operands keep
// the registers' previous values (say, the last iteration's scores) alive up to the gemm, or
// keep a zeroing the hardware does not need (ptxas drops it only sometimes).
TL_DEVICE void wgmma_fresh_operand(float& x) { asm volatile("" : "=f"(x)::"memory"); }
TL_DEVICE void wgmma_fresh_operand(uint32_t& x) { asm volatile("" : "=r"(x)::"memory"); }

template <class T>
TL_DEVICE void wgmma_fresh_operands(T* d, int n) {
#pragma unroll
  for (int i = 0; i < n; ++i) wgmma_fresh_operand(d[i]);
}

}  // namespace tl

// The generated wrappers are ~30 ms of NVRTC time on sm_90a; a kernel that issues no wgmma may
// `#define TL_NO_WGMMA_OPS` before including tl.cuh to skip them.
#ifndef TL_NO_WGMMA_OPS
#include "wgmma_ops.cuh"
#endif
