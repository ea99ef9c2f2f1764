// tl/core.cuh — the device library less its math family (tl/math.cuh and tl/reduce.cuh /
// tl/atomic.cuh, which build on it). Generated kernels include this and each member of the
// math family they name (codegen/module.py): the family's overload sets are about a third of
// NVRTC's parse time for a kernel that uses none of them. tl.cuh is the whole library.
#pragma once
#include "common.cuh"
#include "copy.cuh"
#include "wide_access.cuh"
#include "packed_x2.cuh"
#include "random.cuh"
#include "ldmatrix.cuh"
#include "mma.cuh"
#include "ptx_compat.cuh"
#include "print.cuh"
#include "rasterize.cuh"
#include "barrier.cuh"
#include "tma.cuh"
#include "wgmma.cuh"
#include "setmaxnreg.cuh"
