"""Family "ew": tiles copied in with offsets and ragged edges, element-wise `T.Parallel` chains
that broadcast lower-rank fragments (a row vector R[i], a column vector C[j]), casts, and a
store back (tile op, through shared memory, or element stores).

Program shape (one block per (bm, bn) output tile):

    Z[p, q] = chain(X[p + oy, q + ox], Y[p + gy, q + gx], r[p + ry], c[q + cx])

where reads outside the tensors give 0 (TileLang's guarded global loads), every statement of the
chain stores into the tile (rounding to its dtype), and Z is written for every (p, q) in range.
With an empty chain the program may also be a single global-to-global region copy ("g2g").
"""

from __future__ import annotations

import numpy as np

from .case import EPS, TINY, Case, Param, pick, random_values, round_to
from . import expr as E

FLOAT_IN = ("float32", "float16", "bfloat16")
TILE_M = (1, 2, 3, 4, 8, 16, 32, 64)
TILE_N = (1, 3, 5, 8, 12, 16, 24, 32, 40, 64, 128)


def sample(rng, seed: int) -> Case:
    is_int = rng.random() < 0.2
    if is_int:
        xd = fd = zd = "int32"
    else:
        xd = pick(rng, FLOAT_IN)
        fd = pick(rng, ("float32", xd))
        zd = pick(rng, ("float32", "float16", "bfloat16", fd))
    while True:
        bm, bn = pick(rng, TILE_M), pick(rng, TILE_N)
        if bm * bn <= 4096:
            break
    threads = pick(rng, (32, 64, 128, 128, 256))
    M = int(rng.integers(1, 3 * bm + 5))
    N = int(rng.integers(1, 3 * bn + 5))
    dyn = rng.random() < 0.2
    scope = "shared" if rng.random() < 0.2 else "fragment"
    has_g, has_r, has_c = (rng.random() < p for p in (0.5, 0.5, 0.4))

    def off():
        return int(pick(rng, (0, 0, 0, 1, 2, -1, -3, 5)))

    spec = dict(xd=xd, fd=fd, zd=zd, bm=bm, bn=bn, threads=threads, M=M, N=N, dyn=dyn,
                scope=scope, oy=off(), ox=off(), gy=off(), gx=off(), ry=off(), cx=off(),
                has_g=has_g, has_r=has_r, has_c=has_c,
                load=pick(rng, ("copy", "copy", "shared", "parallel", "region")),
                gload=pick(rng, ("copy", "parallel")),
                vload=pick(rng, ("copy", "parallel")),
                store=pick(rng, ("copy", "copy", "shared", "parallel")))
    # keep offsets non-negative where an index would be negative in every block: a single
    # block row (see SEMANTICS §2), or blocks of tiny tiles that all lie within the offset
    # (3 blocks of 1 column shifted by -3): an element index negative for every value counts
    # from the end (SEMANTICS, negative indices), which the oracle's zero fill does not model
    if M <= bm or dyn or -(-M // bm) * bm <= 3:
        spec.update(oy=abs(spec["oy"]), gy=abs(spec["gy"]), ry=abs(spec["ry"]))
    if N <= bn or -(-N // bn) * bn <= 3:
        spec.update(ox=abs(spec["ox"]), gx=abs(spec["gx"]), cx=abs(spec["cx"]))
    leaves = ["F", "F"] + [n for n, h in (("G", has_g), ("R", has_r), ("C", has_c)) if h]
    stmts = []
    for _ in range(int(rng.integers(0, 5))):
        if has_r and rng.random() < 0.2:  # a 1-D statement on the row vector
            k = int(pick(rng, E.INT_CONSTS)) if is_int else float(pick(rng, E.FLOAT_CONSTS))
            stmts.append(("R", k))
        else:
            stmts.append(("F", E.random_expr(rng, leaves, is_int, depth=int(rng.integers(1, 3)))))
    spec["stmts"] = stmts
    spec["grouping"] = [bool(rng.random() < 0.4) for _ in stmts]  # share the previous loop
    if rng.random() < 0.08:  # a plain global-to-global region copy, cast on the way
        spec.update(store="g2g", stmts=[], grouping=[], has_g=False, has_r=False, has_c=False)
    return build(spec, seed)


def build(spec: dict, seed: int) -> Case:
    s = spec
    xd, fd, zd, bm, bn = s["xd"], s["fd"], s["zd"], s["bm"], s["bn"]
    M, N = s["M"], s["N"]
    Ms = "m" if s["dyn"] else str(M)
    params = [Param("X", (M, N), xd)]
    if s["has_g"]:
        params.append(Param("Y", (M, N), xd))
    if s["has_r"]:
        params.append(Param("r", (M,), xd))
    if s["has_c"]:
        params.append(Param("c", (N,), xd))
    params.append(Param("Z", (M, N), zd, "out"))
    src = ["import tilelang.language as T", ""]
    if s["dyn"]:
        src.append('m = T.dynamic("m")')
        src.append("")
    shapes = {"X": f"({Ms}, {N})", "Y": f"({Ms}, {N})", "r": f"({Ms},)", "c": f"({N},)",
              "Z": f"({Ms}, {N})"}
    sig = ", ".join(f'{p.name}: T.Tensor({shapes[p.name]}, "{p.dtype}")' for p in params)
    src += ["", "@T.prim_func", f"def main({sig}):"]
    body = [f"with T.Kernel(T.ceildiv({N}, {bn}), T.ceildiv({Ms}, {bm}), "
            f"threads={s['threads']}) as (bx, by):"]
    ind = "    "
    alloc = "T.alloc_shared" if s["scope"] == "shared" else "T.alloc_fragment"
    k = [ind + f'F = {alloc}(({bm}, {bn}), "{fd}")']
    row0, col0 = f"by * {bm}", f"bx * {bn}"

    def start(r_off, c_off):
        return f"{row0}{_o(r_off)}", f"{col0}{_o(c_off)}"

    # ---- loads --------------------------------------------------------------------------------
    r, c = start(s["oy"], s["ox"])
    ld = s["load"]
    if ld == "copy":
        k.append(ind + f"T.copy(X[{r}, {c}], F)")
    elif ld == "region":
        k.append(ind + f"T.copy(X[{r}:{r} + {bm}, {c}:{c} + {bn}], F)")
    elif ld == "shared":
        k.append(ind + f'XS = T.alloc_shared(({bm}, {bn}), "{xd}")')
        k.append(ind + f"T.copy(X[{r}, {c}], XS)")
        k.append(ind + "T.copy(XS, F)")
    else:
        k.append(ind + f"for i, j in T.Parallel({bm}, {bn}):")
        k.append(ind * 2 + f"F[i, j] = X[{r} + i, {c} + j]")
    if s["has_g"]:
        k.append(ind + f'G = T.alloc_fragment(({bm}, {bn}), "{fd}")')
        r, c = start(s["gy"], s["gx"])
        if s["gload"] == "copy":
            k.append(ind + f"T.copy(Y[{r}, {c}], G)")
        else:
            k.append(ind + f"for i, j in T.Parallel({bm}, {bn}):")
            k.append(ind * 2 + f"G[i, j] = Y[{r} + i, {c} + j]")
    if s["has_r"]:
        k.append(ind + f'R = T.alloc_fragment(({bm},), "{fd}")')
        r, _ = start(s["ry"], 0)
        if s["vload"] == "copy":
            k.append(ind + f"T.copy(r[{r}], R)")
        else:
            k.append(ind + f"for i in T.Parallel({bm}):")
            k.append(ind * 2 + f"R[i] = r[{r} + i]")
    if s["has_c"]:
        k.append(ind + f'C = T.alloc_fragment(({bn},), "{fd}")')
        _, c = start(0, s["cx"])
        if s["vload"] == "copy":
            k.append(ind + f"T.copy(c[{c}], C)")
        else:
            k.append(ind + f"for j in T.Parallel({bn}):")
            k.append(ind * 2 + f"C[j] = c[{c} + j]")
    # ---- chain --------------------------------------------------------------------------------
    prev = None
    for (kind, payload), share in zip(s["stmts"], s["grouping"]):
        if kind == "R":
            line = f"R[i] = R[i] * {payload!r} + {payload!r}"
            if not (share and prev == "R"):
                k.append(ind + f"for i in T.Parallel({bm}):")
            k.append(ind * 2 + line)
        else:
            line = f"F[i, j] = {E.render(payload)}"
            if not (share and prev == "F"):
                k.append(ind + f"for i, j in T.Parallel({bm}, {bn}):")
            k.append(ind * 2 + line)
        prev = kind
    # ---- store --------------------------------------------------------------------------------
    st = s["store"]
    if st == "g2g":  # replaces the whole body: no tile at all
        r, c = start(s["oy"], s["ox"])
        k = [ind + f"T.copy(X[{r}:{r} + {bm}, {c}:{c} + {bn}], "
             f"Z[{row0}:{row0} + {bm}, {col0}:{col0} + {bn}])"]
    elif st == "copy":
        k.append(ind + f"T.copy(F, Z[{row0}, {col0}])")
    elif st == "shared":
        k.append(ind + f'ZS = T.alloc_shared(({bm}, {bn}), "{zd}")')
        k.append(ind + "T.copy(F, ZS)")
        k.append(ind + f"T.copy(ZS, Z[{row0}, {col0}])")
    else:
        k.append(ind + f"for i, j in T.Parallel({bm}, {bn}):")
        k.append(ind * 2 + f"Z[{row0} + i, {col0} + j] = F[i, j]")
    body += k
    src += ["    " + ln for ln in body]
    source = "\n".join(src) + "\n"
    feats = ["elementwise", f"tile{bm}x{bn}", s["load"], s["store"]]
    if s["has_r"] or s["has_c"]:
        feats.append("broadcast")
    if s["dyn"]:
        feats.append("dynamic")
    return Case("ew", seed, source, params, lambda rng: _inputs(rng, params),
                lambda arrs: _oracle(s, arrs), spec=s, features=tuple(feats))


def _o(v: int) -> str:
    return "" if v == 0 else (f" + {v}" if v > 0 else f" - {-v}")


def _inputs(rng, params):
    out = {}
    for p in params:
        if p.role == "in":
            out[p.name] = random_values(rng, p.shape, p.dtype, -20 if p.dtype == "int32" else -2,
                                        20 if p.dtype == "int32" else 2)
    return out


def _shift(a, offs):
    """out[p] = a[p + off] (per dim), 0 where that is outside `a`."""
    out = np.zeros_like(a)
    src, dst = [], []
    for n, o in zip(a.shape, offs):
        lo, hi = max(0, -o), min(n, n - o)
        if hi <= lo:
            return out
        dst.append(slice(lo, hi))
        src.append(slice(lo + o, hi + o))
    out[tuple(dst)] = a[tuple(src)]
    return out


def _wrap32(v):
    return ((v + 2 ** 31) % 2 ** 32) - 2 ** 31


def _oracle(s, arrs):
    fd, zd = s["fd"], s["zd"]
    is_int = fd == "int32"

    def load(a, offs):
        v = _shift(a, offs)
        if is_int:
            return v, 0.0
        return round_to(v, fd), 0.0  # loading rounds the input to the tile dtype (exact or RNE)

    env = {"F": load(arrs["X"], (s["oy"], s["ox"]))}
    if s["has_g"]:
        env["G"] = load(arrs["Y"], (s["gy"], s["gx"]))
    if s["has_r"]:
        v, e = load(arrs["r"], (s["ry"],))
        env["R"] = (v[:, None], e)
    if s["has_c"]:
        v, e = load(arrs["c"], (s["cx"],))
        env["C"] = (v[None, :], e)
    u = 0.0 if is_int else EPS[fd]
    for kind, payload in s["stmts"]:
        if kind == "R":
            v, e = env["R"]
            if is_int:
                env["R"] = (_wrap32(v * payload + payload), 0.0)
            else:
                nv = v * payload + payload
                env["R"] = (round_to(nv, fd), e * abs(payload) + 2 * u * np.abs(nv) + u)
            continue
        v, e = E.evaluate(payload, env, fd)
        v = np.broadcast_to(v, env["F"][0].shape)
        if is_int:
            env["F"] = (_wrap32(v), 0.0)
        else:
            env["F"] = (round_to(v, fd), e + u * np.abs(v) + TINY[fd])
    v, e = env["F"]
    if s["store"] == "g2g":  # no tile: X is cast straight to Z's dtype
        v, e = _shift(arrs["X"], (s["oy"], s["ox"])), 0.0
    if is_int:
        return {"Z": (v.astype(np.int64), np.zeros(v.shape))}
    z = round_to(v, zd)
    tol = 2 * (np.broadcast_to(e, v.shape) + EPS[zd] * np.abs(v) + TINY.get(zd, 0.0)) + 1e-30
    return {"Z": (z, tol)}
