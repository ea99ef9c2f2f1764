// tl.cuh — the whole TileLang device library: tl/core.cuh and the math family. Hand-written
// CUDA includes this one file; generated kernels include tl/core.cuh and the parts of the math
// family they use.
//
// Each header is small and documents its API at the top; sm_90-only parts are defined only
// when compiling for sm_90 (TMA, mbarrier tx, stmatrix, clusters) or sm_90a (wgmma,
// setmaxnreg), so using them in an sm_80 build is a compile error naming the function.
// Not included here (include explicitly when used): tl/wgmma_ops_extra.cuh.
#pragma once
#include "tl/core.cuh"
#include "tl/math.cuh"
#include "tl/reduce.cuh"
#include "tl/atomic.cuh"
