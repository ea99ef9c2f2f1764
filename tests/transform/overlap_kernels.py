"""A two-gemm chain with the order/stage/group annotation (used by the CPU pass tests and the
GPU tests): per block of query rows, Out = sum over the first n key tiles of
cast_f16(Q K_k^T) V_k, where n = min(key tiles, bx) so block 0 runs zero iterations, block 1
one, block 2 two, ... . Without `overlap` it is the plain pipelined loop."""

import tilelang.language as T

# statements: 0 K copy | 1 clear S | 2 S = Q K^T | 3 P = cast(S) | 4 V copy | 5 O += P V
GROUP = [[0], [1, 2], [3], [4], [5]]
STAGE = [-1, 0, 0, -1, 1]
ORDER = [-1, 0, 2, -1, 1]  # S(k), then P(k-1) V(k-1), then P(k)


def gemm_chain(M, N, D, block_M=64, block_N=64, threads=128, num_stages=2, overlap=True,
               stage=None, order=None, group=None, wg_wait=0):
    ann = dict(order=order or ORDER, stage=stage or STAGE, group=group or GROUP) \
        if overlap else {}

    @T.prim_func
    def main(Q: T.Tensor((M, D), "float16"), K: T.Tensor((N, D), "float16"),
             V: T.Tensor((N, D), "float16"), Out: T.Tensor((M, D), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            Q_shared = T.alloc_shared((block_M, D), "float16")
            K_shared = T.alloc_shared((block_N, D), "float16")
            V_shared = T.alloc_shared((block_N, D), "float16")
            S = T.alloc_fragment((block_M, block_N), "float")
            P = T.alloc_fragment((block_M, block_N), "float16")
            O = T.alloc_fragment((block_M, D), "float")
            T.copy(Q[bx * block_M, 0], Q_shared)
            T.clear(O)
            for k in T.Pipelined(T.min(T.ceildiv(N, block_N), bx), num_stages=num_stages,
                                 **ann):
                T.copy(K[k * block_N, 0], K_shared)
                T.clear(S)
                T.gemm(Q_shared, K_shared, S, transpose_B=True, wg_wait=wg_wait)
                T.copy(S, P)
                T.copy(V[k * block_N, 0], V_shared)
                T.gemm(P, V_shared, O, wg_wait=wg_wait)
            T.copy(O, Out[bx * block_M, 0])

    return main


def gemm_chain_ref(q, k, v, block_M=64, block_N=64):
    """float64 reference with P rounded to float16 as the kernel does."""
    import torch

    M, N = q.shape[0], k.shape[0]
    out = torch.zeros(M, q.shape[1], dtype=torch.float64, device=q.device)
    n_tiles = -(-N // block_N)
    for b in range(-(-M // block_M)):
        rows = slice(b * block_M, min(M, (b + 1) * block_M))
        n = min(n_tiles, b)
        keys = slice(0, min(N, n * block_N))
        s = q[rows].float() @ k[keys].float().T
        out[rows] = s.half().double() @ v[keys].double()
    return out
