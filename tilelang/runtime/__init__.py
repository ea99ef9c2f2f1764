"""CUDA runtime: compile CUDA C++ to cubins (NVRTC or nvcc, disk-cached), load them per
device, launch them on torch's current stream, and encode TMA descriptors.

    res = compile_cuda(source, "sm_90a")            # CompileResult(cubin, log, compiler, ...)
    fn = CudaKernelFunction(res.cubin, "main_kernel", ["ptr", "ptr", "int32"])
    launch(fn, (gx, 1, 1), (128, 1, 1), smem_bytes, current_stream_handle(dev), [a, b, n])

Importing this package loads neither torch nor the driver; both are loaded on first use. Nor
does it import its modules: each name below is imported when first asked for, so a kernel
loaded from the disk cache (engine/program_cache.py) never imports the compiler's modules.
"""

import importlib

# public name -> the module of this package that defines it
_EXPORTS = {
    "compile_cuda": "compiler", "CompileResult": "cache", "CudaCompileError": "compiler",
    "normalize_arch": "compiler", "CudaDriverError": "driver", "ArgLayout": "launcher",
    "CudaKernelFunction": "launcher", "launch": "launcher", "PARAM_TYPES": "launcher",
    "current_device": "stream", "current_stream_handle": "stream",
    "encode_im2col_nhwc": "tensor_map", "encode_tiled": "tensor_map",
    "encode_tiled_rowmajor": "tensor_map",
}

__all__ = list(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
