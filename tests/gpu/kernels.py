import tilelang
import tilelang.language as T

def vector_add(N, block=256, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]
    return main

def softmax(M, N, rows=4, dtype="float16"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, rows), threads=128) as bx:
            x = T.alloc_fragment((rows, N), "float")
            m = T.alloc_fragment((rows,), "float")
            s = T.alloc_fragment((rows,), "float")
            T.copy(X[bx * rows, 0], x)
            T.reduce_max(x, m, dim=1)
            for i, j in T.Parallel(rows, N):
                x[i, j] = T.exp(x[i, j] - m[i])
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(rows, N):
                x[i, j] = x[i, j] / s[i]
            T.copy(x, Y[bx * rows, 0])
    return main

def flash_fwd(batch, heads, seq_len, dim, is_causal=False, block_M=64, block_N=64, num_stages=1, threads=128):
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    shape = [batch, seq_len, heads, dim]
    dtype = "float16"
    accum_dtype = "float"
    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype), Output: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            O_shared = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
            scores_max = T.alloc_fragment([block_M], accum_dtype)
            scores_max_prev = T.alloc_fragment([block_M], accum_dtype)
            scores_scale = T.alloc_fragment([block_M], accum_dtype)
            scores_sum = T.alloc_fragment([block_M], accum_dtype)
            logsum = T.alloc_fragment([block_M], accum_dtype)
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))
            loop_range = (T.ceildiv((bx + 1) * block_M, block_N) if is_causal else T.ceildiv(seq_len, block_N))
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_shared)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(acc_s.dtype))
                else:
                    T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum_dtype))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return main

def gemv(N, K, BLOCK_N=64, reduce_threads=16, dtype="float16", accum_dtype="float"):
    MAX_TRANSACTION_SIZE_IN_BITS = 128
    TILE_K = MAX_TRANSACTION_SIZE_IN_BITS // 16
    BLOCK_K = reduce_threads * TILE_K
    @T.prim_func
    def main(A: T.Tensor((K,), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, reduce_threads)) as bn:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            A_local = T.alloc_local((TILE_K,), dtype)
            B_local = T.alloc_local((TILE_K,), dtype)
            C_accum = T.alloc_local((1,), accum_dtype)
            T.clear(C_accum)
            for bk in T.serial(T.ceildiv(K, BLOCK_K)):
                for k in T.vectorized(TILE_K):
                    A_local[k] = A[bk * BLOCK_K + tk * TILE_K + k]
                    B_local[k] = B[bn * BLOCK_N + tn, bk * BLOCK_K + tk * TILE_K + k]
                for k in T.serial(TILE_K):
                    C_accum[0] += A_local[k].astype(accum_dtype) * B_local[k].astype(accum_dtype)
            C_reduced = T.alloc_local((1,), accum_dtype)
            C_reduced[0] = C_accum[0]
            for off in [8, 4, 2, 1]:
                C_reduced[0] = C_reduced[0] + T.shfl_xor(C_reduced[0], off)
            if tk == 0:
                C[bn * BLOCK_N + tn] = C_reduced[0]
    return main

def cumsum_k(M, N, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, 32), threads=128) as bx:
            S = T.alloc_shared((32, N), dtype)
            T.copy(A[bx * 32, 0], S)
            T.cumsum(S, dim=1)
            T.copy(S, B[bx * 32, 0])
    return main

def atomic_k(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(M, 64), threads=128) as bx:
            for i, j in T.Parallel(64, N):
                T.atomic_add(B[j], A[bx * 64 + i, j])
    return main


def gemm(M, N, K, block_M, block_N, block_K, trans_A=False, trans_B=False, dtype="float16",
         accum_dtype="float32", out_dtype=None, num_stages=2, threads=128, b_dtype=None,
         a_in_registers=False, cluster_dims=None):
    """C = op(A) @ op(B). `b_dtype` defaults to A's dtype (fp8 gemms may mix e4m3 and e5m2);
    `a_in_registers` copies the A tile into a fragment first (the register-A gemm form);
    `cluster_dims` launches it in thread block clusters (T.ClusterKernel)."""
    out_dtype = out_dtype or accum_dtype
    b_dtype = b_dtype or dtype
    A_shape = (K, M) if trans_A else (M, K)
    B_shape = (N, K) if trans_B else (K, N)
    A_sh = (block_K, block_M) if trans_A else (block_M, block_K)
    B_sh = (block_N, block_K) if trans_B else (block_K, block_N)

    @T.prim_func
    def main(A: T.Tensor(A_shape, dtype), B: T.Tensor(B_shape, b_dtype),
             C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads,
                      cluster_dims=cluster_dims) as (bx, by):
            A_shared = T.alloc_shared(A_sh, dtype)
            B_shared = T.alloc_shared(B_sh, b_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            if a_in_registers:
                A_local = T.alloc_fragment((block_M, block_K), dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                if trans_A:
                    T.copy(A[k * block_K, by * block_M], A_shared)
                else:
                    T.copy(A[by * block_M, k * block_K], A_shared)
                if trans_B:
                    T.copy(B[bx * block_N, k * block_K], B_shared)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_shared)
                if a_in_registers:
                    T.copy(A_shared, A_local)
                    T.gemm(A_local, B_shared, C_local, transpose_B=trans_B)
                else:
                    T.gemm(A_shared, B_shared, C_local, transpose_A=trans_A,
                           transpose_B=trans_B)
            T.copy(C_local, C[by * block_M, bx * block_N])
    return main


def reduce_k(M, N, kind, dim, clear=True, dtype="float32", block_M=64, block_N=128, threads=128):
    out_shape = (M,) if dim == 1 else (N,)
    red_shape = (block_M,) if dim == 1 else (block_N,)

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor(out_shape, dtype)):
        with T.Kernel(1, threads=threads) as bx:
            x = T.alloc_fragment((block_M, block_N), dtype)
            r = T.alloc_fragment(red_shape, dtype)
            T.copy(A[0, 0], x)
            if dim == 1:
                T.copy(B[0], r)
            else:
                T.copy(B[0], r)
            getattr(T, "reduce_" + kind)(x, r, dim=dim, **({} if kind == "abssum" else {"clear": clear}))
            T.copy(r, B[0])
    return main


def dynamic_scale(dtype="float32"):
    m = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((m, 64), dtype), B: T.Tensor((m, 64), dtype), alpha: T.float32):
        with T.Kernel(T.ceildiv(m, 32), threads=128) as bx:
            tile = T.alloc_fragment((32, 64), dtype)
            T.copy(A[bx * 32, 0], tile)
            for i, j in T.Parallel(32, 64):
                tile[i, j] = tile[i, j] * alpha + 1.0
            T.copy(tile, B[bx * 32, 0])
    return main


def two_kernels(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        W = T.alloc_global((N,), "float32")
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                W[bx * 128 + i] = A[bx * 128 + i] * 2.0
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = W[bx * 128 + i] + 1.0
    return main

def ws_stream(N, chunks=8, dtype="float32"):
    """Explicit warp specialisation: warpgroup 0 stages chunks of A into a double-buffered
    shared tile, warpgroup 1 consumes them; full/empty mbarriers hand the buffers over."""
    per_block = chunks * 128

    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, per_block), threads=256) as bx:
            full = T.alloc_barrier([128, 128])
            empty = T.alloc_barrier([128, 128])
            S = T.alloc_shared((2, 128), dtype)
            tx = T.get_thread_binding()
            with T.ws(0):
                for k in T.serial(chunks):
                    T.barrier_wait(empty[k % 2], ((k // 2) + 1) % 2)
                    S[k % 2, tx] = A[bx * per_block + k * 128 + tx]
                    T.barrier_arrive(full[k % 2])
            with T.ws(1):
                for k in T.serial(chunks):
                    T.barrier_wait(full[k % 2], (k // 2) % 2)
                    i = bx * per_block + k * 128 + tx - 128
                    if i < N:
                        B[i] = S[k % 2, tx - 128] * 2.0 + 1.0
                    T.barrier_arrive(empty[k % 2])
    return main
