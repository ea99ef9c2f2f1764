"""Loaded kernels and `cuLaunchKernel` with a prebuilt argument buffer.

Expects a cubin, the kernel's `extern "C"` name and its parameter types in order (see
`PARAM_TYPES`: "ptr", "int32", "float32", "float16", "bfloat16", "tensor_map", ...).
Guarantees:
  * the parameter block is laid out once per kernel: one 64-byte aligned buffer holding every
    argument at its natural alignment (128 bytes, 64-aligned, for a CUtensorMap), and a
    `void*[n]` array pointing into it; a launch packs the values with one
    `struct.pack_into` call and calls cuLaunchKernel, nothing else;
  * the module is loaded per device on first use there (a dict device -> module), the dynamic
    shared-memory limit is raised with cuFuncSetAttribute when a launch asks for > 48 KB;
  * launches go to the given stream with no synchronisation, so they can be captured into a
    CUDA graph (load the module before capture: `prepare(device)`);
  * modules are unloaded when the `CudaKernelFunction` is garbage collected (weakref.finalize).
"""

from __future__ import annotations

import ctypes
import struct
import threading
import weakref
from typing import Sequence

from . import driver
from .cubin_info import resource_usage
from .stream import cached_stream_arg, current_device, current_stream_handle

_thread = threading.local()

# name -> (struct code, size, alignment)
PARAM_TYPES = {
    "ptr": ("Q", 8, 8), "bool": ("?", 1, 1),
    "int8": ("b", 1, 1), "uint8": ("B", 1, 1), "int16": ("h", 2, 2), "uint16": ("H", 2, 2),
    "int32": ("i", 4, 4), "uint32": ("I", 4, 4), "int64": ("q", 8, 8), "uint64": ("Q", 8, 8),
    "float16": ("e", 2, 2), "bfloat16": ("H", 2, 2), "float32": ("f", 4, 4),
    "float64": ("d", 8, 8), "float8_e4m3": ("B", 1, 1), "float8_e5m2": ("B", 1, 1),
    "float8_e8m0fnu": ("B", 1, 1), "tensor_map": ("128s", 128, 64),
}
_ALIASES = {
    "void*": "ptr", "pointer": "ptr", "handle": "ptr", "int": "int32", "unsigned int": "uint32",
    "uint": "uint32", "long long": "int64", "unsigned long long": "uint64", "float": "float32",
    "double": "float64", "half": "float16", "half_t": "float16", "__half": "float16",
    "bf16": "bfloat16", "bfloat16_t": "bfloat16", "__nv_bfloat16": "bfloat16",
    "fp16": "float16", "fp32": "float32", "fp64": "float64", "signed char": "int8",
    "unsigned char": "uint8", "short": "int16", "unsigned short": "uint16",
    "CUtensorMap": "tensor_map", "tl::TensorMap": "tensor_map", "tensormap": "tensor_map",
}


def param_type(t) -> str:
    name = getattr(t, "name", t)
    name = str(name).strip()
    name = _ALIASES.get(name, name)
    if name.endswith("*"):
        name = "ptr"
    if name not in PARAM_TYPES:
        raise ValueError(f"unknown kernel parameter type {t!r}; known: "
                         f"{', '.join(sorted(PARAM_TYPES))}")
    return name


def _bf16_bits(x) -> int:
    """float -> bfloat16 bits, round to nearest even (NaN stays NaN)."""
    (u,) = struct.unpack("<I", struct.pack("<f", float(x)))
    if (u & 0x7F800000) == 0x7F800000 and (u & 0x7FFFFF):
        return 0x7FC0
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def _fp8_bits(x, kind: str) -> int:
    import torch

    dt = {"float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2,
          "float8_e8m0fnu": torch.float8_e8m0fnu}[kind]
    return int(torch.tensor(float(x)).to(dt).view(torch.uint8).item())


class ArgLayout:
    """The parameter block of one kernel signature (see the module docstring)."""

    def __init__(self, types: Sequence):
        self.types = tuple(param_type(t) for t in types)
        fmt, offsets, off = "<", [], 0
        for t in self.types:
            code, size, align = PARAM_TYPES[t]
            pad = (-off) % align
            if pad:
                fmt += f"{pad}x"
            off += pad
            offsets.append(off)
            fmt += code
            off += size
        self.size = off
        self.offsets = tuple(offsets)
        self.struct = struct.Struct(fmt)
        self._buf = ctypes.create_string_buffer(max(off, 1) + 64)
        base = ctypes.addressof(self._buf)
        self.base = (base + 63) & ~63
        self.buf_offset = self.base - base
        n = len(self.types)
        self._ptrs = (ctypes.c_void_p * max(n, 1))(*[self.base + o for o in offsets])
        self.params_addr = ctypes.addressof(self._ptrs) if n else None
        self.params_arg = ctypes.c_void_p(self.params_addr) if n else None  # for the call
        # arguments that need a Python-side conversion (or, for tensor maps, a length check:
        # struct would silently zero-pad a short one) before packing
        self.converters = tuple((i, t) for i, t in enumerate(self.types)
                                if t in ("bfloat16", "float8_e4m3", "float8_e5m2",
                                         "float8_e8m0fnu", "tensor_map"))
        self._pack_into = self.struct.pack_into

    def pack(self, args):
        """Write the values of `args` into the parameter block."""
        if self.converters:
            args = list(args)
            try:
                for i, t in self.converters:
                    args[i] = _convert(args[i], t)
            except (TypeError, ValueError, OverflowError, IndexError):
                args = self.convert(args, strict=True)
        try:
            self._pack_into(self._buf, self.buf_offset, *args)
        except (struct.error, TypeError):
            self._pack_into(self._buf, self.buf_offset, *self.convert(args, strict=True))

    def convert(self, args, strict: bool = False):
        """Values as struct wants them; with `strict`, errors name the offending argument."""
        args = list(args)
        if len(args) != len(self.types):
            raise TypeError(f"kernel expects {len(self.types)} arguments "
                            f"({', '.join(self.types)}), got {len(args)}")
        for i, t in enumerate(self.types):
            v = args[i]
            try:
                args[i] = _convert(v, t)
            except (TypeError, ValueError, OverflowError, struct.error) as e:
                raise TypeError(f"kernel argument {i} ({t}): cannot pass {v!r}: {e}") from None
            if strict:
                try:
                    struct.pack("<" + PARAM_TYPES[t][0], args[i])
                except struct.error as e:
                    raise TypeError(f"kernel argument {i} ({t}): cannot pass {v!r}: "
                                    f"{e}") from None
        return args

    def packed_bytes(self) -> bytes:
        """The current parameter block (for tests)."""
        return ctypes.string_at(self.base, self.size)


def _convert(v, t: str):
    if t == "ptr":
        if hasattr(v, "data_ptr"):
            return v.data_ptr()
        if v is None:
            return 0
        v = int(v)
        return v & 0xFFFFFFFFFFFFFFFF if v < 0 else v
    if t == "tensor_map":
        b = bytes(v)
        if len(b) != 128:
            raise ValueError(f"a tensor map is 128 bytes, got {len(b)}")
        return b
    if hasattr(v, "item"):  # numpy / torch scalars
        v = v.item()
    if t == "bool":
        return bool(v)
    if t == "bfloat16":
        return _bf16_bits(v)
    if t in ("float8_e4m3", "float8_e5m2", "float8_e8m0fnu"):
        return _fp8_bits(v, t)
    if t.startswith("float"):
        return float(v)
    if isinstance(v, float) and not v.is_integer():
        raise TypeError("expected an integer")
    return int(v)


class CudaKernelFunction:
    """One `extern "C" __global__` kernel of a cubin, loaded lazily on each device."""

    def __init__(self, cubin: bytes, name: str, param_types: Sequence = (),
                 cooperative: bool = False):
        self.cubin = bytes(cubin)
        self.name = name
        self.cooperative = cooperative  # launched with cuLaunchCooperativeKernel
        self.layout = ArgLayout(param_types)
        self._lock = threading.Lock()
        self._modules: dict = {}  # device -> CUmodule
        self._entry: dict = {}  # device -> (CUfunction as c_void_p, dynamic smem limit set)
        self._streams: dict = {}  # stream int -> c_void_p (the call takes pointer objects)
        self._finalizer = weakref.finalize(self, _unload_all, self._modules)
        self._finalizer.atexit = False  # the driver may be gone at interpreter exit
        self._launch_fn = None  # cuLaunchKernel, bound on first prepare (no driver needed before)

    # ---- loading --------------------------------------------------------------------------
    def prepare(self, device: int | None = None, smem_bytes: int = 0):
        """Load the module on `device` and allow `smem_bytes` of dynamic shared memory."""
        if device is None:
            device = current_device()
        with self._lock:
            entry = self._entry.get(device)
            if entry is None:
                if self._launch_fn is None:
                    self._launch_fn = driver.cooperative_launcher() if self.cooperative \
                        else driver.fast_launcher()
                module = driver.load_module(self.cubin, device)
                self._modules[device] = module
                func = driver.get_function(module, self.name)
                entry = (ctypes.c_void_p(func), 48 * 1024)
            func, limit = entry
            if smem_bytes > limit:
                optin = driver.device_attribute(driver.DEV_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                                device)
                static = driver.func_get_attribute(func.value, driver.FUNC_SHARED_SIZE_BYTES)
                if smem_bytes + static > optin:
                    raise driver.CudaDriverError(
                        f"kernel {self.name} asks for {smem_bytes} B of dynamic shared memory "
                        f"(+{static} B static), more than device {device} allows per block "
                        f"({optin} B)", driver.CUDA_ERROR_INVALID_VALUE,
                        "CUDA_ERROR_INVALID_VALUE")
                with driver.device_context(device):
                    driver.func_set_attribute(func.value,
                                              driver.FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                              smem_bytes)
                entry = (func, smem_bytes)
            self._entry[device] = entry
            return entry

    def function_handle(self, device: int | None = None) -> int:
        """The CUfunction on `device` (loading the module if needed)."""
        return self.prepare(device)[0].value

    def attribute(self, attr: int, device: int | None = None) -> int:
        return driver.func_get_attribute(self.function_handle(device), attr)

    def _cubin_usage(self):
        """(registers, local bytes) read from the cubin itself: no GPU needed."""
        try:
            return resource_usage(self.cubin).get(self.name)
        except (ValueError, IndexError, struct.error):
            return None

    def num_regs(self, device: int | None = None) -> int:
        usage = self._cubin_usage() if device is None else None
        return usage[0] if usage else self.attribute(driver.FUNC_NUM_REGS, device)

    def local_bytes(self, device: int | None = None) -> int:
        """Per-thread local memory (register spills and local arrays)."""
        usage = self._cubin_usage() if device is None else None
        return usage[1] if usage else self.attribute(driver.FUNC_LOCAL_SIZE_BYTES, device)

    def max_threads_per_block(self, device: int | None = None) -> int:
        return self.attribute(driver.FUNC_MAX_THREADS_PER_BLOCK, device)

    # ---- launching ------------------------------------------------------------------------
    def _stream_arg(self, stream, device):
        if stream is None:
            return ctypes.c_void_p(current_stream_handle(device))
        return cached_stream_arg(self._streams, stream)

    def launch(self, grid, block, smem_bytes: int, stream, args, device: int | None = None):
        """Launch on `stream` (a raw cudaStream_t int; None = torch's current stream)."""
        cur = current_device()
        if device is None:
            device = cur
        entry = self._entry.get(device)
        if entry is None or smem_bytes > entry[1]:
            entry = self.prepare(device, smem_bytes)
        s = self._streams.get(stream)
        if s is None:
            s = self._stream_arg(stream, device)
        if device != cur:
            return self._launch_other_device(entry[0], grid, block, smem_bytes, s, args,
                                             device)
        gx, gy, gz = grid
        bx, by, bz = block
        layout = self.layout
        if not getattr(_thread, "has_context", False):
            # a fresh thread may have no current context: bind one before the first launch
            # rather than fail and retry (the failed call shows up in compute-sanitizer)
            _thread.has_context = True
            try:
                driver.bind_if_unbound(device)
            except driver.CudaDriverError:
                pass  # the launch itself reports what is wrong
        with self._lock:
            layout.pack(args)
            res = self._launch_fn(entry[0], gx, gy, gz, bx, by, bz, smem_bytes, s,
                                  layout.params_arg, None)
            if res == driver.CUDA_ERROR_INVALID_CONTEXT and driver.bind_if_unbound(device):
                res = self._launch_fn(entry[0], gx, gy, gz, bx, by, bz, smem_bytes, s,
                                      layout.params_arg, None)
        if res:
            self._launch_failed(res, grid, block, smem_bytes, device)

    __call__ = launch

    def _launch_other_device(self, func, grid, block, smem_bytes, stream, args, device):
        gx, gy, gz = grid
        bx, by, bz = block
        with driver.device_context(device), self._lock:
            self.layout.pack(args)
            res = self._launch_fn(func, gx, gy, gz, bx, by, bz, smem_bytes, stream,
                                  self.layout.params_arg, None)
        if res:
            self._launch_failed(res, grid, block, smem_bytes, device)

    def _launch_failed(self, res, grid, block, smem_bytes, device):
        if grid is not None and res == driver.CUDA_ERROR_INVALID_VALUE and 0 in tuple(grid):
            return  # an empty grid runs nothing
        shown = "of this call" if grid is None else tuple(grid)
        detail = (f"kernel {self.name} on device {device}: grid {shown}, "
                  f"block={tuple(block)}, dynamic smem={smem_bytes} B")
        try:
            func = self._entry[device][0].value
            detail += (f"; the kernel allows at most "
                       f"{driver.func_get_attribute(func, driver.FUNC_MAX_THREADS_PER_BLOCK)}"
                       f" threads per block and uses "
                       f"{driver.func_get_attribute(func, driver.FUNC_NUM_REGS)} registers")
        except Exception:  # noqa: BLE001 - the message is best effort
            pass
        driver.check(res, "cuLaunchKernel", detail)

    def __repr__(self):
        return (f"<CudaKernelFunction {self.name}({', '.join(self.layout.types)}) "
                f"loaded on {sorted(self._modules)}>")


def _unload_all(modules: dict):
    for device, module in list(modules.items()):
        try:
            driver.unload_module(module, device)
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass
    modules.clear()


def launch(func: CudaKernelFunction, grid, block, smem_bytes: int, stream, args,
           device: int | None = None):
    """`func.launch(...)`: the entry point the generated host code calls."""
    func.launch(grid, block, smem_bytes, stream, args, device)
