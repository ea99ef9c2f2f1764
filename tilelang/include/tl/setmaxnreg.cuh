// tl/setmaxnreg.cuh — per-warpgroup register reallocation (sm_90a), HARDWARE §9.
//
//   tl::setmaxnreg_inc<N>()   setmaxnreg.inc.sync.aligned.u32 N   (consumer warpgroups)
//   tl::setmaxnreg_dec<N>()   setmaxnreg.dec.sync.aligned.u32 N   (producer warpgroup)
//
// N is the new per-thread maximum: a multiple of 8 in [24, 256]. All 4 warps of a warpgroup
// execute the same call; the kernel needs __launch_bounds__(threads, 1) (or -maxrregcount),
// and the sum over warpgroups of 128*N must fit the block's launch-time pool, or .inc blocks.
#pragma once
#include "common.cuh"

namespace tl {

#if TL_HAVE_SM90A
template <int N>
TL_DEVICE void setmaxnreg_inc() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256,
                "setmaxnreg: the register count must be a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

template <int N>
TL_DEVICE void setmaxnreg_dec() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256,
                "setmaxnreg: the register count must be a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
#endif  // TL_HAVE_SM90A

}  // namespace tl
