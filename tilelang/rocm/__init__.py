"""The reference's AMD backend (`tilelang.rocm`: HIP targets, MFMA intrinsics emitters, gfx
queries) does not exist in this compiler, which generates CUDA for NVIDIA GPUs and runs
kernels on its CPU interpreter. Importing it (or any module below it) says so."""

raise ImportError("tilelang.rocm (the AMD ROCm/HIP backend: MFMA emitters, gfx targets) is not "
                  "available: this TileLang targets NVIDIA GPUs (CUDA) and the CPU interpreter; "
                  "see docs/compatibility.md")
