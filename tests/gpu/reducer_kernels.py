"""Reducer programs (T.alloc_reducer) shared by the CPU tests (interpreter, CUDA builds) and
the GPU tests: the reference's legacy form (T.clear / r[i] += x / T.finalize_reducer(r)) and
its v2 form (T.reducer_init / T.reducer_update / T.finalize_reducer(acc, dst))."""

import tilelang.language as T

IDENTITY = {"sum": 0.0, "max": float("-inf"), "min": float("inf")}


def _combine(op, r, x):
    return r + x if op == "sum" else T.max(r, x) if op == "max" else T.min(r, x)


def gemv_legacy(M, N, block_M=64, block_N=64, threads=128, op="sum", dtype="float16",
                pipelined=True):
    """o[i] = op_j a[i, j] * x[j]: the reference's gemv_alloc_reducer, legacy form."""
    acc = "float32"

    @T.prim_func
    def main(a: T.Tensor((M, N), dtype), x: T.Tensor((N,), dtype), o: T.Tensor((M,), acc)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bm:
            r = T.alloc_reducer(block_M, acc, op=op, replication="all")
            if op == "sum":
                T.clear(r)
            else:
                T.fill(r, IDENTITY[op])
            loop = T.Pipelined(T.ceildiv(N, block_N), num_stages=2) if pipelined else \
                T.serial(T.ceildiv(N, block_N))
            for bn in loop:
                a_smem = T.alloc_shared((block_M, block_N), dtype)
                T.copy(a[bm * block_M, bn * block_N], a_smem)
                a_frag = T.alloc_fragment((block_M, block_N), dtype)
                T.copy(a_smem, a_frag)
                x_frag = T.alloc_fragment(block_N, dtype)
                T.copy(x[bn * block_N], x_frag)
                for i, j in T.Parallel(block_M, block_N):
                    v = T.if_then_else(bn * block_N + j < N,
                                       T.cast(a_frag[i, j] * x_frag[j], acc), IDENTITY[op])
                    if op == "sum":
                        r[i] += v
                    else:
                        r[i] = _combine(op, r[i], v)
            T.finalize_reducer(r)
            T.copy(r, o[bm * block_M])

    return main


def rows_v2(M, N, block_M=32, block_N=128, threads=128, op="sum", start=None,
            dtype="float32"):
    """o[i] = start op (op_j A[i, j]): the v2 form, accumulated over serial column tiles,
    finalized into an ordinary fragment."""

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), o: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bm:
            acc = T.alloc_reducer((block_M,), dtype, op=op)
            if start is None:
                T.reducer_init(acc)
            else:
                T.reducer_init(acc, start)
            tile = T.alloc_fragment((block_M, block_N), dtype)
            for bn in T.serial(T.ceildiv(N, block_N)):
                T.copy(A[bm * block_M, bn * block_N], tile)
                for i, k in T.Parallel(block_M, block_N):
                    if bn * block_N + k < N:
                        T.reducer_update(acc[i], tile[i, k])
            res = T.alloc_fragment((block_M,), dtype)
            T.finalize_reducer(acc, res)
            T.copy(res, o[bm * block_M])

    return main


def total_two_sites(n_a, n_b, threads=128, op="sum", dtype="float32"):
    """o[0] = op(A) op op(B) through one element updated from two T.Parallel loops shorter
    than the block (several threads run each iteration: each contribution must count once)."""

    @T.prim_func
    def main(A: T.Tensor((n_a,), dtype), B: T.Tensor((n_b,), dtype), o: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=threads):
            a = T.alloc_fragment((n_a,), dtype)
            b = T.alloc_fragment((n_b,), dtype)
            T.copy(A, a)
            T.copy(B, b)
            acc = T.alloc_reducer((1,), dtype, op=op)
            T.reducer_init(acc)
            for i in T.Parallel(n_a):
                T.reducer_update(acc[0], a[i])
            for j in T.Parallel(n_b):
                T.reducer_update(acc[0], b[j])
            res = T.alloc_fragment((1,), dtype)
            T.finalize_reducer(acc, res)
            if T.get_thread_binding() == 0:
                o[0] = res[0]

    return main


def per_thread_sum(n):
    """o[0] = sum(A) where every thread contributes its own element at block level (no
    T.Parallel): the shared-memory form with atomics."""

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), o: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            r = T.alloc_reducer((1,), "float32", replication="all")
            T.clear(r)
            r[0] += A[tx]
            T.finalize_reducer(r)
            if tx == 0:
                o[0] = r[0]

    return main
