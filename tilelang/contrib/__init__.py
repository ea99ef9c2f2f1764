"""The reference's `tilelang.contrib`: `nvcc` (the CUDA toolkit and compute-capability queries
that reference programs call)."""
