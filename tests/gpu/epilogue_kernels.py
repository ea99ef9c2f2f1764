"""GEMM kernels whose epilogue the compiler stages through shared memory (used by the pass
tests, the GPU tests and benchmarks/sweeps/epilogue.py)."""

import functools
import importlib.util
from pathlib import Path

import tilelang.language as T


def gemm(M, N, K, bm=128, bn=128, bk=32, stages=3, threads=128, out="float16"):
    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
          C: T.Tensor((M, N), out)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            As = T.alloc_shared((bm, bk), "float16")
            Bs = T.alloc_shared((bk, bn), "float16")
            Cl = T.alloc_fragment((bm, bn), "float32")
            T.clear(Cl)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], As)
                T.copy(B[ko * bk, bx * bn], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, C[by * bm, bx * bn])
    return f


def persistent(M, N, K, bm=128, bn=128, bk=32, stages=3, threads=128, blocks=4,
               ragged_k=False, out="float16"):
    """The tile loop of a persistent GEMM around the pipelined loop and the epilogue.
    `ragged_k`: tile t sums only its first (t + t // 4) % 4 K tiles (0 to 3 iterations of the
    pipelined loop, so the ring positions of consecutive tiles are not aligned)."""
    tm, tn = (M + bm - 1) // bm, (N + bn - 1) // bn
    waves = (tm * tn + blocks - 1) // blocks

    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
          C: T.Tensor((M, N), out)):
        with T.Kernel(blocks, threads=threads) as bid:
            As = T.alloc_shared((bm, bk), "float16")
            Bs = T.alloc_shared((bk, bn), "float16")
            Cl = T.alloc_fragment((bm, bn), "float32")
            for w in T.serial(waves):
                t = w * blocks + bid
                if t < tm * tn:
                    T.clear(Cl)
                    n = T.ceildiv(K, bk)
                    if ragged_k:
                        n = T.min((t + t // 4) % 4, n)
                    for ko in T.Pipelined(n, num_stages=stages):
                        T.copy(A[t // tn * bm, ko * bk], As)
                        T.copy(B[ko * bk, t % tn * bn], Bs)
                        T.gemm(As, Bs, Cl)
                    T.copy(Cl, C[t // tn * bm, t % tn * bn])
    return f


def hand_staged(M, N, K, bm=128, bn=128, bk=32, stages=3, threads=128):
    """The user's own staging: fragment -> shared tile -> global."""
    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
          C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            As = T.alloc_shared((bm, bk), "float16")
            Bs = T.alloc_shared((bk, bn), "float16")
            Cs = T.alloc_shared((bm, bn), "float16")
            Cl = T.alloc_fragment((bm, bn), "float32")
            T.clear(Cl)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], As)
                T.copy(B[ko * bk, bx * bn], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, Cs)
            T.copy(Cs, C[by * bm, bx * bn])
    return f


def atomic_staged(M, N, K, bm=32, bn=256, bk=32, threads=256, split=2):
    """The sparse MLA backward's dKV update: the accumulator goes to shared memory in `split`
    row slices (a T.Parallel store under `if i < part`), each added to C with
    T.atomic_addx4 of 4 consecutive floats (C += A @ B: C must hold zeros or a sum)."""
    part = bm // split

    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
          C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            As = T.alloc_shared((bm, bk), "float16")
            Bs = T.alloc_shared((bk, bn), "float16")
            Cl = T.alloc_fragment((bm, bn), "float32")
            Cs = T.alloc_shared((part, bn), "float32")
            T.clear(Cl)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, ko * bk], As)
                T.copy(B[ko * bk, bx * bn], Bs)
                T.gemm(As, Bs, Cl)
            for s in range(split):
                for i, j in T.Parallel(bm, bn):
                    if i < part:
                        Cs[i, j] = Cl[i + s * part, j]
                for i, j in T.Parallel(part, bn // 4):
                    if by * bm + s * part + i < M and bx * bn + j * 4 < N:
                        T.atomic_addx4(C[by * bm + s * part + i, bx * bn + j * 4], Cs[i, j * 4])
    return f


def persistent_tiles(M, N, K, bm=128, bn=256, bk=64, stages=3, threads=256, blocks=132,
                     group_size=8):
    """The reference's persistent GEMM idiom (`T.Persistent` over the tile grid, `blocks`
    blocks, tiles visited `group_size` rows at a time): the kernel of
    examples/gemm/example_gemm_persistent.py."""
    return _persistent_example().matmul_persistent.get_tir(
        M, N, K, blocks, block_M=bm, block_N=bn, block_K=bk, num_stages=stages,
        threads=threads, group_size=group_size)


@functools.lru_cache(maxsize=None)
def _persistent_example():
    path = Path(__file__).resolve().parents[2] / "examples" / "gemm" / \
        "example_gemm_persistent.py"
    spec = importlib.util.spec_from_file_location("example_gemm_persistent_tests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def persistent_ragged_k(M, N, K, bm=64, bn=128, bk=32, stages=2, threads=128, blocks=3):
    """C[tile] = A[rows, :kt] @ B[:kt, cols] with kt = (t + t // 4) % 4 K tiles of tile t
    (C = 0 at 0), float32 output: `persistent` with `ragged_k`."""
    return persistent(M, N, K, bm, bn, bk, stages, threads, blocks, ragged_k=True,
                      out="float32")


def ragged_k_reference(A, B, M, N, bm=64, bn=128, bk=32):
    """What persistent_ragged_k computes, in float64."""
    import torch

    tn = (N + bn - 1) // bn
    C = torch.zeros(M, N, dtype=torch.float64, device=A.device)
    for t in range(((M + bm - 1) // bm) * tn):
        r, c, kt = t // tn * bm, t % tn * bn, (t + t // 4) % 4 * bk
        C[r:r + bm, c:c + bn] = A[r:r + bm, :kt].double() @ B[:kt, c:c + bn].double()
    return C


def persistent_conv(N, C, H, W, F, K=3, stride=1, padding=1, bm=64, bn=64, bk=32, stages=3,
                    threads=128, blocks=5):
    """An implicit-GEMM 2-D convolution (NHWC, weights (K*K*C, F)) in a persistent tile loop:
    the im2col tile is one TMA load in im2col mode on sm_90a, issued by the producer of the
    tile loop."""
    OH = (H + 2 * padding - K) // stride + 1
    OW = (W + 2 * padding - K) // stride + 1
    M, KK = N * OH * OW, K * K * C

    @T.prim_func
    def f(data: T.Tensor((N, H, W, C), "float16"), weight: T.Tensor((KK, F), "float16"),
          out: T.Tensor((N, OH, OW, F), "float16")):
        with T.Kernel(blocks, threads=threads) as bid:
            data_s = T.alloc_shared((bm, bk), "float16")
            weight_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            out_flat = T.Tensor((M, F), "float16", out.data)
            for by, bx in T.Persistent([T.ceildiv(M, bm), T.ceildiv(F, bn)], blocks, bid):
                T.clear(acc)
                for ko in T.Pipelined(T.ceildiv(KK, bk), num_stages=stages):
                    T.c2d_im2col(data, data_s, by, ko, K, stride, 1, padding)
                    T.copy(weight[ko * bk, bx * bn], weight_s)
                    T.gemm(data_s, weight_s, acc)
                T.copy(acc, out_flat[by * bm, bx * bn])
    return f


# FlashAttention-3's schedule of the loop below (examples/flash_attention/
# example_mha_fwd_pipelined.py): QK^T(k), rescale(k-1), PV(k-1), softmax(k)
FA3_SCHEDULE = dict(group=[[0], [1, 2], [3, 4, 5, 6, 7, 8, 9], [10], [11], [12]],
                    order=[-1, 0, 3, 1, -1, 2], stage=[-1, 0, 0, 1, -1, 1])


def persistent_attention(batch, heads, seq_len, dim, is_causal, bm=64, bn=64, stages=2,
                         threads=128, blocks=5, overlap=False):
    """FlashAttention forward in a persistent tile loop (`T.Persistent` over (batch * heads,
    query tiles)): Q is loaded once per tile before the pipelined loop over the keys, which
    on sm_90a the producer issues too (warp_specialize/__init__.py's tile loads). Ragged `seq_len`
    masks the last key tile; causal tiles run different numbers of iterations. `overlap`:
    the loop runs FlashAttention-3's order/stage schedule, gemms issued without waiting."""
    schedule = FA3_SCHEDULE if overlap else {}
    wg_wait = -1 if overlap else 0
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    shape = [batch, seq_len, heads, dim]
    n_q = (seq_len + bm - 1) // bm

    @T.prim_func
    def f(Q: T.Tensor(shape, "float16"), K: T.Tensor(shape, "float16"),
          V: T.Tensor(shape, "float16"), O: T.Tensor(shape, "float16")):
        with T.Kernel(blocks, threads=threads) as bid:
            Q_s = T.alloc_shared([bm, dim], "float16")
            K_s = T.alloc_shared([bn, dim], "float16")
            V_s = T.alloc_shared([bn, dim], "float16")
            s = T.alloc_fragment([bm, bn], "float32")
            p = T.alloc_fragment([bm, bn], "float16")
            acc = T.alloc_fragment([bm, dim], "float32")
            m = T.alloc_fragment([bm], "float32")
            m_prev = T.alloc_fragment([bm], "float32")
            r = T.alloc_fragment([bm], "float32")
            row = T.alloc_fragment([bm], "float32")
            l = T.alloc_fragment([bm], "float32")
            for bh, qb in T.Persistent([batch * heads, n_q], blocks, bid, group_size=2):
                b, h = bh // heads, bh % heads
                T.copy(Q[b, qb * bm:(qb + 1) * bm, h, :], Q_s)
                T.fill(acc, 0)
                T.fill(l, 0)
                T.fill(m, -T.infinity("float32"))
                n_k = T.ceildiv(seq_len, bn)
                if is_causal:
                    n_k = T.min(n_k, T.ceildiv((qb + 1) * bm, bn))
                for k in T.Pipelined(n_k, num_stages=stages, **schedule):
                    T.copy(K[b, k * bn:(k + 1) * bn, h, :], K_s)
                    for i, j in T.Parallel(bm, bn):
                        s[i, j] = T.if_then_else(
                            (k * bn + j < seq_len) and (not is_causal or qb * bm + i >= k * bn + j),
                            0, -T.infinity("float32"))
                    T.gemm(Q_s, K_s, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow,
                           wg_wait=wg_wait)
                    T.copy(m, m_prev)
                    T.reduce_max(s, m, dim=1, clear=False)
                    for i in T.Parallel(bm):
                        r[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                    for i, j in T.Parallel(bm, bn):
                        s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                    T.reduce_sum(s, row, dim=1)
                    for i in T.Parallel(bm):
                        l[i] = l[i] * r[i] + row[i]
                    T.copy(s, p)
                    for i, j in T.Parallel(bm, dim):
                        acc[i, j] *= r[i]
                    T.copy(V[b, k * bn:(k + 1) * bn, h, :], V_s)
                    T.gemm(p, V_s, acc, policy=T.GemmWarpPolicy.FullRow, wg_wait=wg_wait)
                for i, j in T.Parallel(bm, dim):
                    acc[i, j] /= l[i]
                T.copy(acc, O[b, qb * bm:(qb + 1) * bm, h, :])
    return f


def persistent_tile_load(tiles, blocks, stages=2, bm=64, n=64, bk=64):
    """C[t] = X[t] @ (Y[0] + ... + Y[kt - 1]) for tile t of `tiles`, kt = (t + t // 4) % 4
    (0 to 3 iterations; C[t] = 0 at 0): X[t] is loaded once per tile before the pipelined
    loop and read only inside it, so on sm_90a the producer loads it (a tile load), also for
    tiles whose loop runs no iteration."""
    @T.prim_func
    def f(X: T.Tensor((tiles * bm, bk), "float16"), Y: T.Tensor((3 * bk, n), "float16"),
          C: T.Tensor((tiles * bm, n), "float32")):
        with T.Kernel(blocks, threads=128) as bid:
            Xs = T.alloc_shared((bm, bk), "float16")
            Ys = T.alloc_shared((bk, n), "float16")
            acc = T.alloc_fragment((bm, n), "float32")
            for t in T.Persistent([tiles], blocks, bid):
                T.copy(X[t * bm, 0], Xs)
                T.clear(acc)
                for k in T.Pipelined((t + t // 4) % 4, num_stages=stages):
                    T.copy(Y[k * bk, 0], Ys)
                    T.gemm(Xs, Ys, acc)
                T.copy(acc, C[t * bm, 0])
    return f


def cleared_tiles(between="", region=False):
    """Four 64x64 tiles C[:, 64k:64k+64] = A @ B[64k:64k+64]^T, the accumulator cleared before
    each gemm (transform/fold_accumulator_clear.py folds the clear into the wgmma);
    `between`: "read" adds its row sums into D between clear and gemm, "other" touches only
    D; `region`: the clear covers half of the accumulator."""
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float16"), B: T.Tensor((256, 64), "float16"),
          C: T.Tensor((64, 256), "float32"), D: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            row = T.alloc_fragment((64,), "float32")
            T.copy(A, A_s)
            T.clear(row)
            for k in T.serial(4):
                T.copy(B[k * 64, 0], B_s)
                if region:
                    T.fill(acc[0:32, :], 0)
                else:
                    T.clear(acc)
                if between == "read":
                    T.reduce_sum(acc, row, dim=1, clear=False)
                elif between == "other":
                    for i in T.Parallel(64):
                        row[i] = row[i] + 1.0
                T.gemm(A_s, B_s, acc, transpose_B=True)
                T.copy(acc, C[0, k * 64])
            T.copy(row, D)
    return f
