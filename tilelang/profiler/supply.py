"""How the profiler fills input tensors (`TensorSupplyType`) and the parameter descriptions
(`KernelParam`) a custom `supply_prog(params)` receives.

The values follow the reference so that tolerances tuned there still hold here:
  Integer  random ints in [-2, 3) (unsigned and bool: [0, 3) / [0, 2); fp8: int8 values cast)
  Uniform  uniform in [-1, 1)          Normal  normal with mean -1, std 1 (the reference's quirk)
  Randn    standard normal             Zero / One  constant 0 / 1
  Auto     floats (fp16/bf16/fp32): uniform [-1, 1); unsigned [0, 3); bool [0, 2);
           fp8 int8 values cast; other ints and float64: ints in [-2, 3)
int8 buffers get ones under Uniform/Normal (as in the reference). Tensors are created on the
given device (the CPU for kernels compiled for target="cpu"). Dynamic (symbolic) shapes and scalar
parameters cannot be supplied: the error says so and how to pass inputs instead.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional


class TensorSupplyType(enum.Enum):
    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


@dataclass
class KernelParam:
    """One kernel parameter as the profiler sees it: `dtype` is a torch dtype (as in the
    reference), `shape` a list of ints (or symbolic sizes), `tl_dtype` the TileLang dtype."""

    name: str
    dtype: object
    shape: list
    tl_dtype: object = None
    is_scalar_param: bool = False

    @classmethod
    def from_param_info(cls, info) -> "KernelParam":
        dt = info.dtype
        try:
            torch_dtype = dt.torch
        except Exception:
            torch_dtype = None
        return cls(info.name, torch_dtype, list(info.shape), dt, info.kind == "scalar")

    def is_scalar(self) -> bool:
        return self.is_scalar_param

    def is_unsigned(self) -> bool:
        return bool(self.tl_dtype is not None and self.tl_dtype.is_unsigned)

    def is_float8(self) -> bool:
        return bool(self.tl_dtype is not None and self.tl_dtype.is_float8)

    def is_boolean(self) -> bool:
        return bool(self.tl_dtype is not None and self.tl_dtype.is_bool)

    def is_static(self) -> bool:
        return all(isinstance(s, int) for s in self.shape)


_SMALL_FLOATS = ("float16", "bfloat16", "float32")


def _static_shape(param: KernelParam) -> list:
    if param.is_scalar():
        raise ValueError(
            f"parameter {param.name!r} is a scalar ({param.tl_dtype}); the profiler cannot "
            "invent its value: pass input_tensors=[...] (or supply_prog= to the autotuner)")
    for s in param.shape:
        if not isinstance(s, int):
            raise ValueError(
                f"TensorType must have a static shape, but got {s} (parameter {param.name!r}), "
                "likely you are trying to generate a random tensor with a dynamic symbolic shape."
                " Pass input_tensors=[...] instead, or give the sizes: "
                "do_bench(dynamic_symbolic_constraints={'<name>': <size>}).")
    return [int(s) for s in param.shape]


def _randint(low, high, shape, dtype, device):
    import torch

    if dtype.is_floating_point and dtype.itemsize == 1:  # fp8: build as int8, then cast
        return torch.randint(low, high, shape, device=device, dtype=torch.int8).to(dtype)
    try:
        return torch.randint(low, high, shape, device=device, dtype=dtype)
    except (RuntimeError, TypeError):  # dtypes randint does not support (e.g. uint32)
        return torch.randint(low, high, shape, device=device, dtype=torch.int64).to(dtype)


def _floats(shape, dtype, device, fill):
    import torch

    try:
        t = torch.empty(shape, device=device, dtype=dtype)
        fill(t)
        return t
    except (RuntimeError, TypeError, NotImplementedError):  # fp8 etc: fill in fp32, then cast
        t = torch.empty(shape, device=device, dtype=torch.float32)
        fill(t)
        return t.to(dtype)


def make_tensor(param: KernelParam, supply_type: TensorSupplyType, device):
    """One input tensor for `param` following `supply_type` (see the module docstring)."""
    import torch

    shape = _static_shape(param)
    dtype = param.dtype
    if dtype is None:
        raise ValueError(f"parameter {param.name!r} has dtype {param.tl_dtype}, which has no "
                         "torch equivalent; pass input_tensors=[...]")
    st = supply_type
    if st == TensorSupplyType.Auto or st == TensorSupplyType.Integer:
        if param.is_unsigned():
            return _randint(0, 3, shape, dtype, device)
        if param.is_float8():
            return torch.randint(-128, 128, shape, device=device,
                                 dtype=torch.int8).to(dtype)
        if param.is_boolean():
            return torch.randint(0, 2, shape, device=device, dtype=torch.uint8).to(dtype)
        if st == TensorSupplyType.Auto and param.tl_dtype.name in _SMALL_FLOATS:
            return _floats(shape, dtype, device, lambda t: t.uniform_(-1.0, 1.0))
        return _randint(-2, 3, shape, dtype, device)
    if dtype == torch.int8 and st in (TensorSupplyType.Uniform, TensorSupplyType.Normal):
        return torch.ones(shape, device=device, dtype=dtype)
    if st == TensorSupplyType.Uniform:
        return _floats(shape, dtype, device, lambda t: t.uniform_(-1.0, 1.0))
    if st == TensorSupplyType.Normal:
        return _floats(shape, dtype, device, lambda t: t.normal_(-1.0, 1.0))
    if st == TensorSupplyType.Randn:
        return torch.randn(shape, device=device).to(dtype)
    if st == TensorSupplyType.Zero:
        return torch.zeros(shape, device=device, dtype=dtype)
    if st == TensorSupplyType.One:
        return torch.ones(shape, device=device, dtype=dtype)
    raise NotImplementedError(f"unknown tensor supply type {supply_type!r}")


def get_tensor_supply(supply_type: TensorSupplyType = TensorSupplyType.Integer,
                      device: Optional[object] = None):
    """A function `param -> tensor` (the reference's `get_tensor_supply`); `device` defaults to
    the current GPU when there is one, else the CPU."""
    supply_type = normalize_supply_type(supply_type)

    def supply(param: KernelParam):
        dev = device
        if dev is None:
            import torch

            dev = (torch.device("cuda", torch.cuda.current_device())
                   if torch.cuda.is_available() else torch.device("cpu"))
        return make_tensor(param, supply_type, dev)

    return supply


def normalize_supply_type(value) -> TensorSupplyType:
    """Accept the enum, its name ("Normal", case-insensitive) or None (Auto)."""
    if value is None:
        return TensorSupplyType.Auto
    if isinstance(value, TensorSupplyType):
        return value
    if isinstance(value, str):
        for member in TensorSupplyType:
            if member.name.lower() == value.strip().lower():
                return member
    if isinstance(value, enum.Enum) and hasattr(TensorSupplyType, value.name):
        return TensorSupplyType[value.name]
    raise ValueError(f"unknown tensor supply type {value!r}; use one of "
                     f"{', '.join(m.name for m in TensorSupplyType)}")
