"""TMA descriptors (CUtensorMap) from `cuTensorMapEncodeTiled` (HARDWARE.md §7).

Expects the driver only when a map is actually encoded. Guarantees:
  * `check_tiled(...)` validates every rule of HARDWARE §7 in Python and raises ValueError
    naming the parameter (the driver itself only answers CUDA_ERROR_INVALID_VALUE);
  * `encode_tiled(...)` returns the 128-byte map as `bytes`, ready to be passed by value as a
    `tensor_map` kernel parameter (`const __grid_constant__ tl::TensorMap` in CUDA); results
    are cached per argument tuple, so encoding per call is a dict lookup (≈0.6 µs);
  * all arrays are innermost-first, as the driver wants; `encode_tiled_rowmajor` takes torch's
    outermost-first order (shape, element strides, box) and reverses it.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict

from . import driver

# CUtensorMapDataType (HARDWARE §7); FP8 has no enum: UINT8, as CUTLASS does.
DATA_TYPES = {
    "uint8": 0, "int8": 0, "bool": 0, "float8_e4m3": 0, "float8_e5m2": 0,
    "uint16": 1, "int16": 1, "uint32": 2, "int32": 3, "uint64": 4, "int64": 5,
    "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9, "float32_ftz": 10,
    "tfloat32": 11, "tfloat32_ftz": 12,
}
ELEM_BYTES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
SWIZZLE = {"none": 0, "32B": 1, "64B": 2, "128B": 3}
SWIZZLE_BYTES = {0: None, 1: 32, 2: 64, 3: 128}
INTERLEAVE = {"none": 0, "16B": 1, "32B": 2}
L2_PROMOTION = {"none": 0, "64B": 1, "128B": 2, "256B": 3}
OOB_FILL = {"zero": 0, "none": 0, "nan": 1}

_CACHE: OrderedDict = OrderedDict()  # normalised arguments -> map
_RAW: dict = {}  # the caller's own argument tuple -> map (the per-call fast path)
_CACHE_MAX = 4096


def _remember(raw, data):
    if raw is not None:
        if len(_RAW) >= _CACHE_MAX:
            _RAW.clear()
        _RAW[raw] = data


def _enum(value, table, what):
    if isinstance(value, str):
        key = value if value in table else value.upper().replace("SWIZZLE_", "")
        for k, v in table.items():
            if k.lower() == key.lower():
                return v
        raise ValueError(f"unknown {what} {value!r}; expected one of {sorted(table)}")
    return int(value)


def data_type(dtype) -> int:
    if isinstance(dtype, int):
        return dtype
    name = str(getattr(dtype, "name", dtype)).replace("torch.", "")
    name = {"float8_e4m3fn": "float8_e4m3", "half": "float16", "float": "float32",
            "double": "float64"}.get(name, name)
    if name not in DATA_TYPES:
        raise ValueError(f"no TMA data type for {dtype!r}")
    return DATA_TYPES[name]


def check_tiled(dtype: int, address: int, dims, strides, box, element_strides,
                interleave: int, swizzle: int):
    """Raise ValueError if cuTensorMapEncodeTiled would reject these (HARDWARE §7)."""
    rank = len(dims)
    esize = ELEM_BYTES[dtype]
    if not 1 <= rank <= 5:
        raise ValueError(f"TMA tensor rank must be 1..5, got {rank}")
    if interleave != 0 and rank < 3:
        raise ValueError("TMA interleaved layouts need rank >= 3")
    if len(strides) != rank - 1:
        raise ValueError(f"TMA needs {rank - 1} global strides (dims 1..{rank - 1}, bytes), "
                         f"got {len(strides)}")
    if len(box) != rank or len(element_strides) != rank:
        raise ValueError(f"TMA box and element strides need {rank} entries each")
    align = 32 if interleave == 2 else 16
    if address % align:
        raise ValueError(f"TMA global address {address:#x} is not {align}-byte aligned")
    for i, d in enumerate(dims):
        if not 1 <= d <= 1 << 32:
            raise ValueError(f"TMA global dim {i} = {d} is outside [1, 2^32]")
    for i, s in enumerate(strides):
        if s % align or not 0 < s < 1 << 40:
            raise ValueError(f"TMA global stride of dim {i + 1} = {s} B must be a positive "
                             f"multiple of {align} below 2^40")
    for i, b in enumerate(box):
        if not 1 <= b <= 256:
            raise ValueError(f"TMA box dim {i} = {b} is outside [1, 256]")
    if interleave == 0 and (box[0] * esize) % 16:
        raise ValueError(f"TMA inner box {box[0]} x {esize} B = {box[0] * esize} B is not a "
                         "multiple of 16 B")
    width = SWIZZLE_BYTES.get(swizzle)
    if swizzle not in SWIZZLE_BYTES:
        raise ValueError(f"TMA swizzle {swizzle} is not supported on sm_90 (0..3)")
    if width and interleave == 0 and box[0] * esize > width:
        raise ValueError(f"TMA inner box {box[0] * esize} B exceeds the {width}B swizzle "
                         f"width; use box[0] = {width // esize}")
    if interleave == 2 and swizzle != 1:
        raise ValueError("TMA INTERLEAVE_32B requires SWIZZLE_32B")
    for i, e in enumerate(element_strides):
        if not 1 <= e <= 8:
            raise ValueError(f"TMA element stride {i} = {e} is outside [1, 8]")


def encode_tiled(dtype, address: int, dims, strides, box, element_strides=None,
                 interleave=0, swizzle=0, l2_promotion=2, oob_fill=0) -> bytes:
    """cuTensorMapEncodeTiled; every array innermost first, `strides` in bytes for dims 1..r-1."""
    raw = ("tiled", dtype, address, dims, strides, box, element_strides, interleave, swizzle,
           l2_promotion, oob_fill)
    try:
        hit = _RAW.get(raw)
    except TypeError:  # lists: no fast path
        raw, hit = None, None
    if hit is not None:
        return hit
    dt = data_type(dtype)
    dims, strides, box = tuple(int(d) for d in dims), tuple(int(s) for s in strides), \
        tuple(int(b) for b in box)
    element_strides = tuple(int(e) for e in element_strides) if element_strides else \
        (1,) * len(dims)
    il = _enum(interleave, INTERLEAVE, "interleave")
    sw = _enum(swizzle, SWIZZLE, "swizzle")
    l2 = _enum(l2_promotion, L2_PROMOTION, "L2 promotion")
    oob = _enum(oob_fill, OOB_FILL, "OOB fill")
    key = (dt, int(address), dims, strides, box, element_strides, il, sw, l2, oob)
    hit = _CACHE.get(key)
    if hit is not None:
        _remember(raw, hit)
        return hit
    check_tiled(dt, int(address), dims, strides, box, element_strides, il, sw)
    rank = len(dims)
    out = ctypes.create_string_buffer(128 + 64)
    base = (ctypes.addressof(out) + 63) & ~63
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    c_dims = (u64 * rank)(*dims)
    c_strides = (u64 * max(rank - 1, 1))(*(strides or (0,)))
    c_box = (u32 * rank)(*box)
    c_es = (u32 * rank)(*element_strides)
    lib = driver.lib()
    res = lib.cuTensorMapEncodeTiled(base, dt, rank, int(address), c_dims, c_strides, c_box,
                                     c_es, il, sw, l2, oob)
    driver.check(res, "cuTensorMapEncodeTiled",
                 f"(dtype={dt}, dims={dims}, strides={strides}, box={box}, swizzle={sw})")
    data = ctypes.string_at(base, 128)
    _CACHE[key] = data
    if len(_CACHE) > _CACHE_MAX:
        _CACHE.popitem(last=False)
    _remember(raw, data)
    return data


def encode_tiled_rowmajor(dtype, address: int, shape, elem_strides, box, swizzle=0,
                          l2_promotion=2, oob_fill=0) -> bytes:
    """Like `encode_tiled`, with torch's order: `shape`, `elem_strides` (in elements) and `box`
    outermost first; the innermost dimension must be contiguous (stride 1)."""
    raw = ("rowmajor", dtype, address, shape, elem_strides, box, swizzle, l2_promotion, oob_fill)
    try:
        hit = _RAW.get(raw)
    except TypeError:
        raw, hit = None, None
    if hit is not None:
        return hit
    dt = data_type(dtype)
    if elem_strides[-1] != 1:
        raise ValueError(f"TMA needs a contiguous innermost dimension, stride is "
                         f"{elem_strides[-1]}")
    esize = ELEM_BYTES[dt]
    dims = tuple(reversed(shape))
    strides = tuple(int(s) * esize for s in reversed(elem_strides[:-1]))
    data = encode_tiled(dt, address, dims, strides, tuple(reversed(box)), None, 0, swizzle,
                        l2_promotion, oob_fill)
    _remember(raw, data)
    return data


def encode_im2col_nhwc(dtype, address: int, shape, elem_strides, lower, upper, channels: int,
                       pixels: int, conv_stride=(1, 1), swizzle=0, l2_promotion=2,
                       oob_fill=0) -> bytes:
    """cuTensorMapEncodeIm2col over a (N, H, W, C) tensor (`shape`, `elem_strides` in torch's
    order, C contiguous): each load brings `pixels` pixels of `channels` channels, walking the
    bounding box `lower`..`upper` (corners (h, w) relative to the tensor's first and last
    pixel) W first with `conv_stride` (h, w) steps."""
    raw = ("im2col", dtype, address, shape, elem_strides, lower, upper, channels, pixels,
           conv_stride, swizzle, l2_promotion, oob_fill)
    hit = _RAW.get(raw)
    if hit is not None:
        return hit
    dt = data_type(dtype)
    if len(shape) != 4 or elem_strides[-1] != 1:
        raise ValueError("TMA im2col needs a 4-D (N, H, W, C) tensor with contiguous channels")
    esize = ELEM_BYTES[dt]
    dims = tuple(int(d) for d in reversed(shape))                     # C, W, H, N
    strides = tuple(int(s) * esize for s in reversed(elem_strides[:-1]))
    for i, st in enumerate(strides):
        if st % 16 or not 0 < st < 1 << 40:
            raise ValueError(f"TMA global stride of dim {i + 1} = {st} B must be a positive "
                             "multiple of 16 below 2^40")
    if address % 16:
        raise ValueError(f"TMA global address {address:#x} is not 16-byte aligned")
    if not (1 <= channels <= 256 and 1 <= pixels <= 1024):
        raise ValueError(f"TMA im2col loads 1..256 channels of 1..1024 pixels, got {channels} "
                         f"x {pixels}")
    sw = _enum(swizzle, SWIZZLE, "swizzle")
    width = SWIZZLE_BYTES.get(sw)
    if width and channels * esize > width:
        raise ValueError(f"TMA im2col rows of {channels * esize} B exceed the {width}B swizzle")
    out = ctypes.create_string_buffer(128 + 64)
    base = (ctypes.addressof(out) + 63) & ~63
    u64, u32, i32 = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int32
    c_dims = (u64 * 4)(*dims)
    c_strides = (u64 * 3)(*strides)
    c_lower = (i32 * 2)(int(lower[1]), int(lower[0]))                  # W, H
    c_upper = (i32 * 2)(int(upper[1]), int(upper[0]))
    c_es = (u32 * 4)(1, int(conv_stride[1]), int(conv_stride[0]), 1)
    res = driver.lib().cuTensorMapEncodeIm2col(
        base, dt, 4, int(address), c_dims, c_strides, c_lower, c_upper, int(channels),
        int(pixels), c_es, 0, sw, _enum(l2_promotion, L2_PROMOTION, "L2 promotion"),
        _enum(oob_fill, OOB_FILL, "OOB fill"))
    driver.check(res, "cuTensorMapEncodeIm2col",
                 f"(dtype={dt}, dims={dims}, corners={lower}..{upper}, {channels} channels x "
                 f"{pixels} pixels, stride={conv_stride}, swizzle={sw})")
    data = ctypes.string_at(base, 128)
    _remember(raw, data)
    return data
