"""Kernels with user-managed roles and asynchronous copies (T.ws, thread-range branches,
T.tma_copy, T.ptx_cp_async, mbarriers), shared by the CPU tests (interpreter + sm_90a/sm_80
builds) and the GPU tests. Written the way the reference's warp-specialisation examples are."""

import tilelang.language as T


def ws_gemm(M, N, K, bm=128, bn=128, bk=64, producer=0, dtype="float16", stages=0):
    """Warpgroup `producer` loads A and B tiles with T.tma_copy, the other computes the gemm;
    data_ready / compute_done mbarriers hand the tiles over (written single-buffered; with
    `stages` >= 2 the compiler gives tiles and barriers that many copies)."""
    consumer = 1 - producer

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_l = T.alloc_fragment((bm, bn), "float32")
            data_ready = T.alloc_barrier(arrive_count=128)
            compute_done = T.alloc_barrier(arrive_count=128)
            with T.ws(consumer):
                T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                with T.ws(producer):
                    T.barrier_wait(compute_done, (ko + 1) % 2)
                    T.tma_copy(A[by * bm, ko * bk], A_s, barrier=data_ready)
                    T.tma_copy(B[ko * bk, bx * bn], B_s, barrier=data_ready)
                    T.barrier_arrive(data_ready)
                with T.ws(consumer):
                    T.barrier_wait(mbarrier=data_ready, parity=ko % 2)
                    T.gemm(A_s, B_s, C_l)
                    T.barrier_arrive(compute_done)
            with T.ws(consumer):
                T.copy(C_l, C[by * bm, bx * bn])

    return main


def ws_gemm_stages(M, N, K, bm=128, bn=128, bk=64, stages=2, dtype="float16"):
    """A ring of `stages` tiles (3-D shared buffers, slices [s, :, :]), one full and one empty
    barrier per stage, the producer in warpgroup 1 (the reference's barrierpipe example)."""
    counts = [128] * (2 * stages)

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((stages, bm, bk), dtype)
            B_s = T.alloc_shared((stages, bk, bn), dtype)
            C_l = T.alloc_fragment((bm, bn), "float32")
            bars = T.alloc_barrier(counts)
            with T.ws(0):
                T.clear(C_l)
            for ko in range(T.ceildiv(K, bk)):
                s = ko % stages
                with T.ws(1):
                    T.mbarrier_wait_parity(mbarrier=bars[s + stages],
                                           parity=((ko // stages) % 2) ^ 1)
                    T.tma_copy(A[by * bm:(by + 1) * bm, ko * bk:(ko + 1) * bk], A_s[s, :, :],
                               barrier=bars[s])
                    T.tma_copy(B[ko * bk:(ko + 1) * bk, bx * bn:(bx + 1) * bn], B_s[s, :, :],
                               barrier=bars[s])
                    T.mbarrier_arrive(mbarrier=bars[s])
                with T.ws(0):
                    T.mbarrier_wait_parity(mbarrier=bars[s], parity=(ko // stages) % 2)
                    T.gemm(A_s[s, :, :], B_s[s, :, :], C_l)
                    T.mbarrier_arrive(mbarrier=bars[s + stages])
            with T.ws(0):
                T.copy(C_l, C[by * bm, bx * bn])

    return main


def branch_roles(M, D, bm=64):
    """`if tid >= 128:` producer (T.tma_copy into a double buffer) / `else:` consumer
    (T.Parallel on the tile, a row reduction): out[i] = 2 * sum_j X[i, j] + 1 over the
    block's rows, tiles of bm rows (the reference's minference idiom)."""

    @T.prim_func
    def main(X: T.Tensor((M, D), "float32"), out: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=256):
            S = T.alloc_shared((2, bm, D), "float32")
            frag = T.alloc_fragment((bm, D), "float32")
            row = T.alloc_fragment((bm,), "float32")
            full = T.alloc_barrier([128, 128])
            empty = T.alloc_barrier([128, 128])
            tid = T.get_thread_binding()
            n = T.ceildiv(M, bm)
            if tid >= 128:
                for t in T.serial(n):
                    T.mbarrier_wait_parity(empty[t % 2], ((t // 2) & 1) ^ 1)
                    T.tma_copy(X[t * bm:(t + 1) * bm, :], S[t % 2, :, :], barrier=full[t % 2])
                    T.mbarrier_arrive(full[t % 2])
            else:
                for t in T.serial(n):
                    T.mbarrier_wait_parity(full[t % 2], (t // 2) & 1)
                    T.copy(S[t % 2, :, :], frag)
                    T.mbarrier_arrive(empty[t % 2])
                    T.reduce_sum(frag, row, dim=1)
                    for i in T.Parallel(bm):
                        row[i] = row[i] * 2.0 + 1.0
                    T.copy(row, out[t * bm:(t + 1) * bm])

    return main


def per_warp_rows(M, K, warps=8):
    """Each warp loads its own row with T.tma_copy(..., leader_scope_threads=32) onto its own
    barrier: out[r] = A[r, 0] + A[r, K - 1]."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), out: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, warps), threads=warps * 32) as pid:
            tid = T.get_thread_binding()
            w = tid // 32
            r = pid * warps + w
            S = T.alloc_shared((warps, K), "float32")
            bars = T.alloc_barrier([32] * warps)
            T.tma_copy(A[r, 0:K], S[w, 0:K], barrier=bars[w], leader_scope_threads=32)
            T.mbarrier_arrive(mbarrier=bars[w])
            T.mbarrier_wait_parity(mbarrier=bars[w], parity=0)
            if tid % 32 == 0 and r < M:
                out[r] = S[w, 0] + S[w, K - 1]

    return main


def tma_store(M, N, bm=64, bn=64):
    """Y = 3 * X through a shared tile written by the threads and stored with T.tma_copy."""

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            S = T.alloc_shared((bm, bn), "float32")
            for i, j in T.Parallel(bm, bn):
                S[i, j] = X[by * bm + i, bx * bn + j] * 3.0
            T.tma_copy(S, Y[by * bm, bx * bn])
            T.tma_store_wait()

    return main


def cp_async_rows(M, D=64, rows=16):
    """Each thread copies 8 halves of a row with T.ptx_cp_async (the last row of every tile
    predicated off, so it reads 0), commit + wait + barrier, then B = 2 * tile."""

    @T.prim_func
    def main(A: T.Tensor((M, D), "float16"), B: T.Tensor((M, D), "float16")):
        with T.Kernel(T.ceildiv(M, rows), threads=rows * D // 8) as bx:
            S = T.alloc_shared((rows, D), "float16")
            tx = T.get_thread_binding()
            r = tx // (D // 8)
            c = tx % (D // 8) * 8
            T.ptx_cp_async(T.access_ptr(S[r, c], "w", 8), T.access_ptr(A[bx * rows + r, c], "r"),
                           8, predicate=r < rows - 1)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            T.sync_threads()
            for i, j in T.Parallel(rows, D):
                B[bx * rows + i, j] = S[i, j] * 2

    return main


def cp_async_gather(rows_kv, D=576, BI=64, stages=2, iters=2):
    """The sparse MLA producer's gather in one warpgroup: Out[k, :] = KV[Idx[k], :], the rows
    picked by Idx copied 16 bytes a thread and copy with T.ptx_cp_async into a `stages`-deep
    shared tile (a serial row loop and a serial column loop under an unrolled stage loop),
    then written out after commit + wait + barrier."""
    n = iters * stages * BI

    @T.prim_func
    def main(KV: T.Tensor((rows_kv, D), "bfloat16"), Idx: T.Tensor((n,), "int32"),
             Out: T.Tensor((n, D), "bfloat16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((stages, BI, D), "bfloat16")
            row = T.alloc_var("int32")
            tx = T.get_thread_binding()
            for i in T.serial(iters):
                for s in T.unroll(stages):
                    for r in T.serial(BI // 16):
                        row = Idx[(i * stages + s) * BI + r * 16 + tx // 8]
                        for u in T.serial(D // 64):
                            T.ptx_cp_async(
                                T.access_ptr(S[s, r * 16 + tx // 8, 64 * u + tx % 8 * 8], "w", 8),
                                T.access_ptr(KV[row, 64 * u + tx % 8 * 8], "r", 8), 8)
                T.ptx_commit_group()
                T.ptx_wait_group(0)
                T.sync_threads()
                for s, j, d in T.Parallel(stages, BI, D):
                    Out[(i * stages + s) * BI + j, d] = S[s, j, d]
                T.sync_threads()

    return main


def cp_async_mbarrier(N, chunks=4):
    """A producer warpgroup streams chunks with T.ptx_cp_async, and T.cp_async_barrier_noinc
    makes the copies' completion the arrival on the stage's full barrier (the reference's
    MLA decode idiom); the consumer warpgroup writes B = A + 1."""
    per_block = chunks * 128

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, per_block), threads=256) as bx:
            full = T.alloc_barrier([128, 128])
            empty = T.alloc_barrier([128, 128])
            S = T.alloc_shared((2, 128), "float32")
            tx = T.get_thread_binding()
            with T.ws(1):
                for k in T.serial(chunks):
                    T.barrier_wait(empty[k % 2], ((k // 2) + 1) % 2)
                    T.ptx_cp_async(T.access_ptr(S[k % 2, tx - 128], "w"),
                                   T.access_ptr(A[bx * per_block + k * 128 + tx - 128], "r"), 1,
                                   predicate=bx * per_block + k * 128 + tx - 128 < N)
                    T.cp_async_barrier_noinc(full[k % 2])
            with T.ws(0):
                for k in T.serial(chunks):
                    T.barrier_wait(full[k % 2], (k // 2) % 2)
                    i = bx * per_block + k * 128 + tx
                    if i < N:
                        B[i] = S[k % 2, tx] + 1.0
                    T.barrier_arrive(empty[k % 2])

    return main


def thread_allreduce(rows, R, dtype="float32", op="sum", K=256, skip_odd=False, over_x=False):
    """out[r] = the reduction (sum, max or prod) of A[r, :] by a block of (rows, R) threads:
    each thread folds K/R elements, then T.tvm_thread_allreduce over threadIdx.y (the
    reference's gemv idiom). With `skip_odd`, odd threads contribute the identity. With
    `over_x`, the block is (R, rows) and the reduction runs over threadIdx.x (consecutive
    lanes: warp shuffles)."""
    combine = {"sum": (lambda x, y: x + y, 0), "max": (lambda x, y: T.max(x, y), -1e30),
               "prod": (lambda x, y: x * y, 1)}[op]
    fn, ident = combine

    @T.prim_func
    def main(A: T.Tensor((rows, K), dtype), out: T.Tensor((rows,), dtype)):
        with T.Kernel(1, threads=(R, rows) if over_x else (rows, R)):
            tn = T.get_thread_binding(1 if over_x else 0)
            tk = T.get_thread_binding(0 if over_x else 1)
            acc = T.alloc_local((1,), dtype)
            acc[0] = T.cast(ident, dtype)
            for k in T.serial(K // R):
                acc[0] = fn(acc[0], A[tn, k * R + tk])
            red = T.alloc_local((1,), dtype)
            with T.attr(T.comm_reducer(fn, [T.cast(ident, dtype)]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0],
                                                  tk % 2 == 0 if skip_odd else True, red[0],
                                                  tk, dtype="handle"))
            out[tn] = red[0]

    return main


def reducer_gemv(M, N, block_M=64, block_N=64, threads=128, op="sum"):
    """o[i] = sum_j a[i, j] * x[j] (op="sum") or max_j a[i, j] * x[j] (op="max") through
    T.alloc_reducer updated from a T.Parallel over (block_M, block_N) (the reference's gemv)."""

    @T.prim_func
    def main(a: T.Tensor((M, N), "float16"), x: T.Tensor((N,), "float16"),
             o: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as i0:
            r = T.alloc_reducer(block_M, "float32", op=op, replication="all")
            if op == "sum":
                T.clear(r)
            else:
                T.reducer_init(r)
            for j0 in T.Pipelined(T.ceildiv(N, block_N), num_stages=2):
                a_frag = T.alloc_fragment((block_M, block_N), "float16")
                T.copy(a[i0 * block_M, j0 * block_N], a_frag)
                x_frag = T.alloc_fragment(block_N, "float16")
                T.copy(x[j0 * block_N], x_frag)
                for i, j in T.Parallel(block_M, block_N):
                    if op == "sum":
                        r[i] += a_frag[i, j] * x_frag[j]
                    else:
                        T.reducer_update(r[i], T.if_then_else(
                            j0 * block_N + j < N, a_frag[i, j] * x_frag[j], -T.infinity("float16")))
            res = T.alloc_fragment(block_M, "float32")
            T.finalize_reducer(r, res)
            T.copy(res, o[i0 * block_M])

    return main


def votes(n=128):
    """Per thread: any/all/ballot over its warp, a block count, the active mask in a branch."""

    @T.prim_func
    def main(A: T.Tensor((n,), "int32"), O: T.Tensor((n, 5), "int64")):
        with T.Kernel(1, threads=n):
            tx = T.get_thread_binding()
            v = A[tx]
            O[tx, 0] = T.cast(T.any_sync(v > 5), "int64")
            O[tx, 1] = T.cast(T.all_sync(v > -8), "int64")
            O[tx, 2] = T.cast(T.ballot_sync(v > 0), "int64")
            O[tx, 3] = T.cast(T.syncthreads_count(v > 0), "int64")
            O[tx, 4] = T.cast(T.syncthreads_or(v == 7) + 2 * T.syncthreads_and(v > -10),
                              "int64")

    return main


def dp4a_rows(rows=64, K=16):
    """C[r] = sum_k A[r, k] * B[r, k] in groups of four with T.dp4a (int8 -> int32)."""

    @T.prim_func
    def main(A: T.Tensor((rows, K), "int8"), B: T.Tensor((rows, K), "int8"),
             C: T.Tensor((rows,), "int32")):
        with T.Kernel(1, threads=rows):
            tx = T.get_thread_binding()
            acc = T.alloc_local((1,), "int32")
            acc[0] = 0
            for k in T.serial(K // 4):
                T.dp4a(A[tx, k * 4], B[tx, k * 4], acc[0])
            C[tx] = acc[0]

    return main


def grid_normalise(N, blocks=8, threads=128):
    """B = A / sum(A): each block sums its part into P[block], T.sync_grid, then every block
    reads all partial sums (a cooperative launch)."""

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), P: T.Tensor((blocks,), "float32"),
             B: T.Tensor((N,), "float32")):
        with T.Kernel(blocks, threads=threads) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((threads,), "float32")
            acc = T.alloc_local((1,), "float32")
            acc[0] = 0.0
            for k in T.serial(T.ceildiv(N, blocks * threads)):
                i = (k * blocks + bx) * threads + tx
                if i < N:
                    acc[0] += A[i]
            S[tx] = acc[0]
            T.sync_threads()
            if tx == 0:
                s = T.alloc_local((1,), "float32")
                s[0] = 0.0
                for j in T.serial(threads):
                    s[0] += S[j]
                P[bx] = s[0]
            T.sync_grid()
            total = T.alloc_local((1,), "float32")
            total[0] = 0.0
            for j in T.serial(blocks):
                total[0] += P[j]
            for k in T.serial(T.ceildiv(N, blocks * threads)):
                i = (k * blocks + bx) * threads + tx
                if i < N:
                    B[i] = A[i] / total[0]

    return main


def block_tma_gemm(M, N, K, bm=128, bn=128, bk=32, stages=2):
    """T.tma_copy at block level inside T.Pipelined, one barrier per operand waited with
    parity k % 2 (the reference's tma_copy unit test): the loop runs as written."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            mbar_a = T.alloc_barrier(128)
            mbar_b = T.alloc_barrier(128)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.tma_copy(A[by * bm, k * bk], A_s, barrier=mbar_a)
                T.barrier_arrive(mbar_a)
                T.tma_copy(B[k * bk, bx * bn], B_s, barrier=mbar_b)
                T.barrier_arrive(mbar_b)
                T.barrier_wait(mbar_a, k % 2)
                T.barrier_wait(mbar_b, k % 2)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


def two_sized_roles(M, H, hidden_block=128, hc=4, y_dtype="float32"):
    """Tile operations in roles of different sizes (the reference's mHC pre block): block-wide
    row sums of X into a fragment and through shared memory; then 32 threads run a row
    softmax of a hc x hc tile (fragments, reductions), while the other 64 threads stream rows
    of Y through shared memory and mix them with the block-wide weights.

    out0[b, i, j] = softmax_j(w[b, i * hc + j]),  w[b, k] = 2 * sum(X[b, k, :])
    out1[b, h] = sum_i w[b, i] * Y[b, i, h]

    `y_dtype` other than float32: Y is converted as it is copied into the float32 tile."""

    @T.prim_func
    def main(X: T.Tensor((M, hc * hc, 8), "float32"), Y: T.Tensor((M, hc, H), y_dtype),
             out0: T.Tensor((M, hc, hc), "float32"), out1: T.Tensor((M, H), "float32")):
        with T.Kernel(M, threads=96) as b:
            w = T.alloc_fragment((hc * hc,), "float32")
            w_s = T.alloc_shared((hc * hc,), "float32")
            T.clear(w)
            for k in T.Parallel(hc * hc):
                for e in T.serial(8):
                    w[k] += X[b, k, e]
                w[k] *= 2.0
            T.copy(w, w_s)
            if T.get_thread_binding() < 32:
                m = T.alloc_fragment((hc, hc), "float32")
                mx = T.alloc_fragment((hc,), "float32")
                sm = T.alloc_fragment((hc,), "float32")
                for i, j in T.Parallel(hc, hc):
                    m[i, j] = w_s[i * hc + j]
                T.reduce_max(m, mx, dim=1)
                for i, j in T.Parallel(hc, hc):
                    m[i, j] = T.exp(m[i, j] - mx[i])
                T.reduce_sum(m, sm, dim=1)
                for i, j in T.Parallel(hc, hc):
                    out0[b, i, j] = m[i, j] / sm[i]
            else:
                for h0 in T.Pipelined(T.ceildiv(H, hidden_block), num_stages=2):
                    ys = T.alloc_shared((hc, hidden_block), "float32")
                    yl = T.alloc_fragment((hc, hidden_block), "float32")
                    T.copy(Y[b, 0, h0 * hidden_block], ys)
                    T.copy(ys, yl)
                    acc = T.alloc_fragment((hidden_block,), "float32")
                    T.clear(acc)
                    for i in T.serial(hc):
                        for h in T.Parallel(hidden_block):
                            acc[h] += w_s[i] * yl[i, h]
                    T.copy(acc, out1[b, h0 * hidden_block])

    return main


def gemm_and_reduce_roles(M, N, K, bm=64, bn=64, bk=32, dtype="float16", reduce_threads=128):
    """Two roles with tile operations of their own: threads [0, reduce_threads) reduce a tile
    of R over its rows (warps split the reduced dim: partials through shared memory) and scale
    it element-wise; the 128 threads after them compute a gemm tile (a whole warpgroup at
    128: wgmma on sm_90a; at 64, four warps from thread 64: mma.sync). Both write global
    memory only.

    C = A @ B (tiles bm x bn); colmax[by, j] = max_i R[i, j] over the tile's rows (rows past M
    read as 0) and S = R * 3 - colmax for each bm x bn tile of R (M x N)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), R: T.Tensor((M, N), "float32"),
             C: T.Tensor((M, N), "float32"), S: T.Tensor((M, N), "float32"),
             colmax: T.Tensor((T.ceildiv(M, bm), N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=reduce_threads + 128) as (bx, by):
            tx = T.get_thread_binding()
            if tx < reduce_threads:
                r = T.alloc_fragment((bm, bn), "float32")
                cm = T.alloc_fragment((bn,), "float32")
                T.copy(R[by * bm, bx * bn], r)
                T.reduce_max(r, cm, dim=0)
                for i, j in T.Parallel(bm, bn):
                    r[i, j] = r[i, j] * 3.0 - cm[j]
                T.copy(r, S[by * bm, bx * bn])
                T.copy(cm, colmax[by, bx * bn])
            else:
                A_s = T.alloc_shared((bm, bk), dtype)
                B_s = T.alloc_shared((bk, bn), dtype)
                acc = T.alloc_fragment((bm, bn), "float32")
                T.clear(acc)
                for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                    T.copy(A[by * bm, ko * bk], A_s)
                    T.copy(B[ko * bk, bx * bn], B_s)
                    T.gemm(A_s, B_s, acc)
                T.copy(acc, C[by * bm, bx * bn])

    return main


def ws_tile_roles(N, bn=64):
    """T.ws(0) and T.ws(1) run tile operations of their own, each on its warpgroup: warpgroup 0
    fills a fragment, adds a tile of A (T.Parallel) and stores it; warpgroup 1 copies a tile of
    B through shared memory into a fragment, scales it and stores it.
    OA = A + 2, OB = 3 * B."""

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"),
             OA: T.Tensor((N,), "float32"), OB: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, bn), threads=256) as bx:
            with T.ws(0):
                F = T.alloc_fragment((bn,), "float32")
                a = T.alloc_fragment((bn,), "float32")
                T.fill(F, 2.0)
                T.copy(A[bx * bn], a)
                for i in T.Parallel(bn):
                    F[i] += a[i]
                T.copy(F, OA[bx * bn])
            with T.ws(1):
                S = T.alloc_shared((bn,), "float32")
                G = T.alloc_fragment((bn,), "float32")
                T.copy(B[bx * bn], S)
                T.copy(S, G)
                for i in T.Parallel(bn):
                    G[i] *= 3.0
                T.copy(G, OB[bx * bn])

    return main


def split_consumer_gemm(M, N, K, bm=64, bn=128, bk=64, dtype="float16"):
    """Two consumer warpgroups each compute half of a C tile (columns [0, bn/2) and
    [bn/2, bn)) from one ring of two stages that warpgroup 2 fills with T.tma_copy; a full
    barrier per stage (the producer's arrival + the bytes) and an empty one (both consumers,
    256 arrivals), as the reference's sparse MLA forward hands tiles to two consumers."""
    half = bn // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=384) as (bx, by):
            A_s = T.alloc_shared((2, bm, bk), dtype)
            B_s = T.alloc_shared((2, bk, bn), dtype)
            full = T.alloc_barrier([128, 128])
            empty = T.alloc_barrier([256, 256])
            tx = T.get_thread_binding()
            nk = T.ceildiv(K, bk)
            if tx < 128:
                left = T.alloc_fragment((bm, half), "float32")
                T.clear(left)
                for ko in T.serial(nk):
                    T.mbarrier_wait_parity(full[ko % 2], (ko // 2) & 1)
                    T.gemm(A_s[ko % 2, :, :], B_s[ko % 2, :, 0:half], left)
                    T.mbarrier_arrive(empty[ko % 2])
                T.copy(left, C[by * bm, bx * bn])
            elif tx < 256:
                right = T.alloc_fragment((bm, half), "float32")
                T.clear(right)
                for ko in T.serial(nk):
                    T.mbarrier_wait_parity(full[ko % 2], (ko // 2) & 1)
                    T.gemm(A_s[ko % 2, :, :], B_s[ko % 2, :, half:bn], right)
                    T.mbarrier_arrive(empty[ko % 2])
                T.copy(right, C[by * bm, bx * bn + half])
            else:
                for ko in T.serial(nk):
                    T.mbarrier_wait_parity(empty[ko % 2], ((ko // 2) & 1) ^ 1)
                    T.tma_copy(A[by * bm:(by + 1) * bm, ko * bk:(ko + 1) * bk], A_s[ko % 2, :, :],
                               barrier=full[ko % 2])
                    T.tma_copy(B[ko * bk:(ko + 1) * bk, bx * bn:(bx + 1) * bn], B_s[ko % 2, :, :],
                               barrier=full[ko % 2])
                    T.mbarrier_arrive(full[ko % 2])

    return main


def sliced_tma_gemm(M, N, K, bm=64, k_tile=64, dtype="float16"):
    """C = A @ B^T for one K-wide tile, loaded in `k_tile`-column slices by T.tma_copy in a
    T.unroll loop (one mbarrier per slice) and multiplied slice by slice as soon as each
    arrives (the prologue of the reference's warp_specialize_flashmla example): copies and
    wgmma operands at column offsets computed at run time."""
    slices = K // k_tile

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            A_s = T.alloc_shared((bm, K), dtype)
            B_s = T.alloc_shared((N, K), dtype)
            C_l = T.alloc_fragment((bm, N), "float32")
            ready = T.alloc_barrier(arrive_count=[128] * slices)
            for j in T.unroll(slices):
                T.tma_copy(A[bx * bm:(bx + 1) * bm, j * k_tile:(j + 1) * k_tile],
                           A_s[:, j * k_tile:(j + 1) * k_tile], barrier=ready[j])
                T.tma_copy(B[0:N, j * k_tile:(j + 1) * k_tile],
                           B_s[:, j * k_tile:(j + 1) * k_tile], barrier=ready[j])
                T.barrier_arrive(ready[j])
            for j in T.unroll(slices):
                T.barrier_wait(ready[j], 0)
                T.wgmma_gemm(A_s[:, j * k_tile:(j + 1) * k_tile],
                             B_s[:, j * k_tile:(j + 1) * k_tile], C_l, transpose_B=True,
                             clear_accum=(j == 0))
            T.wait_wgmma(0)
            T.copy(C_l, C[bx * bm, 0])

    return main


def handover_through_shared(M, opaque_call=False):
    """Two warpgroups synchronised by the program's mbarriers: the first hands the second a
    row of scales (memory only generic accesses touch) and the gemm operand B it copied in
    (memory the wgmma reads through the async proxy); the second exchanges a row through
    shared memory among its own threads after the gemm. C = (A @ B^T) * (2 + 1) per row,
    A: M x 64 (M ragged), B: 64 x 64. `opaque_call` hands B's tile to a device function of
    the user's (lowering only)."""
    @T.prim_func
    def f(A: T.Tensor((M, 64), "float16"), B: T.Tensor((64, 64), "float16"),
          C: T.Tensor((M, 64), "float32")):
        with T.Kernel(T.ceildiv(M, 64), threads=256) as bx:
            As = T.alloc_shared((64, 64), "float16")
            Ps = T.alloc_shared((64, 64), "float16")
            scale = T.alloc_shared((64,), "float32")
            row = T.alloc_shared((64,), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            bar_scale = T.alloc_barrier(128)
            bar_p = T.alloc_barrier(128)
            tx = T.get_thread_binding()
            if tx < 128:
                for i in T.Parallel(64):
                    scale[i] = 2.0
                T.barrier_arrive(bar_scale)
                T.copy(B, Ps)
                if opaque_call:
                    T.call_extern("user_fn", T.access_ptr(Ps, "r"), dtype="void")
                T.barrier_arrive(bar_p)
            else:
                T.copy(A[bx * 64, 0], As)
                T.barrier_wait(bar_scale, 0)
                T.barrier_wait(bar_p, 0)
                T.gemm(As, Ps, acc, transpose_B=True, clear_accum=True)
                for i in T.Parallel(64):
                    row[i] = scale[i] + 1.0
                for i, j in T.Parallel(64, 64):
                    C[bx * 64 + i, j] = acc[i, j] * row[63 - i]
    return f


def cp_async_gather_gemm(M, N=64, K=64, bm=64):
    """The sparse-attention idiom: a producer warpgroup gathers the rows of B that `Idx`
    names (out-of-range ones skipped: zero) with T.ptx_cp_async into a two-stage ring whose
    full barriers the copies' completion arrives on (T.cp_async_barrier_noinc); the consumer
    warpgroup multiplies each stage with wgmma (T.gemm) and hands it back.
    C[m, n] = sum over stages s of A[m, :] . B[Idx[s, n], :] (rows past `rows` count 0)."""
    stages, rows = 2, 2 * N

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((rows, K), "float16"),
             Idx: T.Tensor((4, N), "int32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=256) as bx:
            As = T.alloc_shared((bm, K), "float16")
            Bs = T.alloc_shared((stages, N, K), "float16")
            acc = T.alloc_fragment((bm, N), "float32")
            full = T.alloc_barrier([128] * stages)
            empty = T.alloc_barrier([128] * stages)
            tx = T.get_thread_binding()
            if tx >= 128:
                for s in T.serial(4):
                    T.barrier_wait(empty[s % 2], ((s // 2) + 1) % 2)
                    for r in T.serial(N * K // 8 // 128):
                        e = (r * 128 + tx - 128) * 8
                        n, k = e // K, e % K
                        row = Idx[s, n]
                        if row < rows:
                            T.ptx_cp_async(T.access_ptr(Bs[s % 2, n, k], "w", 8),
                                           T.access_ptr(B[row, k], "r", 8), 8)
                        else:
                            for v in T.serial(8):
                                Bs[s % 2, n, k + v] = T.cast(0, "float16")
                    T.cp_async_barrier_noinc(full[s % 2])
            else:
                T.copy(A[bx * bm, 0], As)
                T.clear(acc)
                for s in T.serial(4):
                    T.barrier_wait(full[s % 2], (s // 2) % 2)
                    T.gemm(As, Bs[s % 2, :, :], acc, transpose_B=True)
                    T.barrier_arrive(empty[s % 2])
                T.copy(acc, C[bx * bm, 0])

    return main


def staged_halves(M, N=128, bm=64):
    """Two roles of 128 threads each produce one half of the columns of a row tile and store
    it through a shared staging tile (the sparse MLA forward's epilogue: T.copy(acc, O_s[:,
    half]); T.copy(O_s[:, half], Out[...])). Out = X * 2 on the left half, X + 1 on the
    right."""
    h = N // 2

    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Out: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, bm), threads=256) as bx:
            O_s = T.alloc_shared((bm, N), "float16")
            left = T.alloc_fragment((bm, h), "float32")
            right = T.alloc_fragment((bm, h), "float32")
            tx = T.get_thread_binding()
            if tx < 128:
                T.copy(X[bx * bm, 0], left)
                for i, j in T.Parallel(bm, h):
                    left[i, j] = left[i, j] * 2
                T.copy(left, O_s[:, 0:h])
                T.copy(O_s[:, 0:h], Out[bx * bm, 0])
            else:
                T.copy(X[bx * bm, h], right)
                for i, j in T.Parallel(bm, h):
                    right[i, j] = right[i, j] + 1
                T.copy(right, O_s[:, h:N])
                T.copy(O_s[:, h:N], Out[bx * bm, h])

    return main
