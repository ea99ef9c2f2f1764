"""Tensor comparison with a tolerated fraction of mismatches (the reference's `torch_assert_close`)
and a numpy-style `assert_allclose`.

`torch_assert_close(a, b, rtol, atol, max_mismatched_ratio)`: an element mismatches when
`not isclose(a, b, rtol, atol)` (NaN equals NaN by default); the check fails only when the number
of mismatches exceeds `int(numel * max_mismatched_ratio)`. Values are compared in float64 so the
verdict does not depend on fp16/bf16 rounding of the comparison itself. The failure message
names the counts, the first mismatch and the greatest absolute/relative difference.
"""

from __future__ import annotations


def _torch():
    import torch

    return torch


def _check_attributes(a, b, check_device, check_dtype, check_layout, check_stride):
    def fail(what, x, y):
        raise AssertionError(f"The values for attribute '{what}' do not match: {x} != {y}.")

    if a.shape != b.shape:
        fail("shape", a.shape, b.shape)
    if check_layout and a.layout != b.layout:
        fail("layout", a.layout, b.layout)
    if check_stride and a.stride() != b.stride():
        fail("stride()", a.stride(), b.stride())
    if check_device and a.device != b.device:
        fail("device", a.device, b.device)
    if check_dtype and a.dtype != b.dtype:
        fail("dtype", a.dtype, b.dtype)


def _as_float64(t):
    torch = _torch()
    if t.layout != torch.strided:
        t = t.to_dense()
    if t.is_complex():
        return t.detach().cpu().to(torch.complex128)
    return t.detach().cpu().to(torch.float64)


def torch_assert_close(tensor_a, tensor_b, rtol: float = 1e-2, atol: float = 1e-3,
                       max_mismatched_ratio: float = 0.001, verbose: bool = False,
                       equal_nan: bool = True, check_device: bool = True,
                       check_dtype: bool = True, check_layout: bool = True,
                       check_stride: bool = False, base_name: str = "LHS",
                       ref_name: str = "RHS"):
    """Assert that `tensor_a` and `tensor_b` are close except for at most
    `int(numel * max_mismatched_ratio)` elements. Returns True on success."""
    torch = _torch()
    if not isinstance(tensor_a, torch.Tensor):
        tensor_a = torch.as_tensor(tensor_a)
    if not isinstance(tensor_b, torch.Tensor):
        tensor_b = torch.as_tensor(tensor_b)
    _check_attributes(tensor_a, tensor_b, check_device, check_dtype, check_layout, check_stride)
    a, b = _as_float64(tensor_a), _as_float64(tensor_b)

    mismatched = ~torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    num_mismatched = int(mismatched.sum().item())
    total = a.numel()
    allowed = int(total * max_mismatched_ratio)
    if verbose:
        print(f"Number of mismatched elements: {num_mismatched} / {total} "
              f"(allowed: {allowed})")
    if num_mismatched <= allowed:
        return True

    diff = (a - b).abs()
    flat = int(torch.argmax(mismatched.reshape(-1).to(torch.int8)).item())
    index = list(_unravel(flat, tuple(a.shape)))
    a_val, b_val = a.reshape(-1)[flat].item(), b.reshape(-1)[flat].item()
    abs_diff = abs(a_val - b_val)
    rel_diff = abs_diff / (abs(b_val) + 1e-12)
    finite = torch.nan_to_num(diff, nan=float("inf"))
    raise AssertionError(
        f"Too many mismatched elements: {num_mismatched} > {allowed} "
        f"({max_mismatched_ratio * 100:.2f}% allowed, but get "
        f"{num_mismatched / total * 100:.2f}%).\n"
        f"First mismatch at index {index}: lhs={a_val:.6f}, rhs={b_val:.6f}, "
        f"abs_diff={abs_diff:.6f}, rel_diff={rel_diff:.6f}\n"
        f"Greatest absolute difference: {finite.max().item()}, "
        f"Greatest relative difference: {(finite / (b.abs() + 1e-12)).max().item()}\n"
        f"{base_name}: {tensor_a}\n{ref_name}: {tensor_b}")


def _unravel(flat: int, shape: tuple):
    out = []
    for size in reversed(shape):
        out.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return tuple(reversed(out))


def _to_numpy(x):
    try:
        torch = _torch()
    except ImportError:
        torch = None
    if torch is not None and isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        if x.dtype in (torch.bfloat16,) or "float8" in str(x.dtype):
            x = x.to(torch.float32)
        return x.numpy()
    import numpy as np

    return np.asarray(x)


def assert_allclose(actual, desired, rtol: float = 1e-7, atol: float = 1e-7):
    """numpy-style check (every element within `atol + rtol * |desired|`); accepts torch tensors
    and numpy arrays. Shapes must match exactly."""
    import numpy as np

    a, d = _to_numpy(actual), _to_numpy(desired)
    if a.shape != d.shape:
        raise AssertionError(f"shape mismatch: {a.shape} vs {d.shape}")
    np.testing.assert_allclose(a, d, rtol=rtol, atol=atol, verbose=True)
