// tl/reduce.cuh — warp shuffles and warp all-reductions.
//
//   tl::shfl_xor(v, lane_mask, width=32) / shfl_down / shfl_up / shfl_sync(v, src, width)
//       every scalar type (8/16-bit types travel in a 32-bit register), full-warp mask
//   tl::match_any(mask, v) / tl::match_all(mask, v)   __match_any_sync / __match_all_sync
//       (the predicate output dropped; sm_70+)
//   ops: tl::SumOp, MaxOp, MinOp, MaxNanOp, MinNanOp, AbsMaxOp, BitAndOp, BitOrOp, BitXorOp
//   tl::warp_allreduce<Op, kXorMask>(v)
//       butterfly over the lanes that differ only in the set bits of kXorMask: afterwards
//       every lane holds Op over its group. kXorMask = 31 reduces the whole warp; 3 reduces
//       each quad (the 4 lanes sharing a row of an mma C fragment); 28 reduces lanes with the
//       same lane%4 (a column).
//   tl::warp_allreduce_lanes<Op, kThreads, kStride=1>(v)
//       groups of kThreads lanes spaced kStride apart (mask = (kThreads-1)*kStride)
//   tl::block_allreduce<Op, kWarps>(v, ws)
//       whole thread block of kWarps warps (all threads must call it); ws: kWarps elements of
//       shared memory; two __syncthreads().
#pragma once
#include "common.cuh"
#include "math.cuh"

namespace tl {

namespace detail {
// Types __shfl_*_sync takes as they are.
template <class T> inline constexpr bool shfl_native_v =
    is_same_v<T, int> || is_same_v<T, unsigned> || is_same_v<T, long> ||
    is_same_v<T, unsigned long> || is_same_v<T, long long> ||
    is_same_v<T, unsigned long long> || is_same_v<T, float> || is_same_v<T, double> ||
    is_same_v<T, half_t> || is_same_v<T, bfloat16_t>;

template <class T> TL_DEVICE unsigned widen(T v) {
  static_assert(sizeof(T) < 4, "widen is for types narrower than 32 bits");
  unsigned u = 0;
  memcpy(&u, &v, sizeof(T));
  return u;
}
template <class T> TL_DEVICE T narrow(unsigned u) {
  T v;
  memcpy(&v, &u, sizeof(T));
  return v;
}
}  // namespace detail

#define TL_SHFL_(NAME, INTRINSIC)                                                          \
  template <class T>                                                                       \
  TL_DEVICE T NAME(T v, int arg, int width = 32) {                                         \
    if constexpr (detail::shfl_native_v<T>) {                                              \
      return INTRINSIC(0xffffffffu, v, arg, width);                                        \
    } else {                                                                               \
      static_assert(sizeof(T) < 4, "tl::" #NAME ": unsupported type");                     \
      return detail::narrow<T>(INTRINSIC(0xffffffffu, detail::widen(v), arg, width));      \
    }                                                                                      \
  }
TL_SHFL_(shfl_xor, __shfl_xor_sync)
TL_SHFL_(shfl_down, __shfl_down_sync)
TL_SHFL_(shfl_up, __shfl_up_sync)
TL_SHFL_(shfl_sync, __shfl_sync)
#undef TL_SHFL_

// __match_all_sync without the predicate output: `mask` when every lane of it holds the same
// value, else 0. 8/16-bit values are compared as 32-bit words.
template <class T> TL_DEVICE unsigned match_all(unsigned mask, T v) {
  int pred;
  if constexpr (sizeof(T) < 4) {
    return __match_all_sync(mask, detail::widen(v), &pred);
  } else {
    return __match_all_sync(mask, v, &pred);
  }
}
template <class T> TL_DEVICE unsigned match_any(unsigned mask, T v) {
  if constexpr (sizeof(T) < 4) {
    return __match_any_sync(mask, detail::widen(v));
  } else {
    return __match_any_sync(mask, v);
  }
}

// ---- combine operations ---------------------------------------------------------------------
struct SumOp {
  template <class T> TL_DEVICE T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  template <class T> TL_DEVICE T operator()(T a, T b) const { return tl::max(a, b); }
};
struct MinOp {
  template <class T> TL_DEVICE T operator()(T a, T b) const { return tl::min(a, b); }
};
struct MaxNanOp {
  template <class T> TL_DEVICE T operator()(T a, T b) const { return tl::max_nan(a, b); }
};
struct MinNanOp {
  template <class T> TL_DEVICE T operator()(T a, T b) const { return tl::min_nan(a, b); }
};
// max(|a|, |b|): inputs may be signed; the result is non-negative.
struct AbsMaxOp {
  template <class T> TL_DEVICE T operator()(T a, T b) const {
    return tl::max(tl::abs(a), tl::abs(b));
  }
};
struct BitAndOp {
  template <class T> TL_DEVICE T operator()(T a, T b) const { return a & b; }
};
struct BitOrOp {
  template <class T> TL_DEVICE T operator()(T a, T b) const { return a | b; }
};
struct BitXorOp {
  template <class T> TL_DEVICE T operator()(T a, T b) const { return a ^ b; }
};

// ---- warp all-reduce ---------------------------------------------------------------------------
template <class Op, unsigned kXorMask, class T>
TL_DEVICE T warp_allreduce(T v) {
  static_assert(kXorMask < 32u, "warp_allreduce: the xor mask selects lanes 0..31");
  Op op;
#pragma unroll
  for (int bit = 4; bit >= 0; --bit) {
    if (kXorMask & (1u << bit)) v = op(v, shfl_xor(v, 1 << bit));
  }
  return v;
}

template <class Op, int kThreads, int kStride = 1, class T>
TL_DEVICE T warp_allreduce_lanes(T v) {
  static_assert(kThreads >= 1 && (kThreads & (kThreads - 1)) == 0,
                "warp_allreduce_lanes: kThreads must be a power of two");
  static_assert(kStride >= 1 && (kStride & (kStride - 1)) == 0,
                "warp_allreduce_lanes: kStride must be a power of two");
  static_assert(kThreads * kStride <= 32, "warp_allreduce_lanes: group exceeds the warp");
  return warp_allreduce<Op, (unsigned)((kThreads - 1) * kStride)>(v);
}

template <class Op, int kWarps, class T>
TL_DEVICE T block_allreduce(T v, T* ws) {
  static_assert(kWarps >= 1 && kWarps <= 32, "block_allreduce: 1..32 warps");
  v = warp_allreduce<Op, 31u>(v);
  const int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  if ((tid & 31) == 0) ws[tid >> 5] = v;
  __syncthreads();
  T r = ws[0];
  Op op;
#pragma unroll
  for (int i = 1; i < kWarps; ++i) r = op(r, ws[i]);
  __syncthreads();  // ws may be reused right after
  return r;
}

}  // namespace tl
