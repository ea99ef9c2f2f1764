// tl/random.cuh — per-thread random streams for T.rng_init / T.rng_rand / T.rng_rand_float.
//
//   tl::rng_init(state, seed, subsequence, offset)   state: the thread's uint32_t[6]
//   tl::rng_rand(state)          -> uint32_t, the next 32 random bits
//   tl::rng_uniform_f32(state)   -> float in (0, 1]     tl::rng_uniform_f64(state) -> double
//   tl::rng_normal_f32(state)    -> float, N(0, 1)      tl::rng_normal_f64(state)  -> double
//
// The generator is Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011): a counter-based bijection keyed by the 64-bit seed. The stream of a thread is
// the 32-bit words of the blocks at counters (n, subsequence) for n = 0, 1, ...: word `offset`
// comes first and each draw advances the offset by one, so streams with different
// subsequences never overlap and a thread may skip ahead freely. The state is
// {seed lo, seed hi, subsequence lo, subsequence hi, offset lo, offset hi}.
#pragma once
#include "common.cuh"

namespace tl {

namespace detail {
// not inlined: kernels draw in fully unrolled loops, and ten inlined rounds per draw make
// their code (and its compile time) many times larger; arguments and result stay in registers
__device__ __noinline__ uint4 philox4x32_10(uint4 counter, uint2 key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(kMul0, counter.x), lo0 = kMul0 * counter.x;
    const uint32_t hi1 = __umulhi(kMul1, counter.z), lo1 = kMul1 * counter.z;
    counter = make_uint4(hi1 ^ counter.y ^ key.x, lo1, hi0 ^ counter.w ^ key.y, lo0);
    key.x += kWeyl0;
    key.y += kWeyl1;
  }
  return counter;
}
}  // namespace detail

TL_DEVICE void rng_init(uint32_t* state, uint64_t seed, uint64_t subsequence,
                        uint64_t offset) {
  state[0] = static_cast<uint32_t>(seed);
  state[1] = static_cast<uint32_t>(seed >> 32);
  state[2] = static_cast<uint32_t>(subsequence);
  state[3] = static_cast<uint32_t>(subsequence >> 32);
  state[4] = static_cast<uint32_t>(offset);
  state[5] = static_cast<uint32_t>(offset >> 32);
}

TL_DEVICE uint32_t rng_rand(uint32_t* state) {
  const uint64_t offset = (static_cast<uint64_t>(state[5]) << 32) | state[4];
  const uint64_t block = offset >> 2;
  const uint4 words = detail::philox4x32_10(
      make_uint4(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), state[2],
                 state[3]),
      make_uint2(state[0], state[1]));
  const uint64_t next = offset + 1;
  state[4] = static_cast<uint32_t>(next);
  state[5] = static_cast<uint32_t>(next >> 32);
  switch (offset & 3) {
    case 0: return words.x;
    case 1: return words.y;
    case 2: return words.z;
    default: return words.w;
  }
}

namespace detail {
// (0, 1]: 24 (53) random bits, plus one ulp so that 0 never comes (log(u) stays finite)
TL_DEVICE float unit_f32(uint32_t bits) {
  return static_cast<float>((bits >> 8) + 1u) * 5.9604644775390625e-08f;  // 2^-24
}
TL_DEVICE double unit_f64(uint32_t hi, uint32_t lo) {
  const uint64_t bits = ((static_cast<uint64_t>(hi) << 32) | lo) >> 11;
  return static_cast<double>(bits + 1) * 1.1102230246251565e-16;  // 2^-53
}
// Box-Muller on two uniforms (one normal value per call); not inlined, as philox4x32_10
__device__ __noinline__ float normal_f32(uint32_t a, uint32_t b) {
  return sqrtf(-2.0f * logf(unit_f32(a))) * cospif(2.0f * unit_f32(b));
}
__device__ __noinline__ double normal_f64(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return sqrt(-2.0 * log(unit_f64(a, b))) * cospi(2.0 * unit_f64(c, d));
}
}  // namespace detail

TL_DEVICE float rng_uniform_f32(uint32_t* state) { return detail::unit_f32(rng_rand(state)); }

TL_DEVICE double rng_uniform_f64(uint32_t* state) {
  const uint32_t hi = rng_rand(state);
  return detail::unit_f64(hi, rng_rand(state));
}

TL_DEVICE float rng_normal_f32(uint32_t* state) {
  const uint32_t a = rng_rand(state);
  return detail::normal_f32(a, rng_rand(state));
}

TL_DEVICE double rng_normal_f64(uint32_t* state) {
  const uint32_t a = rng_rand(state), b = rng_rand(state), c = rng_rand(state);
  return detail::normal_f64(a, b, c, rng_rand(state));
}

}  // namespace tl
