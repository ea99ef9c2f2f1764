"""Weight-only quantised GEMM: C = A @ dequant(W)^T with 4-bit weights and per-group scales.

    python examples/dequantize_gemm/example_dequant_gemm_int4.py

The weight matrix W (N x K) is stored as unsigned 4-bit codes, eight per 32-bit word, with
one float16 scale per `group_size` consecutive elements of a row:
W[n, k] = (code - 8) * scale[n, k // group_size]. Within the word of elements 8w..8w+7 of a
row, element 8w + 2m sits in nibble m (bits 4m..4m+3) and element 8w + 2m + 1 in nibble
m + 4 (bits 16+4m..): `pack_int4` and `unpack_int4` convert.
For small M the kernel is bound by reading W, so reading 4 bits instead of 16 per weight is
the whole point; the work is to keep the expansion to float16 cheap enough that the tensor
cores are not left waiting:

Two kernels compute it. `dequant_gemm_int4` expands the weights into shared memory:

- It reads the packed bytes as 32-bit words, eight codes per word (the caller passes
  `packed.view(torch.int32)`; on a little-endian GPU byte b of a word is its bits
  8b..8b+7, so the nibbles sit as described above). A thread expands eight consecutive
  weights from one word and writes them with one 16-byte store.
- The scales of the block's rows are copied into shared memory once, before the K loop
  (block_N * K / group_size float16 values); block_K is a multiple of the group size, so the
  expansion of a K-step reads one scale per row.
- A code becomes a float16 without an int->float conversion: 0x6400 | code is the bit
  pattern of 1024 + code, so `reinterpret(0x6400 | code) - 1032` is exactly code - 8. The
  word layout puts the codes of elements 2m and 2m + 1 sixteen bits apart, so one 32-bit
  AND/OR, `(word >> 4m) & 0x000F000F | 0x64006400`, makes both; each element takes its
  half, and the compiler computes the pair as one f16x2 value (transform/partition_parallel/pair_lanes.py): a
  shift, a LOP3, a subtraction and a multiplication per two weights.
- Only A and the packed words are in the pipelined loop, so on Hopper they stream in by TMA
  from a producer warpgroup while two consumer warpgroups expand the tile and run the gemm.
  With three or more stages the compiler also double-buffers B_shared so that the expansion
  of step k+1 runs under the gemm of step k (transform/warp_specialize/computed_operands.py).
- With M = 256 every block multiplies all of A by its block_N rows of W, so A is read from
  L2 once per block: at 256x64 tiles that is 128 x 4 MB. `split_k` = 2 halves it: blocks of
  256x128 tiles take half of K each (still 128 blocks), and their partial tiles are added
  into C by the TMA unit. C is therefore an argument, zeroed by the caller when split_k > 1
  (0.0717 against 0.0790 ms on an H200 with the earlier per-element expansion; 0.0643 ms,
  0.82x of cuBLAS on the dequantised weights, with the one above: docs/perf.md).

The faster `dequant_gemm_int4_rs` computes the same product as C^T = W @ A^T, the expanded weights held
in registers as the A operand of the gemm (wgmma takes A from registers, B from shared
memory): each thread expands exactly the weights its fragment holds, from one 32-bit word
per 16x16 block (`fragment_words` stores the codes in that order), so the weights never go
through shared memory and no barrier separates expansion and gemm. The compiler keeps two
copies of the fragment, so the expansion of step k+1 runs under the gemm of step k, and
the transposed tile goes out through shared memory. 0.0567 ms on an H200, 0.96-0.97x of
cuBLAS on the dequantised weights (the shared-memory kernel: 0.0643 ms, 0.82x).

Runs on the GPU when there is one, else on the CPU interpreter at a small size.
"""

import torch

import tilelang
import tilelang.language as T


@tilelang.jit
def dequant_gemm_int4(M, N, K, group_size=128, block_M=128, block_N=128, block_K=128,
                      num_stages=3, threads=256, split_k=1, cluster=1, dtype="float16",
                      accum_dtype="float32"):
    assert K % group_size == 0 and K % block_K == 0 and block_K % 8 == 0
    assert block_K % group_size == 0 or group_size % block_K == 0, "groups align with K-steps"
    assert (K // block_K) % split_k == 0, "every slice of K is a whole number of K-steps"
    n_groups = K // group_size
    k_steps = K // block_K // split_k

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K // 8), "int32"),
             Scale: T.Tensor((N, n_groups), dtype), C: T.Tensor((M, N), dtype)):
        grid = (T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k)
        launch = T.ClusterKernel(*grid, cluster_dims=(cluster, 1, 1), threads=threads) \
            if cluster > 1 else T.Kernel(*grid, threads=threads)
        with launch as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_packed = T.alloc_shared((block_N, block_K // 8), "int32")
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            # rows padded by 16 bytes: the rows one warp reads at once fall in different banks
            S_shared = T.alloc_shared((block_N, n_groups + 8), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            # once: every K-step uses these rows
            T.copy(Scale[bx * block_N:(bx + 1) * block_N, 0:n_groups],
                   S_shared[0:block_N, 0:n_groups])
            T.clear(C_local)
            for ko in T.Pipelined(k_steps, num_stages=num_stages):
                k = bz * k_steps + ko
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K // 8], B_packed)
                for i, j in T.Parallel(block_N, block_K):
                    word = T.cast(B_packed[i, j // 8], "uint32")  # unsigned: logical shift
                    # 1024 + the codes of elements j - j % 2 and j - j % 2 + 1, as float16 bits
                    pair = (word >> (j % 8 // 2 * 4)) & 0x000F000F | 0x64006400
                    bits = T.cast(pair >> (j % 2 * 16), "uint16")
                    w = T.reinterpret(bits, dtype) - T.cast(1032, dtype)
                    B_shared[i, j] = w * S_shared[i, (k * block_K + j) // group_size]
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            if split_k == 1:
                T.copy(C_local, C[by * block_M, bx * block_N])
            else:
                # the slices' partial tiles are summed into C (zeroed by the caller) by
                # the TMA unit, from a float16 copy in shared memory
                C_shared = T.alloc_shared((block_M, block_N), dtype)
                T.annotate_layout({C_shared: tilelang.layout.make_swizzled_layout(C_shared)})
                T.copy(C_local, C_shared)
                T.atomic_add(C[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N],
                             C_shared, use_tma=True)

    return main


@tilelang.jit
def dequant_gemm_int4_rs(M, N, K, group_size=128, block_M=256, block_N=128, block_K=64,
                         num_stages=4, threads=256, split_k=2, dtype="float16",
                         accum_dtype="float32"):
    """The same product as C^T = W @ A^T with the expanded weights in registers, as the A
    operand of the gemm: no shared-memory round trip and no barrier between expansion and
    gemm. `B` holds the codes in fragment order (`fragment_words`): the thread that holds
    rows g, g+8 and columns 2q, 2q+1, 2q+8, 2q+9 of a 16x16 block of W finds all eight in
    one word. With split_k > 1 the K slices of a tile form a thread block cluster and
    `T.store_cluster_sum` writes their sum: the first slice stores its tile, the others add
    theirs with the TMA unit once it is in memory, so C needs no zeroing beforehand (that
    zeroing cost 2.8 of 54 us, 5%, on an H200)."""
    assert K % group_size == 0 and K % block_K == 0 and block_K % 16 == 0
    assert block_K % group_size == 0 or group_size % block_K == 0, "groups align with K-steps"
    assert block_N % 16 == 0 and (K // block_K) % split_k == 0
    n_groups = K // group_size
    k_steps = K // block_K // split_k
    N16 = (N + 15) // 16 * 16  # W padded to whole 16-row blocks

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N16 // 2, K // 4), "int32"),
             Scale: T.Tensor((N, n_groups), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=threads,
                      cluster_dims=(1, 1, split_k) if split_k > 1 else None) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_packed = T.alloc_shared((block_N // 2, block_K // 4), "int32")
            S_shared = T.alloc_shared((block_N, n_groups + 8), dtype)
            W_local = T.alloc_fragment((block_N, block_K), dtype)
            Ct_local = T.alloc_fragment((block_N, block_M), accum_dtype)

            T.copy(Scale[bx * block_N:(bx + 1) * block_N, 0:n_groups],
                   S_shared[0:block_N, 0:n_groups])
            T.clear(Ct_local)
            for ko in T.Pipelined(k_steps, num_stages=num_stages):
                k = bz * k_steps + ko
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N // 2, k * block_K // 4], B_packed)
                for i, j in T.Parallel(block_N, block_K):
                    word = T.cast(B_packed[i // 16 * 8 + i % 8, j // 16 * 4 + j % 8 // 2],
                                  "uint32")
                    nibble = i % 16 // 8 * 2 + j % 16 // 8
                    pair = (word >> (nibble * 4)) & 0x000F000F | 0x64006400
                    bits = T.cast(pair >> (j % 2 * 16), "uint16")
                    w = T.reinterpret(bits, dtype) - T.cast(1032, dtype)
                    W_local[i, j] = w * S_shared[i, (k * block_K + j) // group_size]
                T.gemm(W_local, A_shared, Ct_local, transpose_B=True)
            C_shared = T.alloc_shared((block_M, block_N), dtype)
            for i, j in T.Parallel(block_N, block_M):
                C_shared[j, i] = Ct_local[i, j]
            T.store_cluster_sum(C[by * block_M, bx * block_N], C_shared)

    return main


def quantize_int4(w, group_size):
    """Symmetric per-group 4-bit quantisation of a float (N, K) matrix; returns
    (packed uint8 (N, K/2) in the kernel's word layout, float16 scales (N, K/group_size))."""
    N, K = w.shape
    g = w.float().reshape(N, K // group_size, group_size)
    scale = (g.abs().amax(dim=-1, keepdim=True) / 7.0).clamp_min(1e-8).half()
    codes = (torch.round(g / scale.float()).clamp(-8, 7) + 8).to(torch.uint8).reshape(N, K)
    return pack_int4(codes), scale.reshape(N, K // group_size).contiguous()


def pack_int4(codes):
    """(N, K) codes in [0, 16) -> (N, K/2) bytes: per group of eight elements (one 32-bit
    word), nibble m holds element 2m and nibble m + 4 element 2m + 1."""
    N, K = codes.shape
    c = codes.reshape(N, K // 8, 8)
    nibbles = torch.cat([c[..., 0::2], c[..., 1::2]], dim=-1)
    return (nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)).reshape(N, K // 2).contiguous()


def unpack_int4(packed):
    """The codes `pack_int4` packed."""
    N = packed.shape[0]
    p = packed.reshape(N, -1, 4)
    nibbles = torch.stack([p & 0xF, p >> 4], dim=-1).reshape(N, -1, 8)
    codes = torch.empty_like(nibbles)
    codes[..., 0::2], codes[..., 1::2] = nibbles[..., :4], nibbles[..., 4:]
    return codes.reshape(N, -1)


def dequantize_int4(packed, scale, group_size):
    """The float16 weights the kernel computes with (the same rounding: (code - 8) * scale)."""
    s = scale.repeat_interleave(group_size, dim=1)
    return (unpack_int4(packed).half() - 8) * s


def fragment_words(packed):
    """`pack_int4`'s bytes rearranged for `dequant_gemm_int4_rs`: an (N16/2, K/4) int32
    tensor (N16 = N rounded up to 16) whose word at row 8 * (n // 16) + n % 8 and column
    4 * (k // 16) + k % 8 // 2 holds the code of element (n, k) at bits 4 * (2h + hk) + 16e,
    where h = n % 16 // 8, hk = k % 16 // 8 and e = k % 2."""
    codes = unpack_int4(packed).to(torch.int64)
    N, K = codes.shape
    codes = torch.nn.functional.pad(codes, (0, 0, 0, (-N) % 16))
    c = codes.reshape(-1, 2, 8, K // 16, 2, 4, 2)  # [n // 16, h, g, k // 16, hk, q, e]
    word = torch.zeros(c.shape[0], 8, K // 16, 4, dtype=torch.int64, device=codes.device)
    for h in range(2):
        for hk in range(2):
            for e in range(2):
                word |= c[:, h, :, :, hk, :, e] << (4 * (2 * h + hk) + 16 * e)
    word = word.reshape(-1, K // 4)
    return torch.where(word >= 2**31, word - 2**32, word).to(torch.int32)


# (M, N, K, group_size, tile config); K is a multiple of block_K and group_size, M and N need
# not be multiples of the tile
SIZES = {
    "small": (72, 136, 256, 64, dict(block_M=64, block_N=64, threads=128)),
    "medium": (300, 1000, 2048, 128, dict()),
    # best of sixteen tile configs on an H200 (benchmarks/sweeps/gemm_examples.py,
    # 2026-11-22): 256-row tiles expand each weight once for the whole M = 256; two K slices
    # halve the L2 traffic of A
    "bench": (256, 8192, 8192, 128, dict(block_M=256, block_N=128, block_K=64, num_stages=3,
                                         split_k=2)),
}
# Ampere has less shared memory per block than Hopper: one stage fewer.
SM80_CONFIG = dict(num_stages=2, split_k=1)  # no clusters before Hopper
# dequant_gemm_int4_rs: M and N need not be multiples of the tile (N is padded to 16 rows)
RS_SIZES = {
    "small": (72, 136, 256, 64, dict(block_M=64, block_N=64, threads=128, split_k=1)),
    "medium": (300, 1000, 2048, 128, dict(split_k=1)),
    # 2026-11-22, H200: 0.0565-0.0571 ms with 4 stages, 0.0599 with 3; 0.0585 with 4 stages
    # and the fragment not double-buffered
    "bench": (256, 8192, 8192, 128, dict(block_M=256, block_N=128, block_K=64, num_stages=4,
                                         split_k=2)),
    # decoding: a few rows of activations (64-row tiles, mostly zero-filled by TMA); 0.0361 ms
    # against cuBLAS's 0.0444 on an H200
    "decode": (16, 8192, 8192, 128, dict(block_M=64, block_N=128, block_K=64, num_stages=4,
                                         split_k=2)),
}


def check(out, ref, tol):
    assert not torch.isnan(out).any(), "NaN in the output"
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err < tol, f"relative error {err:.2e} exceeds {tol:.0e}"
    return err


def programs(size="bench", arch="sm_90a"):
    out = []
    for name, fn, sizes in (("dequant_gemm_int4", dequant_gemm_int4, SIZES),
                            ("dequant_gemm_int4_rs", dequant_gemm_int4_rs, RS_SIZES)):
        M, N, K, G, cfg = sizes[size]
        if arch != "sm_90a" and size != "small":
            cfg = {**cfg, **SM80_CONFIG}
        out.append((name, fn.get_tir(M, N, K, G, **cfg)))
    return out


def run(device=None, size="small"):
    """Build both kernels, check them against torch on fresh random inputs, and return
    [{name, tilelang, baseline, baseline_name, flops, error}]: the register-operand kernel
    first (the faster), then the one that expands the weights into shared memory; at the
    bench size also the register kernel at M = 16."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    cases = []
    kinds = [("", dequant_gemm_int4_rs, RS_SIZES[size]),
             (", weights through shared memory", dequant_gemm_int4, SIZES[size])]
    if size == "bench":  # and the register kernel at a decoding size
        kinds.append((", decoding", dequant_gemm_int4_rs, RS_SIZES["decode"]))
    for kind, fn, (M, N, K, G, cfg) in kinds:
        if device == "cuda" and torch.cuda.get_device_capability()[0] < 9 and size != "small":
            cfg = {**cfg, **SM80_CONFIG}
        kernel = fn(M, N, K, G, **cfg)
        a = torch.randn(M, K, device=device, dtype=torch.float16)
        packed, scale = quantize_int4(torch.randn(N, K, device=device), G)
        w = dequantize_int4(packed, scale, G)
        # the register kernel reads the codes in fragment order; the other reads the same
        # bytes as 32-bit words, eight codes each
        words = fragment_words(packed) if fn is dequant_gemm_int4_rs else packed.view(torch.int32)
        c = torch.full((M, N), float("nan"), device=device, dtype=torch.float16)

        # the shared-memory kernel's K slices add into C; the register kernel's store their
        # cluster's sum
        zero = fn is dequant_gemm_int4 and cfg.get("split_k", 1) > 1

        def call(kernel=kernel, a=a, words=words, scale=scale, c=c, zero=zero):
            if zero:
                c.zero_()
            kernel(a, words, scale, c)
            return c

        err = check(call(), a.double() @ w.double().t(), 2e-3)
        cases.append(dict(name=f"int4 dequant gemm (group {G}) {M}x{N}x{K}{kind}",
                          tilelang=call, baseline=lambda a=a, w=w: a @ w.t(),
                          baseline_name="cuBLAS fp16 on dequantised W",
                          flops=2.0 * M * N * K, error=err))
    return cases


def main():
    gpu = torch.cuda.is_available()
    for case in run("cuda" if gpu else "cpu", "bench" if gpu else "small"):
        line = f"{case['name']}: relative error {case['error']:.1e}"
        if gpu:
            from tilelang.profiler import do_bench

            ms = do_bench(case["tilelang"], return_mode="median")
            ref_ms = do_bench(case["baseline"], return_mode="median")
            line += (f", {ms:.4f} ms ({case['flops'] / ms * 1e-9:.1f} TFLOP/s), "
                     f"{case['baseline_name']} {ref_ms:.4f} ms, speedup {ref_ms / ms:.2f}x")
        print(line)


if __name__ == "__main__":
    main()
