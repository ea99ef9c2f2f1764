"""The `T` namespace: `import tilelang.language as T`.

This module only re-exports; each name lives in the submodule of its kind.
"""

# ruff: noqa: F401, E402
from ..frontend.trace import prim_func
from ..ir.dtype import DType as dtype
# the class of kernel expressions (`isinstance(v, T.PrimExpr)`, annotations)
from ..ir.nodes import Expr as PrimExpr
from .alloc import (alloc_barrier, alloc_buffer, alloc_cluster_barrier, alloc_fragment,
                    alloc_global, alloc_local, alloc_shared, alloc_tmem, alloc_var)
from .indexing import Ref
from .kernel import (ClusterKernel, Kernel, get_block_binding, get_block_bindings, get_block_extent,
                     get_block_extents, get_lane_idx, get_thread_binding, get_thread_bindings,
                     get_thread_extent, get_thread_extents, get_warp_group_idx, get_warp_idx,
                     get_warp_idx_sync, launch_thread, shuffle_elect)
from .loops import (Parallel, Persistent, Pipelined, Serial, grid, parallel, serial,
                    thread_binding, unroll, vectorized)
from .macro import Var, macro
from .math import (Cast, Select, abs, acos, align_up, asin, atan, atan2, bitwise_and,
                   bitwise_not, bitwise_or, bitwise_xor, cast, ceil, ceildiv, clamp, cos, cosh,
                   div, erf, exp, exp2, exp10, expm1, fabs, fast_exp, floor, floordiv,
                   floormod, fmod, if_then_else, indexdiv, indexmod, infinity, isfinite, isinf, isnan, log,
                   log1p, log2, log10, max, max_value, min, min_value, nearbyint, pow, rcp,
                   reinterpret, round, rsqrt, shift_left, shift_right, sigmoid, sin, sinh,
                   sqrt, tan, tanh, trunc, truncdiv, truncmod)
from .math import clz, likely, popcount
# fast-math intrinsics: module-level names, so no name mangling (T.__exp works in kernels)
from .math import __cos, __exp, __exp10, __log, __log2, __log10, __sin, __tan
from .misc import (barrier_arrive, barrier_wait, create_list_of_mbarrier, fence_proxy_async,
                   get_mbarrier, mbarrier_arrive, mbarrier_arrive_expect_tx, mbarrier_expect_tx,
                   mbarrier_wait_parity, tma_store_arrive, tma_store_wait, wait_wgmma, ws)
from .misc import (all_of, annotate_consumer_reg_alloc, annotate_producer_reg_dealloc, any_of,
                   warp_reduce_bitand, warp_reduce_bitor, warp_reduce_max, warp_reduce_min,
                   warp_reduce_sum)
from .misc import (__ldg, access_ptr, address_of, annotate_compile_flags, annotate_l2_hit_ratio,
                   annotate_layout, annotate_pass_configs,
                   annotate_min_blocks_per_sm, annotate_padding, annotate_restrict_buffers,
                   annotate_safe_value, assume, func_attr, let,
                   call_extern, call_intrin, comment, dec_max_nreg, device_assert,
                   disable_warp_group_reg_alloc, evaluate, import_source, inc_max_nreg,
                   no_set_max_nreg, print, ptx, set_max_nreg, shfl_down, shfl_sync, shfl_up,
                   named_barrier_arrive, shfl_xor, sync_global, sync_grid, sync_threads,
                   sync_warp, use_swizzle)
from .misc import cp_async_barrier_noinc, ptx_commit_group, ptx_cp_async, ptx_wait_group
from .misc import (activemask, all_sync, any_sync, ballot, ballot_sync, syncthreads_and,
                   syncthreads_count, syncthreads_or)
from .misc import dp4a, index_to_coordinates, match_all_sync, match_any_sync, tvm_warp_shuffle
# bit-search intrinsics: module-level names, so no name mangling (T.__ffs works in kernels)
from .misc import __ffs, __fns
from .reducer import alloc_reducer, finalize_reducer, reducer_init, reducer_update
from .thread_reduce import attr, comm_reducer, tvm_thread_allreduce
from .tile_schedule import PersistentTileScheduler
from .views import reshape, view
from .sblock import reads, sblock, writes
from .vectors import (Broadcast, Ramp, abs2, add2, extract_lane, fma2, max2, min2, mul2,
                      sub2)
from .ptx import ptx_ldmatrix, ptx_mma
from .source_kernel import CUDASourceCodeKernel
from .random import rng_init, rng_rand, rng_rand_float
from .wide_access import (ldg32, ldg64, ldg128, ldg256, lds32, lds64, lds128, stg32, stg64,
                          stg128, stg256, sts32, sts64, sts128)
from .tile_ops import (GemmWarpPolicy, async_copy, atomic_add, atomic_addx2, atomic_addx4,
                       atomic_load, copy_cluster, atomic_max, atomic_min, atomic_or, atomic_store,
                       c2d_im2col, clear, copy, cummax, cumsum, fill, gemm, gemm_sp, gemm_v1,
                       gemm_v2, im2col, reduce, reduce_absmax, reduce_abssum, reduce_bitand,
                       reduce_bitor, reduce_bitxor, reduce_max, reduce_min, reduce_sum,
                       store_cluster_sum, tma_copy, transpose, wgmma_gemm, wgmma_gemm_sp)
from .types import (Buffer, FragmentBuffer, LocalBuffer, SharedBuffer, StridedTensor, Tensor,
                    TensorSpec, bfloat16, bool_ as bool, const, double, dyn, dynamic, empty,
                    float8_e4m3, float8_e4m3fn, float8_e5m2, float16, float32, float64, half,
                    handle, int8, int16, int32, int64, long, make_tensor, match_buffer, ptr,
                    short, symbolic, uint8, uint16, uint32, uint64)
from .types import float_ as float
from .misc import pdl_sync, pdl_trigger
from .misc import (block_rank_in_cluster, cluster_arrive, cluster_arrive_relaxed, cluster_sync,
                   cluster_wait)
from .math import (fast_rcp, ieee_add, ieee_fdiv, ieee_fmaf, ieee_frcp, ieee_frsqrt, ieee_fsqrt,
                   ieee_mul, ieee_sub)
from .types import int_ as int

from . import dtypes  # noqa: E402  (the reference's `tilelang.language.dtypes` module)
# every dtype name of the reference (vectors, tfloat32, uint, int4, float4_e2m1fn, ...)
globals().update({_n: getattr(dtypes, _n) for _n in dtypes._all_dtypes})

# Pure aliases with the reference's spellings (its loop.py and TVMScript re-exports).
Unroll = unroll
Vectorized = vectorized
boolean = bool

Float = float32
Int = int32


def __getattr__(name):
    # Layout classes live in tilelang.layout; import lazily to keep `import tilelang` fast.
    if name in ("Layout", "Fragment"):
        from .. import layout

        return getattr(layout, name)
    from .backends import absent_backend

    backend = absent_backend(name)
    if backend is not None:
        raise AttributeError(f"T.{name} belongs to {backend}; see docs/compatibility.md")
    raise AttributeError(f"module 'tilelang.language' has no attribute {name!r}: T.{name} is "
                         "not supported (yet); see docs/compatibility.md")
