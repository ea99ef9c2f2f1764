// tl.cuh — the whole TileLang device library. Hand-written CUDA includes this one file;
// generated kernels include tl/common.cuh and only the headers below whose names their code
// uses (codegen/library.py reads this list; after editing a header, run
// `python -m tilelang.codegen.library` to renew the table of names it keeps).
//
// Each header is small, documents its API at the top and includes what it builds on; sm_90-only
// parts are defined only when compiling for sm_90 (TMA, mbarrier tx, stmatrix, clusters) or
// sm_90a (wgmma, setmaxnreg), so using them in an sm_80 build is a compile error naming the
// function. Not included here (include explicitly when used): tl/wgmma_ops_extra.cuh.
#pragma once
#include "tl/common.cuh"
#include "tl/math.cuh"
#include "tl/copy.cuh"
#include "tl/wide_access.cuh"
#include "tl/packed_x2.cuh"
#include "tl/random.cuh"
#include "tl/ldmatrix.cuh"
#include "tl/mma.cuh"
#include "tl/ptx_compat.cuh"
#include "tl/reduce.cuh"
#include "tl/atomic.cuh"
#include "tl/print.cuh"
#include "tl/rasterize.cuh"
#include "tl/barrier.cuh"
#include "tl/tma.cuh"
#include "tl/wgmma.cuh"
#include "tl/setmaxnreg.cuh"
