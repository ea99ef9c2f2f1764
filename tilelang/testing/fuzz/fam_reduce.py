"""Family "reduce": `T.reduce_*` over either axis of a tile, accumulated over a (pipelined)
loop of tiles, with a broadcast epilogue.

Program shape for dim=1 (dim=0 is the transpose): block `by` owns rows [by*bm, by*bm + bm); a
loop over kt walks column tiles X[by*bm, kt*bn] (reads past the edge give 0, and those zeros
take part in the reduction); each tile is reduced and combined into `acc` (with
`clear=False`, or through a cleared temporary and an element-wise combine); O[p] = acc. With
`bcast`, Z[p, q] = X[p, q] - acc[p] for single-tile rows.
"""

from __future__ import annotations

import numpy as np

from .case import EPS, Case, Param, kernel_source, pick, random_values, round_to

OPS_FLOAT = ("sum", "max", "min", "absmax", "abssum")
OPS_INT = ("sum", "max", "min", "absmax", "bitand", "bitor", "bitxor")
INIT = {  # op -> choices of the initial accumulator value (rendered, numeric)
    "sum": (("0", 0.0), ("1.5", 1.5)),
    "abssum": (("0", 0.0), ("0.5", 0.5)),
    "max": (("-T.infinity(\"{ad}\")", -np.inf), ("-1.0", -1.0)),
    "min": (("T.infinity(\"{ad}\")", np.inf), ("1.0", 1.0)),
    "absmax": (("0", 0.0), ("0.5", 0.5)),
}
INIT_INT = {
    "sum": (("0", 0), ("3", 3)), "max": (("-1000", -1000), ("-2", -2)),
    "min": (("1000", 1000), ("2", 2)), "absmax": (("0", 0), ("4", 4)),
    "bitand": (("-1", -1), ("126", 126)), "bitor": (("0", 0), ("1", 1)),
    "bitxor": (("0", 0), ("5", 5)),
}
COMBINE = {"sum": "{a} + {b}", "abssum": "{a} + {b}", "max": "T.max({a}, {b})",
           "min": "T.min({a}, {b})", "absmax": "T.max({a}, {b})", "bitand": "{a} & {b}",
           "bitor": "{a} | {b}", "bitxor": "{a} ^ {b}"}


def sample(rng, seed: int) -> Case:
    is_int = rng.random() < 0.25
    xd = "int32" if is_int else pick(rng, ("float32", "float16", "bfloat16"))
    op = pick(rng, OPS_INT if is_int else OPS_FLOAT)
    ad = "int32" if is_int else ("float32" if op in ("sum", "abssum") else
                                 pick(rng, ("float32", xd)))
    dim = int(rng.integers(2))
    bm = pick(rng, (1, 2, 4, 8, 16, 32, 64))
    bn = pick(rng, (4, 8, 16, 32, 64, 128))
    while bm * bn > 4096:
        bn //= 2
    threads = pick(rng, (32, 64, 128, 256))
    M = int(rng.integers(1, 3 * bm + 3))
    N = int(rng.integers(1, 3 * bn + 3))
    inits = INIT_INT[op] if is_int else INIT[op]
    spec = dict(xd=xd, ad=ad, op=op, dim=dim, dim_text=pick(rng, ((str(dim),), (str(dim - 2),)))[0],
                bm=bm, bn=bn, threads=threads, M=M, N=N,
                src_scope=pick(rng, ("fragment", "fragment", "shared")),
                combine=("tmp" if op == "abssum" else pick(rng, ("clear_false", "tmp"))),
                init=inits[int(rng.integers(len(inits)))],
                loop=pick(rng, ("serial", "pipelined")), stages=int(rng.integers(0, 4)),
                store=pick(rng, ("copy", "parallel")),
                bcast=bool(rng.random() < 0.4))
    return build(spec, seed)


def build(s: dict, seed: int) -> Case:
    xd, ad, op, dim, bm, bn = s["xd"], s["ad"], s["op"], s["dim"], s["bm"], s["bn"]
    M, N = s["M"], s["N"]
    # the block owns `own` along the kept axis; the loop walks `walk` along the reduced one
    n_tiles = -(-N // bn) if dim == 1 else -(-M // bm)
    own = bm if dim == 1 else bn
    bcast = s["bcast"] and n_tiles == 1
    params = [Param("X", (M, N), xd), Param("O", ((M if dim == 1 else N),), ad, "out")]
    if bcast:
        params.append(Param("Z", (M, N), ad, "out"))
    grid = f"T.ceildiv({M}, {bm})" if dim == 1 else f"T.ceildiv({N}, {bn})"
    ind = "    "
    k = [f"with T.Kernel({grid}, threads={s['threads']}) as b:"]
    alloc = "T.alloc_shared" if s["src_scope"] == "shared" else "T.alloc_fragment"
    k.append(ind + f'S = {alloc}(({bm}, {bn}), "{xd}")')
    k.append(ind + f'acc = T.alloc_fragment(({own},), "{ad}")')
    init_text = s["init"][0].format(ad=ad)
    k.append(ind + f"T.fill(acc, {init_text})")
    if s["combine"] == "tmp":
        k.append(ind + f'tmp = T.alloc_fragment(({own},), "{ad}")')
    loop = (f"T.Pipelined({n_tiles}, num_stages={s['stages']})" if s["loop"] == "pipelined"
            else f"T.serial({n_tiles})")
    k.append(ind + f"for kt in {loop}:")
    start = f"X[b * {bm}, kt * {bn}]" if dim == 1 else f"X[kt * {bm}, b * {bn}]"
    k.append(ind * 2 + f"T.copy({start}, S)")
    red = f"T.reduce_{op}"
    dt = s["dim_text"]
    if s["combine"] == "clear_false":
        k.append(ind * 2 + f"{red}(S, acc, dim={dt}, clear=False)")
    else:
        k.append(ind * 2 + (f"{red}(S, tmp, dim={dt})"))
        k.append(ind * 2 + f"for i in T.Parallel({own}):")
        k.append(ind * 3 + "acc[i] = " + COMBINE[op].format(a="acc[i]", b="tmp[i]"))
    if s["store"] == "copy":
        k.append(ind + f"T.copy(acc, O[b * {own}])")
    else:
        k.append(ind + f"for i in T.Parallel({own}):")
        k.append(ind * 2 + f"O[b * {own} + i] = acc[i]")
    if bcast:
        k.append(ind + f"for i, j in T.Parallel({bm}, {bn}):")
        if dim == 1:
            k.append(ind * 2 + f"Z[b * {bm} + i, j] = S[i, j] - acc[i]")
        else:
            k.append(ind * 2 + f"Z[i, b * {bn} + j] = S[i, j] - acc[j]")
    feats = ("reduce", f"reduce_{op}", f"dim{dim}", s["loop"], s["combine"])
    return Case("reduce", seed, kernel_source(params, k), params,
                lambda rng: {"X": random_values(rng, (M, N), xd,
                                                -50 if xd == "int32" else -2,
                                                50 if xd == "int32" else 2)},
                lambda arrs: _oracle(s, arrs, bcast, n_tiles), spec=s, features=feats)


def _reduce(op, x, axis):
    if op == "sum":
        return x.sum(axis)
    if op == "abssum":
        return np.abs(x).sum(axis)
    if op == "max":
        return x.max(axis)
    if op == "min":
        return x.min(axis)
    if op == "absmax":
        return np.abs(x).max(axis)
    uf = {"bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor}[op]
    return uf.reduce(x, axis=axis)


def _combine(op, a, b):
    if op in ("sum", "abssum"):
        return a + b
    if op in ("max", "absmax"):
        return np.maximum(a, b)
    if op == "min":
        return np.minimum(a, b)
    return _reduce(op, np.stack([np.broadcast_to(a, b.shape), b]), 0)


def _oracle(s, arrs, bcast, n_tiles):
    op, dim, bm, bn, ad = s["op"], s["dim"], s["bm"], s["bn"], s["ad"]
    X = np.asarray(arrs["X"])
    M, N = X.shape
    is_int = ad == "int32"
    # the blocks cover a padded grid; padded elements read as 0 and take part
    Mp = -(-M // bm) * bm
    Np = -(-N // bn) * bn
    P = np.zeros((Mp, Np), X.dtype)
    P[:M, :N] = X
    if not is_int:
        P = round_to(P, ad) if s["xd"] != ad else P
    red = _reduce(op, P, dim)
    init = s["init"][1]
    if is_int:
        acc = _combine(op, np.int64(init), red.astype(np.int64))
        acc = ((acc + 2 ** 31) % 2 ** 32) - 2 ** 31
        tol = np.zeros(acc.shape)
    else:
        acc = _combine(op, np.float64(init), red)
        if op in ("sum", "abssum"):
            n = P.shape[dim] + n_tiles
            tol = 2 * n * EPS[ad] * (np.abs(P).sum(dim) + abs(init)) + 1e-30
        else:
            tol = np.zeros(acc.shape)
        acc_r = round_to(acc, ad)
        tol = tol + EPS[ad] * np.abs(acc)
        acc = acc_r
    out_len = M if dim == 1 else N
    res = {"O": (acc[:out_len], tol[:out_len])}
    if bcast:
        if dim == 1:
            z = X.astype(np.float64) - acc[:M, None]
            zt = np.broadcast_to(tol[:M, None], z.shape)
        else:
            z = X.astype(np.float64) - acc[None, :N]
            zt = np.broadcast_to(tol[None, :N], z.shape)
        if is_int:
            res["Z"] = (((z.astype(np.int64) + 2 ** 31) % 2 ** 32) - 2 ** 31, np.zeros(z.shape))
        else:
            res["Z"] = (round_to(z, ad), zt + 2 * EPS[ad] * np.abs(z) + 1e-30)
    return res
