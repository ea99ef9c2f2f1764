// tl/barrier.cuh — mbarriers, proxy fences, named barriers and cluster barriers (HARDWARE §8).
//
// mbarrier (an 8-byte-aligned uint64_t in shared memory):
//   tl::mbarrier_init(bar, count)                 count in [1, 2^20-1]                sm_80
//   tl::mbarrier_arrive(bar)                      arrive(1), release.cta              sm_80
//   tl::mbarrier_arrive_cnt(bar, n)               arrive(n)                           sm_90
//   tl::mbarrier_arrive_expect_tx(bar, bytes)     expect-tx(bytes) then arrive(1)     sm_90
//   tl::mbarrier_expect_tx(bar, bytes)            expect-tx only                      sm_90
//   tl::mbarrier_arrive_remote(bar, cta_rank)     arrive on the same barrier in another CTA
//                                                 of the cluster (mapa + release.cluster) sm_90
//   tl::mbarrier_arrive_expect_tx_remote(bar, cta_rank, bytes)   expect-tx(bytes) then
//                                                 arrive(1) on that CTA's barrier          sm_90
//   tl::mbarrier_arrive_cluster<CS>(bar)          one lane per warp (after __syncwarp) arrives
//                                                 on `bar` in each of the CS CTAs         sm_90
//   tl::mbarrier_test_wait_parity(bar, parity)    non-blocking test                    sm_80
//   tl::mbarrier_try_wait_parity(bar, parity)     may block a while; may return false  sm_90
//   tl::mbarrier_wait(bar, parity)                loops until the phase of `parity` completed
//   tl::mbarrier_inval(bar)                                                              sm_80
//   tl::mbarrier_cp_async_arrive_noinc(bar)       arrive once this thread's cp.async are done sm_80
// Parity rule: waiting on parity P returns once the phase with parity P has completed; a
// fresh barrier reports parity 1 as complete (consumers start at 0, producers at 1).
//
// Fences and barriers:
//   tl::fence_proxy_async()         fence.proxy.async.shared::cta: generic smem writes ->
//                                   visible to TMA stores / wgmma (each writing thread)  sm_90
//   tl::fence_proxy_async_global()  fence.proxy.async.global: orders this thread's global
//                                   accesses between the generic and the TMA proxies    sm_90
//   tl::fence_mbarrier_init()       fence.mbarrier_init.release.cluster                    sm_90
//   tl::fence_view_async_shared()   alias of fence_proxy_async                             sm_90
//   tl::named_barrier_sync(id, n)   bar.sync id, n   (n threads, a multiple of 32; id 1..15,
//                                   0 is __syncthreads)
//   tl::named_barrier_arrive(id, n) bar.arrive id, n
//   tl::cluster_arrive() / cluster_arrive_relaxed() / cluster_wait() / cluster_sync()
//                                   barrier.cluster                                      sm_90
//   tl::cluster_ctarank(), tl::cluster_size()                                              sm_90
//   tl::grid_sync(counter)          all blocks of a cooperative launch (counter: zeroed uint32)
//
// Programmatic dependent launch (T.pdl_trigger / T.pdl_sync):
//   tl::pdl_trigger()   griddepcontrol.launch_dependents: the next kernel of the stream may start
//   tl::pdl_sync()      griddepcontrol.wait: wait until the previous kernel of the stream has
//                       completed and its memory is visible
// Without a programmatic launch these are no-ops (kernels of a stream run in order anyway);
// below sm_90 they compile to nothing.
#pragma once
#include "common.cuh"

namespace tl {

TL_DEVICE void mbarrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}

TL_DEVICE void mbarrier_inval(uint64_t* bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

TL_DEVICE void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

// cp.async.mbarrier.arrive.noinc: one of the barrier's expected arrivals, made when every
// cp.async this thread issued before it has completed (sm_80).
TL_DEVICE void mbarrier_cp_async_arrive_noinc(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar))
               : "memory");
}

// Grid-wide barrier of a cooperative launch (every block resident). `counter` is a global
// uint32 that starts at 0: each block's first thread adds 1, except block 0, which adds
// 2^31 - (blocks - 1); the last arrival flips bit 31, which the others wait for. The low 31
// bits are back to 0 afterwards, so the counter serves every barrier of the launch.
TL_DEVICE void grid_sync(unsigned int* counter) {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    unsigned int blocks = gridDim.x * gridDim.y * gridDim.z;
    bool first = blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
    unsigned int add = first ? 0x80000000u - (blocks - 1) : 1u;
    __threadfence();
    unsigned int old = atomicAdd(counter, add);
    unsigned int now;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(counter) : "memory");
    } while (((old ^ now) & 0x80000000u) == 0);
    __threadfence();
  }
  __syncthreads();
}

TL_DEVICE bool mbarrier_test_wait_parity(uint64_t* bar, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return ok != 0;
}

#if TL_HAVE_SM90
TL_DEVICE void mbarrier_arrive_cnt(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(count)
               : "memory");
}

TL_DEVICE void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

TL_DEVICE void mbarrier_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(
                   smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

TL_DEVICE bool mbarrier_try_wait_parity(uint64_t* bar, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return ok != 0;
}

// Arrive on the barrier at the same shared offset in CTA `cta_rank` of this cluster.
TL_DEVICE void mbarrier_arrive_remote(uint64_t* bar, uint32_t cta_rank) {
  asm volatile(
      "{\n\t.reg .b32 remote;\n\t"
      "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}\n" ::"r"(
          smem_addr(bar)),
      "r"(cta_rank)
      : "memory");
}

TL_DEVICE void mbarrier_arrive_expect_tx_remote(uint64_t* bar, uint32_t cta_rank,
                                                uint32_t bytes) {
  asm volatile(
      "{\n\t.reg .b32 remote;\n\t"
      "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
      "mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [remote], %2;\n}\n" ::
          "r"(smem_addr(bar)),
      "r"(cta_rank), "r"(bytes)
      : "memory");
}

// A stage of a multicast ring handed back to every CTA of the cluster (each CTA's producer
// writes a slice of it into all of them): the warp's reads are done, then one lane arrives on
// the barrier of each CTA, whose arrival count is warps x CTAs. The arrival releases at CTA
// scope (the default): the reads it orders are of this CTA's own shared memory, and a
// cluster-scope release costs a MEMBAR.GPU per arrival (GEMM 4096^3 at half speed).
template <int CS>
TL_DEVICE void mbarrier_arrive_cluster(uint64_t* bar) {
  __syncwarp();
  if ((threadIdx.x & 31) == 0) {
#pragma unroll
    for (uint32_t r = 0; r < CS; ++r) {
      asm volatile(
          "{\n\t.reg .b32 remote;\n\t"
          "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
          "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(smem_addr(bar)),
          "r"(r)
          : "memory");
    }
  }
}

TL_DEVICE void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
TL_DEVICE void fence_view_async_shared() { fence_proxy_async(); }
TL_DEVICE void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

TL_DEVICE void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

TL_DEVICE void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
TL_DEVICE void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
TL_DEVICE void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
TL_DEVICE void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}
TL_DEVICE uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
TL_DEVICE uint32_t cluster_size() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
  return r;
}
#endif  // TL_HAVE_SM90

// Block until the phase with parity `parity` has completed (try_wait on sm_90, test_wait
// before). try_wait may time out and return false, hence the loop (HARDWARE §8).
// (The reference's waits pass try_wait a suspend-time hint; timed on an H200 with and without
// it, 2026-11-27, the sparse MLA forward ran the same.)
TL_DEVICE void mbarrier_wait(uint64_t* bar, uint32_t parity) {
#if TL_SM90
  asm volatile(
      "{\n\t.reg .pred p;\n"
      "TL_WAIT:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
      "@!p bra TL_WAIT;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
#else
  while (!mbarrier_test_wait_parity(bar, parity)) {
  }
#endif
}

// bar.sync / bar.arrive on barrier `id` for `count` threads (a multiple of the warp size).
TL_DEVICE void named_barrier_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
TL_DEVICE void named_barrier_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
// The same under the names the reference's generated code uses for T.sync_threads(id, n) and
// T.named_barrier_arrive(id, n), so that source written against them keeps working.
TL_DEVICE void __sync_thread_partial(int id, int count) { named_barrier_sync(id, count); }
TL_DEVICE void __named_barrier_arrive(int id, int count) { named_barrier_arrive(id, count); }

// Consumer warpgroups taking turns to issue wgmma (transform/pingpong.py): warpgroup w
// (threads 128w..128w+127) owns named barrier First + w. Waiting on it takes the turn;
// arriving on the next warpgroup's passes it on. Each barrier counts 256 threads: the 128 that
// wait and the 128 that pass. `start` gives warpgroup 0 the first turn, `finish` takes the one
// the last warpgroup passes at the end, so every barrier is balanced when the kernel exits.
template <int First, int N>
TL_DEVICE void wg_turn_wait() {
  named_barrier_sync(First + threadIdx.x / 128, 256);
}
template <int First, int N>
TL_DEVICE void wg_turn_pass() {
  named_barrier_arrive(First + (threadIdx.x / 128 + 1) % N, 256);
}
template <int First, int N>
TL_DEVICE void wg_turn_start() {
  if (threadIdx.x / 128 == N - 1) named_barrier_arrive(First, 256);
}
template <int First, int N>
TL_DEVICE void wg_turn_finish() {
  if (threadIdx.x / 128 == 0) named_barrier_sync(First, 256);
}

TL_DEVICE void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
TL_DEVICE void pdl_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

}  // namespace tl

// The CUDA runtime's device-side names of the two PDL instructions, which kernels for sm_90
// call (as the reference's do): nvcc declares them, NVRTC does not, so they are given here.
#if defined(__CUDACC_RTC__)
static __device__ __forceinline__ void cudaTriggerProgrammaticLaunchCompletion() {
  tl::pdl_trigger();
}
static __device__ __forceinline__ void cudaGridDependencySynchronize() { tl::pdl_sync(); }
#endif
