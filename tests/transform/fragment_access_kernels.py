"""Kernels indexing fragments the ways the reference's examples do (docs/layouts.md,
"Fragments indexed by anything"), each with a torch reference. Shared by the CPU tests
(interpreter, sm_80 / sm_90a builds: tests/transform/test_fragment_access.py) and the GPU tests
(tests/gpu/test_fragment_access_gpu.py).

Each builder returns (prim_func, make_inputs(gen, device) -> list of tensors, reference(inputs)
-> {output position: expected tensor}); outputs are the last parameters, poisoned by the
caller."""

from __future__ import annotations

import torch

import tilelang.language as T


def _randn(gen, shape, dtype, device):
    return torch.randn(shape, generator=gen).to(dtype).to(device)


def split_combine(S=4, M=64, D=32, B=3, threads=128, pipelined=True):
    """Flash decoding's combine: `lse[k, i]` inside T.Parallel with k a serial (or pipelined)
    loop variable, through `T.copy(lse[k, :], row)` and directly."""

    @T.prim_func
    def combine(lse: T.Tensor((B, S, M), "float32"), part: T.Tensor((B, S, M, D), "float32"),
                out: T.Tensor((B, M, D), "float32")):
        with T.Kernel(B, threads=threads) as b:
            lse_local = T.alloc_fragment((S, M), "float32")
            lse_max = T.alloc_fragment((M,), "float32")
            lse_sum = T.alloc_fragment((M,), "float32")
            row = T.alloc_fragment((M,), "float32")
            po = T.alloc_fragment((M, D), "float32")
            acc = T.alloc_fragment((M, D), "float32")
            T.copy(lse[b, :, :], lse_local)
            T.reduce_max(lse_local, lse_max, dim=0)
            T.clear(lse_sum)
            T.clear(acc)
            loop = T.Pipelined(S, num_stages=2) if pipelined else T.serial(S)
            for k in loop:
                T.copy(lse_local[k, :], row)
                for i in T.Parallel(M):
                    lse_sum[i] += T.exp2(row[i] - lse_max[i])
            for k in T.serial(S):
                T.copy(part[b, k, :, :], po)
                for i, j in T.Parallel(M, D):
                    acc[i, j] += po[i, j] * T.exp2(lse_local[k, i] - lse_max[i]) / lse_sum[i]
            T.copy(acc, out[b, :, :])

    def inputs(gen, device):
        return [_randn(gen, (B, S, M), torch.float32, device),
                _randn(gen, (B, S, M, D), torch.float32, device),
                torch.empty(B, M, D, device=device)]

    def reference(ins):
        lse, part = ins[0].double(), ins[1].double()
        mx = lse.max(dim=1, keepdim=True).values
        w = torch.exp2(lse - mx)
        w = w / w.sum(dim=1, keepdim=True)
        return {2: (part * w[..., None]).sum(dim=1)}

    return combine, inputs, reference


def masked_tiles(nblk=6, bm=64, bk=32, N=64, threads=128, stages=2):
    """Block-sparse attention's `if block_mask[k] != 0:` in a pipelined loop: a fragment read
    outside T.Parallel at a runtime index, around copies and a gemm."""

    @T.prim_func
    def masked(mask: T.Tensor((nblk,), "int32"), A: T.Tensor((bm, nblk * bk), "float16"),
               Bt: T.Tensor((nblk * bk, N), "float16"), C: T.Tensor((bm, N), "float32"),
               last: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=threads):
            m = T.alloc_fragment((nblk,), "int32")
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, N), "float16")
            acc = T.alloc_fragment((bm, N), "float32")
            T.copy(mask, m)
            T.clear(acc)
            for k in T.Pipelined(nblk, num_stages=stages):
                if m[k] != 0:
                    T.copy(A[0, k * bk], A_s)
                    T.copy(Bt[k * bk, 0], B_s)
                    T.gemm(A_s, B_s, acc)
            T.copy(acc, C)
            m[nblk - 1] = m[nblk - 1] + 1  # a block-level store: every thread's copy
            last[0] = m[nblk - 1]

    def inputs(gen, device):
        mask = (torch.rand(nblk, generator=gen) < 0.5).to(torch.int32)
        mask[0] = 1
        return [mask.to(device), _randn(gen, (bm, nblk * bk), torch.float16, device),
                _randn(gen, (nblk * bk, N), torch.float16, device),
                torch.empty(bm, N, device=device), torch.empty(1, dtype=torch.int32,
                                                              device=device)]

    def reference(ins):
        mask, A, Bt = ins[0].cpu(), ins[1].double().cpu(), ins[2].double().cpu()
        C = torch.zeros(bm, N, dtype=torch.float64)
        for k in range(nblk):
            if mask[k]:
                C += A[:, k * bk:(k + 1) * bk] @ Bt[k * bk:(k + 1) * bk]
        return {3: C, 4: (mask[-1:] + 1).to(torch.int32)}

    return masked, inputs, reference


def inner_serial_mix(hc=4, h=256, n=3, threads=128):
    """deepseek_mhc's post kernel: `a[i_hci, i_hco]` and `b[i_hci, j]` with i_hci a serial loop
    inside the T.Parallel nest."""

    @T.prim_func
    def mix(a: T.Tensor((n, hc, hc), "float32"), b: T.Tensor((n, hc, h), "float32"),
            c: T.Tensor((n, hc), "float32"), d: T.Tensor((n, h), "float32"),
            x: T.Tensor((n, hc, h), "float32")):
        with T.Kernel(n, threads=threads) as t:
            a_l = T.alloc_fragment((hc, hc), "float32")
            b_l = T.alloc_fragment((hc, h), "float32")
            c_l = T.alloc_fragment((hc,), "float32")
            d_l = T.alloc_fragment((h,), "float32")
            x_l = T.alloc_fragment((hc, h), "float32")
            T.copy(a[t, 0, 0], a_l)
            T.copy(b[t, 0, 0], b_l)
            T.copy(c[t, 0], c_l)
            T.copy(d[t, 0], d_l)
            for o, j in T.Parallel(hc, h):
                x_l[o, j] = c_l[o] * d_l[j]
                for i in T.serial(hc):
                    x_l[o, j] += a_l[i, o] * b_l[i, j]
            T.copy(x_l, x[t, 0, 0])

    def inputs(gen, device):
        return [_randn(gen, s, torch.float32, device) for s in
                ((n, hc, hc), (n, hc, h), (n, hc), (n, h))] + [torch.empty(n, hc, h,
                                                                          device=device)]

    def reference(ins):
        a, b, c, d = (t.double() for t in ins[:4])
        return {4: c[:, :, None] * d[:, None, :] + torch.einsum("nio,nij->noj", a, b)}

    return mix, inputs, reference


def shifted_store(BS=64, D=64, K=32, split=2, threads=128):
    """The sparse MLA backward's split store: `acc[bi + s * (BS // split), d]` with s a short
    serial loop, under `if bi < BS // split`."""
    part = BS // split

    @T.prim_func
    def store(A: T.Tensor((BS, K), "float16"), Bt: T.Tensor((K, D), "float16"),
              out: T.Tensor((BS, D), "float32")):
        with T.Kernel(1, threads=threads):
            A_s = T.alloc_shared((BS, K), "float16")
            B_s = T.alloc_shared((K, D), "float16")
            acc = T.alloc_fragment((BS, D), "float32")
            S = T.alloc_shared((part, D), "float32")
            T.copy(A, A_s)
            T.copy(Bt, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            for s in range(split):
                for bi, d in T.Parallel(BS, D):
                    if bi < part:
                        S[bi, d] = acc[bi + s * part, d]
                T.copy(S, out[s * part, 0])

    def inputs(gen, device):
        return [_randn(gen, (BS, K), torch.float16, device),
                _randn(gen, (K, D), torch.float16, device), torch.empty(BS, D, device=device)]

    def reference(ins):
        return {2: ins[0].double() @ ins[1].double()}

    return store, inputs, reference


def grown_fragment(heads=4, bm=128, threads=128):
    """The attention-sink forward's `sinks = T.alloc_fragment([heads])` filled and read by
    loops over block_M > heads: the fragment is as long as the loops (the reference's
    layout sizes it so)."""

    @T.prim_func
    def sinks(Sinks: T.Tensor((heads,), "float32"), X: T.Tensor((heads, bm), "float32"),
              out: T.Tensor((heads, bm), "float32")):
        with T.Kernel(heads, threads=threads) as h:
            s = T.alloc_fragment((heads,), "float32")
            for i in T.Parallel(bm):
                s[i] = Sinks[h]
            for i in T.Parallel(bm):
                out[h, i] = X[h, i] + s[i]

    def inputs(gen, device):
        return [_randn(gen, (heads,), torch.float32, device),
                _randn(gen, (heads, bm), torch.float32, device),
                torch.empty(heads, bm, device=device)]

    def reference(ins):
        return {2: ins[1].double() + ins[0].double()[:, None]}

    return sinks, inputs, reference


def register_gemm(M=64, N=64, K=64, bk=32, a_reg=False, b_reg=True, trans_A=False,
                  trans_B=False, dtype="float16", threads=128, stages=2):
    """T.gemm with A and/or B in registers (copied from shared tiles), any transposes."""
    A_shape = (K, M) if trans_A else (M, K)
    B_shape = (N, K) if trans_B else (K, N)
    A_tile = (bk, M) if trans_A else (M, bk)
    B_tile = (N, bk) if trans_B else (bk, N)

    @T.prim_func
    def gemm(A: T.Tensor(A_shape, dtype), B: T.Tensor(B_shape, dtype),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads):
            A_s = T.alloc_shared(A_tile, dtype)
            B_s = T.alloc_shared(B_tile, dtype)
            A_l = T.alloc_fragment(A_tile, dtype)
            B_l = T.alloc_fragment(B_tile, dtype)
            acc = T.alloc_fragment((M, N), "float32")
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=stages):
                if trans_A:
                    T.copy(A[k * bk, 0], A_s)
                else:
                    T.copy(A[0, k * bk], A_s)
                if trans_B:
                    T.copy(B[0, k * bk], B_s)
                else:
                    T.copy(B[k * bk, 0], B_s)
                if a_reg:
                    T.copy(A_s, A_l)
                if b_reg:
                    T.copy(B_s, B_l)
                T.gemm(A_l if a_reg else A_s, B_l if b_reg else B_s, acc, trans_A, trans_B)
            T.copy(acc, C)

    tdt = getattr(torch, dtype)

    def inputs(gen, device):
        return [_randn(gen, A_shape, tdt, device), _randn(gen, B_shape, tdt, device),
                torch.empty(M, N, device=device)]

    def reference(ins):
        a, b = ins[0].double(), ins[1].double()
        return {2: (a.T if trans_A else a) @ (b.T if trans_B else b)}

    return gemm, inputs, reference


def windowed_reads(M=32, N=32, K=128, window=8, rows=29, dtype="float16", threads=128):
    """A register gemm operand read window by window in a serial loop (`x[i, w * 8 + j]`, j
    a T.Parallel variable of extent 8, w serial), as deepseek_mhc's pre kernel sums squares
    beside its gemm: the loop follows the operand's layout with the dim split at the window
    (each thread's slots of window w at a fixed offset), no shared memory round trip. A short
    serial loop is unrolled first (constant window offsets: the same layouts). `rows` < M:
    the last rows of the tile are out of range."""

    @T.prim_func
    def windows(X: T.Tensor((rows, K), dtype), W: T.Tensor((N, K), dtype),
                out: T.Tensor((rows, N), "float32"), sq: T.Tensor((rows, window), "float32")):
        with T.Kernel(1, threads=threads):
            X_s = T.alloc_shared((M, K), dtype)
            W_s = T.alloc_shared((N, K), dtype)
            x = T.alloc_fragment((M, K), dtype)
            acc = T.alloc_fragment((M, N), "float32")
            part = T.alloc_fragment((M, window), "float32")
            T.clear(acc)
            T.clear(part)
            T.copy(X[0, 0], X_s)
            T.copy(W, W_s)
            T.copy(X_s, x)
            for w in T.serial(K // window):
                for i, j in T.Parallel(M, window):
                    part[i, j] += T.cast(x[i, w * window + j], "float32") * (w + 1)
            T.gemm(x, W_s, acc, transpose_B=True)
            T.copy(acc, out[0, 0])
            T.copy(part, sq[0, 0])

    tdt = getattr(torch, dtype)

    def inputs(gen, device):
        return [_randn(gen, (rows, K), tdt, device), _randn(gen, (N, K), tdt, device),
                torch.empty(rows, N, device=device), torch.empty(rows, window, device=device)]

    def reference(ins):
        x, w = ins[0].double(), ins[1].double()
        weights = torch.arange(1, K // window + 1, dtype=torch.float64).repeat_interleave(window)
        return {2: x @ w.T,
                3: (x * weights.to(x.device)).reshape(rows, K // window, window).sum(1)}

    return windows, inputs, reference


def staged_row_reads(M=64, N=64, K=32, threads=128):
    """A gemm accumulator read at a runtime row inside T.Parallel (`acc[k, j]`, k serial):
    no register layout holds a whole dim of it per thread, so the loop reads a shared copy."""

    @T.prim_func
    def rows(A: T.Tensor((M, K), "float16"), Bt: T.Tensor((K, N), "float16"),
             out: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads):
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(Bt, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            for k in T.serial(M):
                for j in T.Parallel(N):
                    out[M - 1 - k, j] = acc[k, j] * 2.0

    def inputs(gen, device):
        return [_randn(gen, (M, K), torch.float16, device),
                _randn(gen, (K, N), torch.float16, device), torch.empty(M, N, device=device)]

    def reference(ins):
        return {2: (ins[0].double() @ ins[1].double()).flip(0) * 2}

    return rows, inputs, reference


def replicated_write(M=64, N=64, K=32, threads=128):
    """A fragment read at block level (so every thread holds it whole) written by a loop that
    follows a gemm accumulator (one thread per element): every copy is updated through
    shared memory."""

    @T.prim_func
    def firsts(A: T.Tensor((M, K), "float16"), Bt: T.Tensor((K, N), "float16"),
               out: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=threads):
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            col = T.alloc_fragment((M,), "float32")
            T.copy(A, A_s)
            T.copy(Bt, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            for i in T.Parallel(M):
                col[i] = acc[i, 3]
            for k in T.serial(M):
                out[k] = col[M - 1 - k]

    def inputs(gen, device):
        return [_randn(gen, (M, K), torch.float16, device),
                _randn(gen, (K, N), torch.float16, device), torch.empty(M, device=device)]

    def reference(ins):
        return {2: (ins[0].double() @ ins[1].double())[:, 3].flip(0)}

    return firsts, inputs, reference


CASES = {
    "split_combine": split_combine,
    "split_combine_serial": lambda: split_combine(pipelined=False),
    "masked_tiles": masked_tiles,
    "inner_serial_mix": inner_serial_mix,
    "shifted_store": shifted_store,
    "shifted_store_4": lambda: shifted_store(split=4),
    # the sparse MLA backward's shape: 8 warps over 32 x 512, the shifted trip vectorised
    "shifted_store_mla": lambda: shifted_store(BS=32, D=512, K=64, threads=256),
    "grown_fragment": grown_fragment,
    "gemm_sr": lambda: register_gemm(b_reg=True),
    "gemm_sr_transB": lambda: register_gemm(b_reg=True, trans_B=True),
    "gemm_rr": lambda: register_gemm(a_reg=True, b_reg=True),
    "gemm_rs_transA": lambda: register_gemm(a_reg=True, b_reg=False, trans_A=True),
    "gemm_rr_bf16_trans": lambda: register_gemm(a_reg=True, b_reg=True, trans_A=True,
                                                trans_B=True, dtype="bfloat16"),
    "windowed_reads": windowed_reads,
    "windowed_reads_tf32": lambda: windowed_reads(dtype="float32", window=4),
    "windowed_reads_unrolled": lambda: windowed_reads(dtype="float32", window=8, K=64),
    # fp16 operands hold 2 columns per thread: a window of 4 moves to other threads
    "windowed_reads_spread": lambda: windowed_reads(window=4),
    "staged_row_reads": staged_row_reads,
    "replicated_write": replicated_write,
}
