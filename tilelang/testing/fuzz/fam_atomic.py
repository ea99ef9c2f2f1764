"""Family "atomic": split accumulation through atomics, in scalar form (inside `T.Parallel`),
tile form (`T.atomic_add(region, tile)`, from shared tiles also with `use_tma=True`: a TMA
reduction on sm_90a where it applies) and at block level (done by every thread, §0).

    Z[p, q] = combine(Z0[p, q], X[0, p, q], ..., X[S-1, p, q])     (block (bx, by, s) adds X[s])
    or, with mode "colsum":  z[q] = z0[q] + sum_p X[0, p, q]       (many adds to one element)
    Cnt[t] = Cnt0[t] + threads * #(blocks with bx % len(Cnt) == t)   (block-level counter)

Inputs are integer-valued (floats included), so every result is exact in any order and the
comparison is exact.
"""

from __future__ import annotations

import numpy as np

from .case import Case, Param, kernel_source, pick


def sample(rng, seed: int) -> Case:
    dt = pick(rng, ("float32", "float32", "int32", "float16"))
    mode = pick(rng, ("split", "split", "colsum"))
    op = "add" if dt == "float16" or mode == "colsum" else pick(rng, ("add", "add", "max",
                                                                      "min"))
    bm = pick(rng, (1, 4, 8, 16, 32))
    bn = pick(rng, (4, 8, 16, 32, 64))
    spec = dict(dt=dt, mode=mode, op=op, bm=bm, bn=bn,
                threads=pick(rng, (32, 64, 128, 256)),
                M=int(rng.integers(1, 3 * bm + 3)), N=int(rng.integers(1, 3 * bn + 3)),
                S=int(rng.integers(1, 5)) if mode == "split" else 1,
                form=(pick(rng, ("scalar", "tile", "tile_region")) if op == "add" and
                      mode == "split" else "scalar"),
                src_scope=pick(rng, ("fragment", "shared")),
                counter=int(pick(rng, (0, 0, 1, 3))))
    # added later, drawn from a stream of its own: every other choice of a seed is unchanged
    # (a shared-tile atomic of an earlier seed may now ask for the TMA; the result is the same)
    spec["use_tma"] = bool(spec["form"] != "scalar" and spec["src_scope"] == "shared"
                           and np.random.default_rng([seed, 0x7A3]).random() < 0.5)
    return build(spec, seed)


def build(s: dict, seed: int) -> Case:
    dt, mode, op, bm, bn, M, N, S = (s[k] for k in ("dt", "mode", "op", "bm", "bn", "M", "N",
                                                    "S"))
    params = [Param("X", (S, M, N), dt)]
    params.append(Param("Z", (M, N) if mode == "split" else (N,), dt, "inout"))
    if s["counter"]:
        params.append(Param("Cnt", (s["counter"],), "int32", "inout"))
    ind = "    "
    k = [f"with T.Kernel(T.ceildiv({N}, {bn}), T.ceildiv({M}, {bm}), {S}, "
         f"threads={s['threads']}) as (bx, by, bz):"]
    alloc = "T.alloc_shared" if s["src_scope"] == "shared" else "T.alloc_fragment"
    k.append(ind + f'F = {alloc}(({bm}, {bn}), "{dt}")')
    k.append(ind + f"T.copy(X[bz, by * {bm}, bx * {bn}], F)")
    fn = f"T.atomic_{op}"
    tma = ", use_tma=True" if s.get("use_tma") else ""  # a TMA reduction where it applies
    if mode == "colsum":
        k.append(ind + f"for i, j in T.Parallel({bm}, {bn}):")
        k.append(ind * 2 + f"{fn}(Z[bx * {bn} + j], F[i, j])")
    elif s["form"] == "scalar":
        k.append(ind + f"for i, j in T.Parallel({bm}, {bn}):")
        k.append(ind * 2 + f"{fn}(Z[by * {bm} + i, bx * {bn} + j], F[i, j])")
    elif s["form"] == "tile":
        k.append(ind + f"{fn}(Z[by * {bm}, bx * {bn}], F{tma})")
    else:
        k.append(ind + f"{fn}(Z[by * {bm}:by * {bm} + {bm}, bx * {bn}:bx * {bn} + {bn}], "
                       f"F{tma})")
    if s["counter"]:
        k.append(ind + f"T.atomic_add(Cnt[bx % {s['counter']}], 1)")
    feats = ("atomic", f"atomic_{op}", mode, s["form"]) + (("block_atomic",) if s["counter"]
                                                         else ()) + \
        (("use_tma",) if s.get("use_tma") else ())
    return Case("atomic", seed, kernel_source(params, k), params,
                lambda rng: _inputs(rng, params), lambda arrs: _oracle(s, arrs),
                spec=s, features=feats)


def _inputs(rng, params):
    out = {}
    for p in params:
        lo, hi = (-3, 3) if p.dtype == "float16" else (-20, 20)
        v = rng.integers(lo, hi + 1, size=p.shape)
        out[p.name] = v.astype(np.int64 if p.dtype == "int32" else np.float64)
    return out


def _oracle(s, arrs):
    X = np.asarray(arrs["X"])
    Z0 = np.asarray(arrs["Z"])
    if s["mode"] == "colsum":
        z = Z0 + X[0].sum(0)
    elif s["op"] == "add":
        z = Z0 + X.sum(0)
    elif s["op"] == "max":
        z = np.maximum(Z0, X.max(0))
    else:
        z = np.minimum(Z0, X.min(0))
    out = {"Z": (z, np.zeros(z.shape))}
    if s["counter"]:
        c = np.asarray(arrs["Cnt"]).copy()
        gx = -(-s["N"] // s["bn"])
        gy = -(-s["M"] // s["bm"])
        for bx in range(gx):
            c[bx % s["counter"]] += s["threads"] * gy * s["S"]
        out["Cnt"] = (c, np.zeros(c.shape))
    return out
