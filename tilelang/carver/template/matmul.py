"""`MatmulTemplate(M, N, K, trans_A, trans_B, in_dtype, out_dtype, accum_dtype)`: C = op(A) @
op(B) (B given as [N, K] when trans_B, the default). `.with_arch(CUDA(...))` then
`.recommend_hints(topk)` ranks tile configurations with the recommender of
carver/roller/recommend.py; `.equivalent_function()` is a tiled T.gemm kernel with the best of
them (a plain default without a device)."""

from __future__ import annotations

from dataclasses import dataclass

from ..roller.recommend import recommend_gemm_hints
from .base import BaseTemplate

__all__ = ["MatmulTemplate"]


@dataclass
class MatmulTemplate(BaseTemplate):
    M: int = None
    N: int = None
    K: int = None
    trans_A: bool = False
    trans_B: bool = True
    in_dtype: str = "float16"
    out_dtype: str = "float16"
    accum_dtype: str = "float16"
    with_bias: bool = False

    def __post_init__(self):
        for name in ("M", "N", "K"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"MatmulTemplate: {name} must be a positive int, got {v!r}")
        if self.with_bias:
            raise NotImplementedError("MatmulTemplate(with_bias=True) is not supported")

    def get_hardware_aware_configs(self, arch=None, topk: int = 10) -> list:
        return recommend_gemm_hints(self.M, self.N, self.K, self.in_dtype, self.accum_dtype,
                                    arch if arch is not None else self._arch, topk)

    def initialize_function(self):
        block_m, block_n, block_k, stages, threads = 128, 128, 32, 2, 128
        if self._arch is not None:
            hints = self.get_hardware_aware_configs(self._arch, 1)
            if hints:
                h = hints[0]
                block_m, block_n = h.block
                block_k, stages, threads = h.rstep[0], h.pipeline_stage, h.threads
        return _matmul(self.M, self.N, self.K, self.trans_A, self.trans_B, self.in_dtype,
                       self.out_dtype, self.accum_dtype, block_m, block_n, block_k, stages,
                       threads)


def _matmul(M, N, K, trans_A, trans_B, in_dtype, out_dtype, accum_dtype, block_m, block_n,
            block_k, stages, threads):
    from ... import language as T

    a_shape = (K, M) if trans_A else (M, K)
    b_shape = (N, K) if trans_B else (K, N)
    a_tile = (block_k, block_m) if trans_A else (block_m, block_k)
    b_tile = (block_n, block_k) if trans_B else (block_k, block_n)

    @T.prim_func
    def matmul(A: T.Tensor(a_shape, in_dtype), B: T.Tensor(b_shape, in_dtype),
               C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_n), T.ceildiv(M, block_m), threads=threads) as (bx, by):
            A_s = T.alloc_shared(a_tile, in_dtype)
            B_s = T.alloc_shared(b_tile, in_dtype)
            C_l = T.alloc_fragment((block_m, block_n), accum_dtype)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_k), num_stages=stages):
                if trans_A:
                    T.copy(A[k * block_k, by * block_m], A_s)
                else:
                    T.copy(A[by * block_m, k * block_k], A_s)
                if trans_B:
                    T.copy(B[bx * block_n, k * block_k], B_s)
                else:
                    T.copy(B[k * block_k, bx * block_n], B_s)
                T.gemm(A_s, B_s, C_l, transpose_A=trans_A, transpose_B=trans_B)
            T.copy(C_l, C[by * block_m, bx * block_n])

    return matmul
