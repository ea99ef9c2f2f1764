"""The reference's AMD backend (`tilelang.rocm`: HIP targets, MFMA intrinsics emitters, gfx
queries) does not exist in this compiler, which generates CUDA for NVIDIA GPUs and runs
kernels on its CPU interpreter.

Only the availability probe of `tilelang.rocm.target` is here (`check_hip_availability()` is
False, `target_is_hip(t)` too), so that programs that ask before choosing a backend run; any
other name, and the emitters (`tilelang.rocm.intrinsics`), say the backend is absent."""

_ABSENT = ("tilelang.rocm (the AMD ROCm/HIP backend: MFMA emitters, gfx targets) is not "
           "available: this TileLang targets NVIDIA GPUs (CUDA) and the CPU interpreter; see "
           "docs/compatibility.md")


def __getattr__(name):
    if name == "target":
        import importlib

        return importlib.import_module(f"{__name__}.target")
    raise AttributeError(f"tilelang.rocm.{name}: {_ABSENT}")
