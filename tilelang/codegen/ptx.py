"""CUDA renderings of the hand-written warp-level instructions `ptx_ldmatrix` and `ptx_mma`
(tilelang/language/ptx.py): calls of the wrappers in tl/ptx_compat.cuh."""

from __future__ import annotations

from ..ir import nodes as ir

__all__ = ["PTX_RENDERERS"]


def _ldmatrix(p, c: ir.Call, address) -> str:
    trans, num, src, dst = c.args
    flag = "true" if trans.value else "false"
    return f"tl::ptx_ldmatrix<{num.value}, {flag}>({address(p, dst)}, {address(p, src)})"


def _mma(p, c: ir.Call, address) -> str:
    shape, a_t, c_t, A, B, C = c.args
    return (f"tl::ptx_mma_{shape}_{a_t}_{c_t}({address(p, A)}, {address(p, B)}, "
            f"{address(p, C)})")


PTX_RENDERERS = {"ptx_ldmatrix": _ldmatrix, "ptx_mma": _mma}
