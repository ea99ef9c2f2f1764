"""The CUDA driver API through ctypes on libcuda.so.1 (installed with every NVIDIA driver).

Expects: a CUDA driver at run time (nothing is loaded at import). Guarantees:
  * `lib()` loads libcuda once, declares the argument types of the functions used here, and
    calls cuInit(0);
  * every failing call raises `CudaDriverError` carrying the CUresult, its name and string;
  * kernels run in the device's *primary* context, the one torch's runtime uses:
    `device_context(dev)` makes it current for a block (push/pop only when another context is
    current, `cuCtxSetCurrent` when none is, nothing when it already is);
  * modules are loaded per device with `load_module`, unloaded with `unload_module`.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import threading
from typing import Optional

from ..errors import TileLangError

CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_NOT_INITIALIZED = 3
CUDA_ERROR_DEINITIALIZED = 4
CUDA_ERROR_INVALID_CONTEXT = 201
CUDA_ERROR_INVALID_HANDLE = 400

# CUfunction_attribute
FUNC_MAX_THREADS_PER_BLOCK = 0
FUNC_SHARED_SIZE_BYTES = 1
FUNC_CONST_SIZE_BYTES = 2
FUNC_LOCAL_SIZE_BYTES = 3
FUNC_NUM_REGS = 4
FUNC_PTX_VERSION = 5
FUNC_BINARY_VERSION = 6
FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
FUNC_PREFERRED_SHARED_MEMORY_CARVEOUT = 9

# CUdevice_attribute
DEV_MAX_THREADS_PER_BLOCK = 1
DEV_MULTIPROCESSOR_COUNT = 16
DEV_COMPUTE_CAPABILITY_MAJOR = 75
DEV_COMPUTE_CAPABILITY_MINOR = 76
DEV_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97


class CudaDriverError(TileLangError, RuntimeError):
    """A CUDA driver call failed. `code` is the CUresult, `name` e.g. CUDA_ERROR_INVALID_VALUE."""

    def __init__(self, message: str, code: int = -1, name: str = ""):
        super().__init__(message)
        self.code = code
        self.name = name


_lib = None
_raw = None  # the loaded library even when cuInit failed (for error names)
_lib_lock = threading.Lock()

_vp, _u32, _i32 = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
_SIGNATURES = {
    "cuInit": [_u32],
    "cuDriverGetVersion": [ctypes.POINTER(_i32)],
    "cuDeviceGet": [ctypes.POINTER(_i32), _i32],
    "cuDeviceGetCount": [ctypes.POINTER(_i32)],
    "cuDeviceGetAttribute": [ctypes.POINTER(_i32), _i32, _i32],
    "cuDevicePrimaryCtxRetain": [ctypes.POINTER(_vp), _i32],
    "cuCtxGetCurrent": [ctypes.POINTER(_vp)],
    "cuCtxSetCurrent": [_vp],
    "cuCtxPushCurrent_v2": [_vp],
    "cuCtxPopCurrent_v2": [ctypes.POINTER(_vp)],
    "cuCtxSynchronize": [],
    "cuModuleLoadData": [ctypes.POINTER(_vp), ctypes.c_char_p],
    "cuModuleUnload": [_vp],
    "cuModuleGetFunction": [ctypes.POINTER(_vp), _vp, ctypes.c_char_p],
    "cuFuncSetAttribute": [_vp, _i32, _i32],
    "cuFuncGetAttribute": [ctypes.POINTER(_i32), _i32, _vp],
    "cuLaunchKernel": [_vp, _u32, _u32, _u32, _u32, _u32, _u32, _u32, _vp, _vp, _vp],
    "cuStreamSynchronize": [_vp],
    "cuGetErrorName": [_i32, ctypes.POINTER(ctypes.c_char_p)],
    "cuGetErrorString": [_i32, ctypes.POINTER(ctypes.c_char_p)],
    "cuTensorMapEncodeTiled": [_vp, _i32, _u32, _vp, _vp, _vp, _vp, _vp, _i32, _i32, _i32, _i32],
    "cuTensorMapEncodeIm2col": [_vp, _i32, _u32, _vp, _vp, _vp, _vp, _vp, _u32, _u32, _vp, _i32,
                                _i32, _i32, _i32],
}


def lib():
    """libcuda, loaded and initialised once."""
    global _lib, _raw
    if _lib is not None:
        return _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        try:
            handle = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise CudaDriverError(f"cannot load the CUDA driver (libcuda.so.1): {e}; is an "
                                  "NVIDIA driver installed?") from None
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(handle, name, None)
            if fn is None:
                continue
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int
        _raw = handle
        check(handle.cuInit(0), "cuInit", "(no usable NVIDIA GPU or driver?)")
        _lib = handle
        return handle


def error_name(code: int) -> tuple[str, str]:
    name, text = ctypes.c_char_p(), ctypes.c_char_p()
    try:
        _raw.cuGetErrorName(code, ctypes.byref(name))
        _raw.cuGetErrorString(code, ctypes.byref(text))
    except Exception:  # noqa: BLE001 - only used to build a message
        pass
    return ((name.value or b"CUDA_ERROR_%d" % code).decode(),
            (text.value or b"unknown error").decode())


def check(res: int, what: str, detail: str = ""):
    if res != CUDA_SUCCESS:
        name, text = error_name(res)
        msg = f"{what} failed: {name} ({res}): {text}"
        if detail:
            msg += f"\n{detail}"
        raise CudaDriverError(msg, res, name)


def fast_launcher():
    """cuLaunchKernel as a ctypes function without argument types, called with the GIL held
    (as torch launches): ints go as C int (grid, block, smem), pointers must be passed as
    c_void_p objects or None. About 1.5 us cheaper per call than the typed binding."""
    addr = ctypes.cast(lib().cuLaunchKernel, ctypes.c_void_p).value
    return ctypes.PYFUNCTYPE(ctypes.c_int)(addr)


class LaunchConfig(ctypes.Structure):
    """CUlaunchConfig: grid, block, dynamic shared memory and stream of one launch."""

    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("smem", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("num_attrs", ctypes.c_uint)]


def cooperative_launcher():
    """cuLaunchCooperativeKernel with fast_launcher's call signature (its trailing `extra`
    argument is dropped): all blocks of the grid are resident at once, or the launch fails
    with CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE."""
    addr = ctypes.cast(lib().cuLaunchCooperativeKernel, ctypes.c_void_p).value
    fn = ctypes.PYFUNCTYPE(ctypes.c_int)(addr)

    def launch(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        return fn(f, gx, gy, gz, bx, by, bz, smem, stream, params)
    return launch


def fast_launcher_ex():
    """cuLaunchKernelEx(config, function, params, extra) as an untyped ctypes function (all
    four arguments c_void_p objects or None), or None when the driver predates it. With the
    config built once per kernel and stream, a launch converts 4 arguments instead of 11:
    0.4 us less per call on an H200 host (benchmarks/host_overhead.py)."""
    fn = getattr(lib(), "cuLaunchKernelEx", None)
    if fn is None:
        return None
    return ctypes.PYFUNCTYPE(ctypes.c_int)(ctypes.cast(fn, ctypes.c_void_p).value)


# ---- devices and contexts --------------------------------------------------------------------

_primary: dict = {}


def _ensure_torch_context(device: int):
    """Let torch's runtime create the primary context first, so both share it."""
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.init()
    except Exception:  # noqa: BLE001 - torch is optional for the driver layer
        pass


def primary_context(device: int) -> int:
    ctx = _primary.get(device)
    if ctx is None:
        _ensure_torch_context(device)
        lb = lib()
        dev = ctypes.c_int()
        check(lb.cuDeviceGet(ctypes.byref(dev), device), f"cuDeviceGet({device})")
        h = ctypes.c_void_p()
        check(lb.cuDevicePrimaryCtxRetain(ctypes.byref(h), dev), "cuDevicePrimaryCtxRetain")
        ctx = _primary[device] = h.value  # retained for the life of the process
    return ctx


def current_context() -> Optional[int]:
    h = ctypes.c_void_p()
    check(lib().cuCtxGetCurrent(ctypes.byref(h)), "cuCtxGetCurrent")
    return h.value


@contextlib.contextmanager
def device_context(device: int):
    """Make `device`'s primary context current inside the block."""
    want = primary_context(device)
    cur = current_context()
    if cur == want:
        yield
        return
    lb = lib()
    if cur is None:  # nothing bound to this thread: bind it, like the runtime would
        check(lb.cuCtxSetCurrent(want), "cuCtxSetCurrent")
        yield
        return
    check(lb.cuCtxPushCurrent_v2(want), "cuCtxPushCurrent")
    try:
        yield
    finally:
        old = ctypes.c_void_p()
        lb.cuCtxPopCurrent_v2(ctypes.byref(old))


def bind_if_unbound(device: int) -> bool:
    """When no context is current on this thread, make `device`'s primary one current."""
    if current_context() is None:
        check(lib().cuCtxSetCurrent(primary_context(device)), "cuCtxSetCurrent")
        return True
    return False


def device_attribute(attr: int, device: int) -> int:
    lb = lib()
    dev, out = ctypes.c_int(), ctypes.c_int()
    check(lb.cuDeviceGet(ctypes.byref(dev), device), f"cuDeviceGet({device})")
    check(lb.cuDeviceGetAttribute(ctypes.byref(out), attr, dev), "cuDeviceGetAttribute")
    return out.value


@functools.lru_cache(maxsize=None)
def sm_count(device: int) -> int:
    """The SM count of `device` (the launch-time value of `ir.DEVICE_SM_COUNT`)."""
    return device_attribute(DEV_MULTIPROCESSOR_COUNT, device)


def device_count() -> int:
    n = ctypes.c_int()
    check(lib().cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
    return n.value


# ---- modules and functions -------------------------------------------------------------------

def load_module(cubin: bytes, device: int) -> int:
    with device_context(device):
        h = ctypes.c_void_p()
        check(lib().cuModuleLoadData(ctypes.byref(h), cubin), "cuModuleLoadData",
              f"(a cubin of {len(cubin)} bytes on device {device}; was it built for this "
              "GPU's architecture?)")
        return h.value


def unload_module(module: int, device: int):
    with device_context(device):
        check(lib().cuModuleUnload(module), "cuModuleUnload")


def get_function(module: int, name: str) -> int:
    h = ctypes.c_void_p()
    check(lib().cuModuleGetFunction(ctypes.byref(h), module, name.encode()),
          "cuModuleGetFunction", f"(kernel {name!r}; it must be declared extern \"C\")")
    return h.value


def func_get_attribute(func: int, attr: int) -> int:
    out = ctypes.c_int()
    check(lib().cuFuncGetAttribute(ctypes.byref(out), attr, func), "cuFuncGetAttribute")
    return out.value


def func_set_attribute(func: int, attr: int, value: int):
    check(lib().cuFuncSetAttribute(func, attr, value), "cuFuncSetAttribute")


def synchronize():
    check(lib().cuCtxSynchronize(), "cuCtxSynchronize")


def stream_synchronize(stream: int):
    check(lib().cuStreamSynchronize(stream), "cuStreamSynchronize")
