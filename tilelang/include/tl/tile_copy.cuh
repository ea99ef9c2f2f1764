// tl/tile_copy.cuh — synchronous predicated vector copies emitted by the T.copy lowering.
//
//   tl::copy_zfill<N>(T* dst, const T* src, int valid)
//     dst[0..N) = src[0..valid) followed by zeros; one vector access each way when the whole
//     chunk is valid (both pointers aligned to N * sizeof(T)), element-wise otherwise.
#pragma once
#include "common.cuh"
#include "copy.cuh"

namespace tl {

template <int N, typename T>
TL_DEVICE void copy_zfill(T* dst, const T* src, int valid) {
  constexpr int kBytes = N * int(sizeof(T));
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "chunks are 4, 8 or 16 bytes");
  if (valid >= N) {
    copy_vec<kBytes>(dst, src);
    return;
  }
#pragma unroll
  for (int i = 0; i < N; ++i) dst[i] = i < valid ? src[i] : T(0);
}

}  // namespace tl
