"""Kernels of the `T.atomic_add(..., use_tma=True)` tests (CPU pass tests and GPU tests)."""

import tilelang
import tilelang.language as T


def scaled_add(M, N, bm=64, bn=128, dtype="float32", swizzle=True, use_tma=True, threads=128):
    """Y[tile] += 2 * X[tile] through a shared tile, one tile per block (`swizzle`: True
    annotates the swizzled layout, "row_major" the row-major one, False none)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            S = T.alloc_shared((bm, bn), dtype)
            if swizzle == "row_major":
                T.annotate_layout({S: tilelang.layout.make_linear_layout(S)})
            elif swizzle:
                T.annotate_layout({S: tilelang.layout.make_swizzled_layout(S)})
            F = T.alloc_fragment((bm, bn), dtype)
            T.copy(X[by * bm, bx * bn], F)
            for i, j in T.Parallel(bm, bn):
                F[i, j] = F[i, j] * 2
            T.copy(F, S)
            T.atomic_add(Y[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn], S, use_tma=use_tma)

    return main


def all_into_one(M, N, blocks, dtype="float32", use_tma=True):
    """Every block adds its own slice of X (blocks x M x N) into the same Y (M x N), twice per
    block through a loop, so the reductions race and the tile is rewritten after the add."""

    @T.prim_func
    def main(X: T.Tensor((blocks, M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(blocks, threads=128) as bx:
            S = T.alloc_shared((M, N), dtype)
            for r in T.serial(2):
                for i, j in T.Parallel(M, N):
                    S[i, j] = X[bx, i, j] * (r + 1)
                T.atomic_add(Y[0:M, 0:N], S, use_tma=use_tma)

    return main


def add_then_read(M, N, dtype="float32"):
    """One block adds 2 * X into Y with a TMA reduction, then copies Y to Z: the read must
    see the sums (the issuing thread waits for the writes, then everyone passes a barrier)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype),
             Z: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((M, N), dtype)
            for i, j in T.Parallel(M, N):
                S[i, j] = X[i, j] * 2
            T.atomic_add(Y[0:M, 0:N], S, use_tma=True)
            T.sync_threads()
            for i, j in T.Parallel(M, N):
                Z[i, j] = Y[i, j]

    return main


def add_each_step(M, N, steps, dtype="float32", read_after=False):
    """Y[s] += 2 * X[s] with its rows reversed, for every step s, through the same shared tile
    S. X[s] goes through a second tile W first, so each step starts with a barrier (W is
    rewritten after the previous step read it) that comes before S is rewritten: the wait for
    the TMA unit's read of S can move there (transform/defer_store_waits.py). `read_after`:
    S is also read after the loop (Z = S of the last step), so the wait may not leave the
    loop body."""

    @T.prim_func
    def main(X: T.Tensor((steps, M, N), dtype), Y: T.Tensor((steps, M, N), dtype),
             Z: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((M, N), dtype)
            W = T.alloc_shared((M, N), dtype)
            for s in T.serial(steps):
                T.copy(X[s, 0:M, 0:N], W)
                for i, j in T.Parallel(M, N):
                    S[i, j] = W[M - 1 - i, j] * 2
                T.atomic_add(Y[s, 0:M, 0:N], S, use_tma=True)
            if read_after:
                T.copy(S, Z)

    return main


def cluster_split_k(M, N, K, split, cluster_axis="z", bm=64, bn=64, bk=32, dtype="float16",
                    use_tma=True, threads=128, cluster=True):
    """C = A @ B with K cut into `split` slices, one block each, the slices of a tile forming
    one cluster (along z, or along x with the slices interleaved with the N tiles):
    `T.store_cluster_sum` writes their sum, so C needs no zeroing. `cluster=False`: a plain
    T.Kernel, each block storing its own slice's product (split must be 1)."""
    ks = -(-K // bk) // split
    nx = -(-N // bn)
    grid = (nx, -(-M // bm), split) if cluster_axis == "z" else (nx * split, -(-M // bm), 1)
    dims = (1, 1, split) if cluster_axis == "z" else (split, 1, 1)

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with (T.ClusterKernel(*grid, cluster_dims=dims, threads=threads) if cluster else
              T.Kernel(*grid, threads=threads)) as (gx, by, gz):
            if cluster_axis == "z":
                bx, slice_ = gx, gz
            else:
                bx, slice_ = gx // split, gx % split
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_l = T.alloc_fragment((bm, bn), "float32")
            C_s = T.alloc_shared((bm, bn), dtype)
            T.clear(C_l)
            for ko in T.Pipelined(ks, num_stages=2):
                T.copy(A[by * bm, (slice_ * ks + ko) * bk], A_s)
                T.copy(B[(slice_ * ks + ko) * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C_s)
            T.store_cluster_sum(C[by * bm, bx * bn], C_s, use_tma=use_tma)

    return main


def fragment_split_k(M, N, K, bm=64, bk=64, splits=2, tile_form=False, transposed=False):
    """G[M, N] += A[M, K] @ B[K, N], K split over `splits` blocks per row tile, each adding its
    partial product from the gemm's accumulator fragment into G element-wise (`tile_form`:
    `T.atomic_add(G[region], C)` instead of a T.Parallel nest; `transposed`: G is (N, M) and
    gets the product transposed, which the TMA unit cannot add as one tile)."""
    gshape = (N, M) if transposed else (M, N)

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             G: T.Tensor(gshape, "float32")):
        with T.Kernel(splits, T.ceildiv(M, bm), threads=128) as (bs, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, N), "float16")
            C = T.alloc_fragment((bm, N), "float32")
            T.clear(C)
            per = T.ceildiv(K, bk * splits)
            for k in T.Pipelined(per, num_stages=2):
                T.copy(A[by * bm, (bs * per + k) * bk], A_s)
                T.copy(B[(bs * per + k) * bk, 0], B_s)
                T.gemm(A_s, B_s, C)
            if transposed:
                for i, j in T.Parallel(bm, N):
                    T.atomic_add(G[j, by * bm + i], C[i, j])
            elif tile_form:
                T.atomic_add(G[by * bm:(by + 1) * bm, 0:N], C)
            else:
                for i, j in T.Parallel(bm, N):
                    T.atomic_add(G[by * bm + i, j], C[i, j])

    return main


def fragment_add_in_thread_branch(M=64, N=64):
    """The fragment adds under a branch on the thread index: no barrier may go there."""

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), G: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            F = T.alloc_fragment((M, N), "float32")
            T.copy(X[0, 0], F)
            if tx < 256:
                for i, j in T.Parallel(M, N):
                    T.atomic_add(G[i, j], F[i, j])

    return main
