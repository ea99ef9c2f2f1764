"""CUDA runtime: compile CUDA C++ to cubins (NVRTC or nvcc, disk-cached), load them per
device, launch them on torch's current stream, and encode TMA descriptors.

    res = compile_cuda(source, "sm_90a")            # CompileResult(cubin, log, compiler, ...)
    fn = CudaKernelFunction(res.cubin, "main_kernel", ["ptr", "ptr", "int32"])
    launch(fn, (gx, 1, 1), (128, 1, 1), smem_bytes, current_stream_handle(dev), [a, b, n])

Importing this package loads neither torch nor the driver; both are loaded on first use.
"""

from .compiler import CompileResult, CudaCompileError, compile_cuda, normalize_arch  # noqa: F401
from .driver import CudaDriverError  # noqa: F401
from .launcher import ArgLayout, CudaKernelFunction, launch, PARAM_TYPES  # noqa: F401
from .stream import current_device, current_stream_handle  # noqa: F401
from .tensor_map import encode_im2col_nhwc, encode_tiled, encode_tiled_rowmajor  # noqa: F401

__all__ = ["compile_cuda", "CompileResult", "CudaCompileError", "CudaDriverError",
           "CudaKernelFunction", "ArgLayout", "launch", "current_stream_handle",
           "current_device", "encode_im2col_nhwc", "encode_tiled", "encode_tiled_rowmajor",
           "normalize_arch", "PARAM_TYPES"]
