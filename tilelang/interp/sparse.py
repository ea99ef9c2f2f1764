"""2:4 (1:2 for float32) structured sparsity on the CPU: the meaning of `T.gemm_sp`'s A.

`decompress(values, meta, a_dtype)` rebuilds the dense M x K operand from the M x K/2 kept
values and the M x K/e metadata (e = get_e_factor(a_dtype, meta dtype)); `T.gemm_sp` is the
dense product of that operand. The metadata is the reference compressor's: one 4-bit code per
group of `group` consecutive elements of a row, packed from the lowest bits of each metadata
integer up (group g of a row is bits 4*(g % n) .. 4*(g % n) + 3 of integer g // n, n = the
integer's bits / 4). A code holds two 2-bit indices, the first in its low bits; they must
increase. For 2:4 groups they are the positions of the two kept values; a float32 pair (1:2)
is addressed as four 16-bit halves, so its only codes are 0b0100 (the first element is kept)
and 0b1110 (the second). A code of 0 (zero-filled padding outside the tensor) is taken as
0b0100, which the CUDA path does too, so padding decompresses to the zeros it holds.
"""

from __future__ import annotations

import numpy as np

__all__ = ["decompress"]

_PADDING_CODE = 0b0100


def decompress(values: np.ndarray, meta: np.ndarray, group: int):
    """(dense, bad): the M x K operand (K = `group` / kept * values' columns) and None, or
    None and (row, group index, code) of the first invalid metadata code."""
    kept = 2 if group == 4 else 1
    rows, ncols = values.shape
    ngroups = ncols // kept
    bits = meta.dtype.itemsize * 8
    per_int = bits // 4
    words = meta.view(np.dtype(f"u{meta.dtype.itemsize}")).astype(np.uint32)
    g = np.arange(ngroups)
    codes = (words[:, g // per_int] >> (4 * (g % per_int)).astype(np.uint32)) & 0xF
    codes = np.where(codes == 0, _PADDING_CODE, codes)
    first, second = codes & 3, codes >> 2
    if group == 4:
        valid = first < second
        positions = np.stack([first, second], axis=-1)
    else:
        valid = (codes == 0b0100) | (codes == 0b1110)
        positions = (first // 2)[..., None]
    if not valid.all():
        r, q = np.argwhere(~valid)[0]
        return None, (int(r), int(q), int(codes[r, q]))
    dense = np.zeros((rows, ngroups, group), dtype=values.dtype)
    np.put_along_axis(dense, positions.astype(np.intp), values.reshape(rows, ngroups, kept),
                      axis=-1)
    return dense.reshape(rows, ngroups * group), None
