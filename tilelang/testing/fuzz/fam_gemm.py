"""Family "gemm": `T.gemm` with every transpose combination and operand dtype, ragged M/N/K,
a serial or pipelined k-loop, A from shared memory or registers, and an epilogue.

    C[M, N] = epilogue(init + op(A) @ op(B))

(The "fragments" family builds these programs with B, and A in any transpose, in registers.)

op(A) = A (M, K) or A^T with A stored (K, M); op(B) = B (K, N) or B^T with B stored (N, K).
Reads past the edges give 0, so ragged K adds nothing; init is 0 (T.clear or clear_accum on
the first k step) or the tile of an input C0. The epilogue is one of: none, relu, scale by 0.5
(on int32 accumulators: computed in float32, stored back truncating toward zero), + bias[q]
(a column vector broadcast from a fragment); the result is cast to C's dtype.
"""

from __future__ import annotations

import numpy as np

from .case import EPS, Case, Param, kernel_source, pick, random_values, round_to

# (A/B dtype, accumulator dtype, output dtypes, weight)
DTYPES = (
    ("float16", "float32", ("float32", "float16"), 4),
    ("float16", "float16", ("float16",), 1),
    ("bfloat16", "float32", ("float32", "bfloat16"), 2),
    ("float32", "float32", ("float32",), 2),  # TF32 tensor cores
    ("int8", "int32", ("int32",), 2),
    ("float8_e4m3", "float32", ("float32", "float16"), 1),
    ("float8_e5m2", "float32", ("float32",), 1),
    ("float64", "float64", ("float64",), 0.3),
)
K_ATOM = {"float16": 16, "bfloat16": 16, "float32": 8, "int8": 32, "float8_e4m3": 32,
          "float8_e5m2": 32, "float64": 4}


def _partitionable(bm, bn, warps):
    return any(warps % wm == 0 and bm % (16 * wm) == 0 and bn % (8 * (warps // wm)) == 0
               for wm in range(1, warps + 1))


def sample(rng, seed: int) -> Case:
    w = np.array([d[3] for d in DTYPES], float)
    ab, acc, outs, _ = DTYPES[int(rng.choice(len(DTYPES), p=w / w.sum()))]
    while True:
        bm = pick(rng, (16, 32, 64, 128))
        bn = pick(rng, (8, 16, 32, 64, 128))
        threads = pick(rng, (32, 64, 128, 128, 256))
        if bm * bn <= 128 * 128 and _partitionable(bm, bn, threads // 32):
            break
    bk = pick(rng, tuple(k for k in (16, 32, 64) if k % K_ATOM[ab] == 0))
    trans_a, trans_b = bool(rng.integers(2)), bool(rng.integers(2))
    spec = dict(ab=ab, acc=acc, out=pick(rng, outs), bm=bm, bn=bn, bk=bk, threads=threads,
                M=int(rng.integers(1, 2 * bm + 9)), N=int(rng.integers(1, 2 * bn + 9)),
                K=int(rng.integers(1, 3 * bk + 9)), trans_a=trans_a, trans_b=trans_b,
                a_regs=bool(not trans_a and rng.random() < 0.25),
                loop=pick(rng, ("serial", "pipelined", "pipelined")),
                stages=int(rng.integers(0, 4)),
                init=pick(rng, ("clear", "clear", "clear_accum", "input")),
                epilogue=pick(rng, ("none", "none", "relu", "scale", "bias")),
                store=pick(rng, ("copy", "shared")),
                policy=pick(rng, ("Square", "FullRow", "FullCol")))
    return build(spec, seed)


def sample_persistent(rng, seed: int) -> Case:
    """Family "persistent": the same GEMMs in a `T.Persistent` tile loop over 1..9 blocks
    (fewer or more than the tiles), tiles grouped 1..8 rows at a time, whole warpgroups and
    a pipelined k loop most of the time and 16-byte rows for A and B often, so that on sm_90a
    the TMA producer runs the tile loop (warp_specialize/__init__.py) with a running ring position."""
    case = sample(rng, seed)
    s = dict(case.spec)
    if rng.random() < 0.7:
        s["threads"] = int(pick(rng, (128, 256)))
        while not _partitionable(s["bm"], s["bn"], s["threads"] // 32):
            s["bm"], s["bn"] = int(pick(rng, (64, 128))), int(pick(rng, (32, 64, 128)))
        s["loop"], s["stages"] = "pipelined", int(pick(rng, (2, 3, 4)))
    # every stage fits in shared memory next to an output tile (a valid program: in a tile
    # loop the stages keep their bytes, no output tile may reuse them)
    elem = _fit_stages(s)
    if rng.random() < 0.6:  # 16-byte rows (TMA): dimensions in multiples of 16 elements
        s["M"], s["N"], s["K"] = (-(-s[d] // 16) * 16 for d in ("M", "N", "K"))
    s["M"] = int(s["M"] + rng.integers(0, 3) * s["bm"])
    s["N"] = int(s["N"] + rng.integers(0, 3) * s["bn"])
    s["persistent"] = (int(rng.integers(1, 10)), int(pick(rng, (1, 2, 3, 8))))
    # A's whole row panel loaded once per tile before the k loop, which copies its slices
    # (the producer's tile loads on sm_90a, read with ordinary loads)
    panel = -(-s["K"] // s["bk"]) * s["bk"]
    if rng.random() < 0.35 and not s["trans_a"] and s["loop"] == "pipelined" and \
            panel <= 256 and s["stages"] * (s["bm"] + s["bn"]) * s["bk"] * elem + \
            2 * s["bm"] * panel * elem + s["bm"] * s["bn"] * 4 <= 200 * 1024:
        s["a_panel"] = True
    return build(s, seed)


def sample_odd_tiles(rng, seed: int) -> Case:
    """Family "odd_tiles": the same GEMMs with N tiles that are not powers of two (24 to 112
    columns) on whole warpgroups, ragged and 16-element-aligned sizes, pipelined k loops
    most of the time: swizzles of 48-, 80- and 96-column tiles, wgmma N slices of them that
    must be whole swizzle atoms or pieces of one (else the gemm falls back to mma.sync), and
    pipeline stages whose size is no multiple of 128 bytes (an 80-column tile of B)."""
    case = sample(rng, seed)
    s = dict(case.spec)
    s["threads"] = int(pick(rng, (128, 256, 256)))
    while True:
        s["bm"], s["bn"] = int(pick(rng, (64, 128))), int(pick(rng, (24, 40, 48, 80, 96, 112)))
        if s["bm"] * s["bn"] <= 128 * 128 and _partitionable(s["bm"], s["bn"],
                                                             s["threads"] // 32):
            break
    s["N"] = int(rng.integers(1, 2 * s["bn"] + 9))
    if rng.random() < 0.7:
        s["loop"], s["stages"] = "pipelined", int(pick(rng, (2, 3, 4)))
    _fit_stages(s)
    if rng.random() < 0.6:  # 16-byte rows (TMA): dimensions in multiples of 16 elements
        s["M"], s["N"], s["K"] = (-(-s[d] // 16) * 16 for d in ("M", "N", "K"))
    return build(s, seed)


def _fit_stages(s: dict, limit: int = 200 * 1024) -> int:
    """Lower a pipelined draw's stage count until its stages fit in `limit` bytes of shared
    memory next to an output tile (over 227 KB the program would be invalid, not the compiler
    wrong); where even two stages do not fit (float64 tiles of 128 x 112 x 64), the k loop is
    a plain serial loop. Returns the operands' element size in bytes."""
    elem = {"float32": 4, "float64": 8, "int8": 1}.get(s["ab"], 2)
    out = 8 if "float64" in (s["acc"], s["out"]) else 4

    def too_big():
        return s["stages"] * (s["bm"] + s["bn"]) * s["bk"] * elem + \
            s["bm"] * s["bn"] * out > limit

    while s["loop"] == "pipelined" and s["stages"] > 2 and too_big():
        s["stages"] -= 1
    if s["loop"] == "pipelined" and s["stages"] >= 2 and too_big():
        s["loop"] = "serial"
    return elem


def build(s: dict, seed: int) -> Case:
    ab, acc, out = s["ab"], s["acc"], s["out"]
    bm, bn, bk, M, N, K = s["bm"], s["bn"], s["bk"], s["M"], s["N"], s["K"]
    ta, tb = s["trans_a"], s["trans_b"]
    a_shape = (K, M) if ta else (M, K)
    b_shape = (N, K) if tb else (K, N)
    params = [Param("A", a_shape, ab), Param("B", b_shape, ab)]
    if s["init"] == "input":
        params.append(Param("C0", (M, N), acc))
    if s["epilogue"] == "bias":
        params.append(Param("bias", (N,), acc))
    params.append(Param("C", (M, N), out, "out"))
    ind = "    "
    nk = -(-K // bk)
    tile_loop = s.get("persistent")  # (blocks, group_size): a T.Persistent tile loop
    if tile_loop:
        k = [f"with T.Kernel({tile_loop[0]}, threads={s['threads']}) as bid:"]
    else:
        k = [f"with T.Kernel(T.ceildiv({N}, {bn}), T.ceildiv({M}, {bm}), "
             f"threads={s['threads']}) as (bx, by):"]
    k.append(ind + f'A_s = T.alloc_shared({(bk, bm) if ta else (bm, bk)}, "{ab}")')
    k.append(ind + f'B_s = T.alloc_shared({(bn, bk) if tb else (bk, bn)}, "{ab}")')
    if s.get("a_panel"):
        k.append(ind + f'A_p = T.alloc_shared(({bm}, {nk * bk}), "{ab}")')
    if s["a_regs"]:
        k.append(ind + f'A_r = T.alloc_fragment({(bk, bm) if ta else (bm, bk)}, "{ab}")')
    if s.get("b_regs"):  # the fragments family's register operands
        k.append(ind + f'B_r = T.alloc_fragment({(bn, bk) if tb else (bk, bn)}, "{ab}")')
    k.append(ind + f'C_l = T.alloc_fragment(({bm}, {bn}), "{acc}")')
    if tile_loop:
        k.append(ind + f"for by, bx in T.Persistent([T.ceildiv({M}, {bm}), "
                       f"T.ceildiv({N}, {bn})], {tile_loop[0]}, bid, "
                       f"group_size={tile_loop[1]}):")
        head, k = k, []
    if s["init"] == "clear":
        k.append(ind + "T.clear(C_l)")
    elif s["init"] == "input":
        k.append(ind + f"T.copy(C0[by * {bm}, bx * {bn}], C_l)")
    if s.get("a_panel"):
        k.append(ind + f"T.copy(A[by * {bm}, 0], A_p)")
    loop = (f"T.Pipelined({nk}, num_stages={s['stages']})" if s["loop"] == "pipelined"
            else f"T.serial({nk})")
    k.append(ind + f"for k in {loop}:")
    a_src = f"A[k * {bk}, by * {bm}]" if ta else f"A[by * {bm}, k * {bk}]"
    b_src = f"B[bx * {bn}, k * {bk}]" if tb else f"B[k * {bk}, bx * {bn}]"
    if s.get("a_panel"):
        a_src = f"A_p[0, k * {bk}]"
    k.append(ind * 2 + f"T.copy({a_src}, A_s)")
    k.append(ind * 2 + f"T.copy({b_src}, B_s)")
    a_op, b_op = "A_s", "B_s"
    if s["a_regs"]:
        k.append(ind * 2 + "T.copy(A_s, A_r)")
        a_op = "A_r"
    if s.get("b_regs"):
        k.append(ind * 2 + "T.copy(B_s, B_r)")
        b_op = "B_r"
    extra = []
    if ta:
        extra.append("transpose_A=True")
    if tb:
        extra.append("transpose_B=True")
    if s["init"] == "clear_accum":
        extra.append("clear_accum=(k == 0)")
    if s["policy"] != "Square":
        extra.append(f"policy=T.GemmWarpPolicy.{s['policy']}")
    k.append(ind * 2 + f"T.gemm({a_op}, {b_op}, C_l{''.join(', ' + e for e in extra)})")
    ep = s["epilogue"]
    if ep == "bias":
        k.append(ind + f'bias_f = T.alloc_fragment(({bn},), "{acc}")')
        k.append(ind + f"T.copy(bias[bx * {bn}], bias_f)")
    if ep != "none":
        body = {"relu": "T.max(C_l[i, j], 0)", "scale": "C_l[i, j] * 0.5",
                "bias": "C_l[i, j] + bias_f[j]"}[ep]
        k.append(ind + f"for i, j in T.Parallel({bm}, {bn}):")
        k.append(ind * 2 + f"C_l[i, j] = {body}")
    if s["store"] == "shared":
        k.append(ind + f'C_s = T.alloc_shared(({bm}, {bn}), "{out}")')
        k.append(ind + "T.copy(C_l, C_s)")
        k.append(ind + f"T.copy(C_s, C[by * {bm}, bx * {bn}])")
    else:
        k.append(ind + f"T.copy(C_l, C[by * {bm}, bx * {bn}])")
    feats = ("gemm", f"gemm_{ab}_{acc}", f"trans{int(ta)}{int(tb)}", s["loop"],
             "a_regs" if s["a_regs"] else "a_shared", s["init"], ep) + \
        (("b_regs",) if s.get("b_regs") else ())
    family = "gemm"
    if tile_loop:  # the body once more indented, inside the tile loop
        k = head + [ind + line for line in k]
        family, feats = "persistent", feats + ("persistent",) + \
            (("a_panel",) if s.get("a_panel") else ())
    return Case(family, seed, kernel_source(params, k), params,
                lambda rng: _inputs(rng, params), lambda arrs: _oracle(s, arrs),
                spec=s, features=feats)


def _inputs(rng, params):
    out = {}
    for p in params:
        if p.role != "in":
            continue
        if p.dtype == "int8":
            out[p.name] = random_values(rng, p.shape, p.dtype, -8, 8)
        elif p.dtype == "int32":
            out[p.name] = random_values(rng, p.shape, p.dtype, -100, 100)
        else:
            out[p.name] = random_values(rng, p.shape, p.dtype, -2, 2)
    return out


def _oracle(s, arrs):
    ab, acc, out = s["ab"], s["acc"], s["out"]
    K = s["K"]
    A = np.asarray(arrs["A"], np.float64)
    B = np.asarray(arrs["B"], np.float64)
    A = A.T if s["trans_a"] else A
    B = B.T if s["trans_b"] else B
    is_int = acc == "int32"
    C = A @ B
    mag = np.abs(A) @ np.abs(B)
    if is_int:
        if s["init"] == "input":
            C = C + arrs["C0"]
        if s["epilogue"] == "relu":
            C = np.maximum(C, 0)
        elif s["epilogue"] == "scale":  # computed in float32, stored by C conversion (trunc)
            C = np.trunc(C * 0.5)
        elif s["epilogue"] == "bias":
            C = C + arrs["bias"][None, :]
        C = ((C.astype(np.int64) + 2 ** 31) % 2 ** 32) - 2 ** 31
        return {"C": (C, np.zeros(C.shape))}
    # rounding: TF32 inputs (10 mantissa bits), accumulation in `acc` every k step
    err = 2.0 ** -10 * 2 * mag if ab == "float32" else 0.0
    err = err + (K / 8 + 2) * EPS[acc] * mag
    if ab.startswith("float8"):
        # Hopper's FP8 tensor cores keep only about 14 bits while accumulating inside an
        # instruction (DeepSeek-V3 report, section 3.3.2), whatever the accumulator dtype
        err = err + (K / 32 + 2) * 2.0 ** -13 * mag
    if s["init"] == "input":
        C = C + arrs["C0"]
        err = err + EPS[acc] * np.abs(C)
    if s["epilogue"] == "relu":
        C = np.maximum(C, 0)
    elif s["epilogue"] == "scale":
        C = C * 0.5
        err = err * 0.5
    elif s["epilogue"] == "bias":
        C = C + arrs["bias"][None, :]
        err = err + EPS[acc] * np.abs(C)
    tol = 2 * (err + EPS[out] * np.abs(C)) + 1e-30
    return {"C": (round_to(C, out), tol)}
