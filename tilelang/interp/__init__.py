"""The CPU interpreter of tile IR: runs kernels with numpy (no GPU needed).

Modules, one job each:
  numerics    dtype conversions, bfloat16/float8 rounding, TF32, poison values
  lanes       lane spaces (threads / T.Parallel iterations), masks, execution context
  memory      element loads/stores with bounds rules, thread-private storage, scalar atomics
  evaluate    `eval_int` and the expression compiler (IR -> closures)
  intrinsics  math calls, shuffles, atomics, reinterpret
  tileops     copy, fill, gemm, reductions, scans, tile atomics
  printing    T.print
  execute     statements, control flow with masks, T.Parallel, kernel launches
  adapter     `CPUAdapter`, the JIT backend
"""
