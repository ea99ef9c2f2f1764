"""Family "fragments": fragments indexed the ways the reference's examples index them, and the
code generation around them (docs/layouts.md, "Fragments indexed by anything"). One of:

  serial     flash decoding's combine: rows of `L[k, i]` (k a serial or pipelined loop's
             variable) read through `T.copy(L[k, :], row)` and directly inside T.Parallel,
             after a reduction over k;  O[i, j] = max_k L[k, i] + sum_k L[k, i] * P[k, i, j]
  runtime    block-sparse attention's `if m[k] != 0:` in a pipelined loop: a fragment read and
             written outside T.Parallel at runtime indices (held whole by every thread), around
             copies and, sometimes, a gemm;  C = sum over set k of tile k;  cnt = m[...] sums
  inner      deepseek_mhc's post kernel: a serial loop inside T.Parallel indexing two fragments
             by its variable;  X[o, j] = c[o] d[j] + sum_i a[i, o] b[i, j]
  shifted    the sparse MLA backward's split store: `acc[bi + s * part, d]` (s a short serial
             loop) under `if bi < part`, from a gemm accumulator or a copied tile
  regs       `T.gemm` with B (and A) in registers, every transpose (the gemm family's programs
             with register operands)
  paged      a value bound in a pipelined loop (a page table read) used by two copies
  fp8        casts between float8 e4m3/e5m2 and float16 / bfloat16 / float32, element-wise and
             through fragments
  staged     a gemm accumulator read at a runtime row inside T.Parallel: no register layout
             serves it, the loop reads a shared copy

Every program is valid TileLang and must build for sm_80 and sm_90a (fp8 gemms aside); the
oracle is numpy, from the description alone.
"""

from __future__ import annotations

import numpy as np

from . import fam_gemm
from .case import EPS, Case, Param, kernel_source, pick, random_values, round_to

KINDS = ("serial", "runtime", "inner", "shifted", "regs", "paged", "fp8", "staged")
IND = "    "


def sample(rng, seed: int) -> Case:
    kind = pick(rng, KINDS)
    return {"serial": _serial, "runtime": _runtime, "inner": _inner, "shifted": _shifted,
            "regs": _regs, "paged": _paged, "fp8": _fp8, "staged": _staged}[kind](rng, seed)


def _case(kind, seed, params, lines, inputs, oracle, spec, feats=()):
    spec = dict(spec, kind=kind)
    return Case("fragments", seed, kernel_source(params, lines), params, inputs, oracle,
                spec=spec, features=("fragments", kind) + tuple(feats))


def _sum_tol(dt, terms, n):
    """Rounding bound of a length-n float accumulation in `dt` of |terms| summing to terms."""
    return 2 * (n + 2) * EPS[dt] * terms + 1e-30


# ---- serial: L[k, i] with k a serial / pipelined variable ------------------------------------

def _serial(rng, seed):
    S = int(rng.integers(1, 9))
    M = int(pick(rng, (8, 16, 32, 64, 128)))
    D = int(pick(rng, (4, 8, 16, 32)))
    threads = int(pick(rng, (32, 64, 128, 256)))
    B = int(rng.integers(1, 4))
    dt = pick(rng, ("float32", "float16"))
    loop = pick(rng, ("serial", "pipelined"))
    via = pick(rng, ("copy", "parallel"))
    params = [Param("L", (B, S, M), dt), Param("P", (B, S, M, D), "float32"),
              Param("O", (B, M, D), "float32", "out")]
    k = [f"with T.Kernel({B}, threads={threads}) as b:",
         IND + f'L_f = T.alloc_fragment(({S}, {M}), "{dt}")',
         IND + f'mx = T.alloc_fragment(({M},), "{dt}")',
         IND + f'row = T.alloc_fragment(({M},), "float32")',
         IND + f'acc = T.alloc_fragment(({M}, {D}), "float32")',
         IND + f'P_f = T.alloc_fragment(({M}, {D}), "float32")',
         IND + "T.copy(L[b, :, :], L_f)",
         IND + "T.reduce_max(L_f, mx, dim=0)",
         IND + "for i, j in T.Parallel(%d, %d):" % (M, D),
         IND * 2 + "acc[i, j] = mx[i]"]
    head = (f"T.Pipelined({S}, num_stages={int(rng.integers(1, 3))})" if loop == "pipelined"
            else f"T.serial({S})")
    k.append(IND + f"for k in {head}:")
    if via == "copy":
        k.append(IND * 2 + "T.copy(L_f[k, :], row)")
    else:
        k.append(IND * 2 + f"for i in T.Parallel({M}):")
        k.append(IND * 3 + "row[i] = L_f[k, i]")
    k.append(IND * 2 + "T.copy(P[b, k, :, :], P_f)")
    k.append(IND * 2 + f"for i, j in T.Parallel({M}, {D}):")
    direct = pick(rng, ("row[i]", "L_f[k, i]"))
    k.append(IND * 3 + f"acc[i, j] += {direct} * P_f[i, j]")
    k.append(IND + "T.copy(acc, O[b, :, :])")

    def oracle(arrs):
        L = np.asarray(arrs["L"], np.float64)
        P = np.asarray(arrs["P"], np.float64)
        mx = L.max(axis=1)
        terms = L[..., None] * P
        out = mx[..., None] + terms.sum(axis=1)
        mag = np.abs(mx)[..., None] + np.abs(terms).sum(axis=1)
        return {"O": (out, _sum_tol("float32", mag, S + 1))}

    spec = dict(S=S, M=M, D=D, threads=threads, B=B, dt=dt, loop=loop, via=via)
    return _case("serial", seed, params, k, _inputs(params), oracle, spec, (loop, via))


# ---- runtime: a fragment read and written outside T.Parallel ---------------------------------

def _runtime(rng, seed):
    nblk = int(rng.integers(1, 9))
    gemm = bool(rng.random() < 0.4)
    threads = int(pick(rng, (64, 128, 256))) if gemm else int(pick(rng, (32, 64, 128, 256)))
    bm = int(pick(rng, (16, 32, 64))) if gemm else int(pick(rng, (1, 4, 16, 32)))
    bn = int(pick(rng, (16, 32, 64)))
    bk = 16 if gemm else 0
    while gemm and not fam_gemm._partitionable(bm, bn, threads // 32):
        bm, bn = 64, 64
    stages = int(rng.integers(1, 4))
    shift = int(rng.integers(0, nblk))
    params = [Param("mask", (nblk,), "int32")]
    if gemm:
        params += [Param("A", (bm, nblk * bk), "float16"), Param("Bm", (nblk * bk, bn),
                                                                 "float16")]
    else:
        params += [Param("X", (nblk * bm, bn), "float32")]
    params += [Param("C", (bm, bn), "float32", "out"), Param("cnt", (2,), "int32", "out")]
    k = [f"with T.Kernel(1, threads={threads}):",
         IND + f'm = T.alloc_fragment(({nblk},), "int32")',
         IND + f'acc = T.alloc_fragment(({bm}, {bn}), "float32")']
    if gemm:
        k += [IND + f'A_s = T.alloc_shared(({bm}, {bk}), "float16")',
              IND + f'B_s = T.alloc_shared(({bk}, {bn}), "float16")']
    else:
        k += [IND + f'X_s = T.alloc_shared(({bm}, {bn}), "float32")']
    k += [IND + "T.copy(mask, m)", IND + "T.clear(acc)",
          IND + "total = T.alloc_var(\"int32\")", IND + "total = 0",
          IND + f"for k in T.Pipelined({nblk}, num_stages={stages}):",
          IND * 2 + "if m[k] != 0:"]
    if gemm:
        k += [IND * 3 + f"T.copy(A[0, k * {bk}], A_s)", IND * 3 + f"T.copy(Bm[k * {bk}, 0], B_s)",
              IND * 3 + "T.gemm(A_s, B_s, acc)"]
    else:
        k += [IND * 3 + f"T.copy(X[k * {bm}, 0], X_s)",
              IND * 3 + f"for i, j in T.Parallel({bm}, {bn}):",
              IND * 4 + "acc[i, j] += X_s[i, j]"]
    k += [IND * 2 + f"total = total + m[(k + {shift}) % {nblk}]",
          IND + "T.copy(acc, C)",
          IND + f"m[{nblk - 1}] = m[{nblk - 1}] + total",
          IND + "cnt[0] = total",
          IND + f"cnt[1] = m[{nblk - 1}]"]

    def inputs(r):
        mask = (r.random(nblk) < 0.6).astype(np.int64)
        out = {"mask": mask}
        if gemm:
            out["A"] = random_values(r, (bm, nblk * bk), "float16")
            out["Bm"] = random_values(r, (nblk * bk, bn), "float16")
        else:
            out["X"] = random_values(r, (nblk * bm, bn), "float32")
        return out

    def oracle(arrs):
        mask = np.asarray(arrs["mask"], np.int64)
        C = np.zeros((bm, bn))
        mag = np.zeros((bm, bn))
        for kk in range(nblk):
            if mask[kk]:
                if gemm:
                    a = np.asarray(arrs["A"], np.float64)[:, kk * bk:(kk + 1) * bk]
                    b = np.asarray(arrs["Bm"], np.float64)[kk * bk:(kk + 1) * bk]
                    C += a @ b
                    mag += np.abs(a) @ np.abs(b)
                else:
                    t = np.asarray(arrs["X"], np.float64)[kk * bm:(kk + 1) * bm]
                    C += t
                    mag += np.abs(t)
        total = int(mask.sum())
        cnt = np.array([total, mask[-1] + total], np.int64)
        return {"C": (C, _sum_tol("float32", mag, nblk * max(bk, 1))),
                "cnt": (cnt, np.zeros(2))}

    spec = dict(nblk=nblk, gemm=gemm, threads=threads, bm=bm, bn=bn, stages=stages,
                shift=shift)
    return _case("runtime", seed, params, k, inputs, oracle, spec,
                 ("gemm",) if gemm else ())


# ---- inner: a serial loop inside T.Parallel indexing fragments -------------------------------

def _inner(rng, seed):
    hc = int(rng.integers(1, 9))
    h = int(pick(rng, (8, 16, 64, 128, 256)))
    n = int(rng.integers(1, 4))
    threads = int(pick(rng, (32, 64, 128, 256)))
    dt = pick(rng, ("float32", "bfloat16"))
    params = [Param("a", (n, hc, hc), "float32"), Param("b", (n, hc, h), dt),
              Param("c", (n, hc), "float32"), Param("d", (n, h), dt),
              Param("x", (n, hc, h), "float32", "out")]
    k = [f"with T.Kernel({n}, threads={threads}) as t:",
         IND + f'a_l = T.alloc_fragment(({hc}, {hc}), "float32")',
         IND + f'b_l = T.alloc_fragment(({hc}, {h}), "float32")',
         IND + f'c_l = T.alloc_fragment(({hc},), "float32")',
         IND + f'd_l = T.alloc_fragment(({h},), "float32")',
         IND + f'x_l = T.alloc_fragment(({hc}, {h}), "float32")',
         IND + "T.copy(a[t, 0, 0], a_l)", IND + "T.copy(b[t, 0, 0], b_l)",
         IND + "T.copy(c[t, 0], c_l)", IND + "T.copy(d[t, 0], d_l)",
         IND + f"for o, j in T.Parallel({hc}, {h}):",
         IND * 2 + "x_l[o, j] = c_l[o] * d_l[j]",
         IND * 2 + f"for i in T.serial({hc}):",
         IND * 3 + "x_l[o, j] += a_l[i, o] * b_l[i, j]",
         IND + "T.copy(x_l, x[t, 0, 0])"]

    def oracle(arrs):
        a, b, c, d = (np.asarray(arrs[x], np.float64) for x in "abcd")
        terms = np.einsum("nio,nij->noij", a, b)
        out = c[:, :, None] * d[:, None, :] + terms.sum(axis=2)
        mag = np.abs(c[:, :, None] * d[:, None, :]) + np.abs(terms).sum(axis=2)
        return {"x": (out, _sum_tol("float32", mag, hc + 1))}

    spec = dict(hc=hc, h=h, n=n, threads=threads, dt=dt)
    return _case("inner", seed, params, k, _inputs(params), oracle, spec)


# ---- shifted: acc[bi + s * part, d] ------------------------------------------------------------

def _shifted(rng, seed):
    src = pick(rng, ("gemm", "copy"))
    threads = int(pick(rng, (64, 128, 256)))
    while True:
        BS = int(pick(rng, (16, 32, 64, 128)))
        D = int(pick(rng, (16, 32, 64)))
        if src == "copy" or fam_gemm._partitionable(BS, D, threads // 32):
            break
    split = int(pick(rng, tuple(s for s in (1, 2, 4) if BS % s == 0)))
    part = BS // split
    K = 32
    params = ([Param("A", (BS, K), "float16"), Param("Bm", (K, D), "float16")] if src == "gemm"
              else [Param("X", (BS, D), "float32")])
    params.append(Param("O", (BS, D), "float32", "out"))
    k = [f"with T.Kernel(1, threads={threads}):",
         IND + f'acc = T.alloc_fragment(({BS}, {D}), "float32")',
         IND + f'S = T.alloc_shared(({part}, {D}), "float32")']
    if src == "gemm":
        k += [IND + f'A_s = T.alloc_shared(({BS}, {K}), "float16")',
              IND + f'B_s = T.alloc_shared(({K}, {D}), "float16")',
              IND + "T.copy(A, A_s)", IND + "T.copy(Bm, B_s)",
              IND + "T.gemm(A_s, B_s, acc, clear_accum=True)"]
    else:
        k += [IND + "T.copy(X, acc)",
              IND + f"for i, j in T.Parallel({BS}, {D}):",
              IND * 2 + "acc[i, j] = acc[i, j] * 2.0 + 1.0"]
    k += [IND + f"for s in range({split}):",
          IND * 2 + f"for bi, dd in T.Parallel({BS}, {D}):",
          IND * 3 + f"if bi < {part}:",
          IND * 4 + f"S[bi, dd] = acc[bi + s * {part}, dd]",
          IND * 2 + f"T.copy(S, O[s * {part}, 0])"]

    def oracle(arrs):
        if src == "gemm":
            a, b = (np.asarray(arrs[x], np.float64) for x in ("A", "Bm"))
            return {"O": (a @ b, _sum_tol("float32", np.abs(a) @ np.abs(b), K))}
        x = np.asarray(arrs["X"], np.float64)
        out = x * 2 + 1
        return {"O": (out, 2 * EPS["float32"] * (np.abs(out) + 1))}

    spec = dict(src=src, threads=threads, BS=BS, D=D, split=split)
    return _case("shifted", seed, params, k, _inputs(params), oracle, spec, (src,))


# ---- regs: the gemm family with register operands --------------------------------------------

def _regs(rng, seed):
    case = fam_gemm.sample(rng, seed)
    s = dict(case.spec)
    s["b_regs"] = bool(rng.random() < 0.75)
    s["a_regs"] = bool(rng.random() < 0.5) or not s["b_regs"]
    c = fam_gemm.build(s, seed)
    spec = dict(c.spec, kind="regs")
    return Case("fragments", seed, c.source, c.params, c.make_inputs, c.oracle, spec=spec,
                features=("fragments", "regs") + c.features)


# ---- paged: a let in a pipelined loop used by two copies -------------------------------------

def _paged(rng, seed):
    pages = int(rng.integers(1, 9))
    bs = int(pick(rng, (8, 16, 32)))
    D = int(pick(rng, (8, 16, 32, 64)))
    threads = int(pick(rng, (32, 64, 128)))
    stages = int(rng.integers(1, 4))
    params = [Param("K", (pages * bs, D), "float16"), Param("V", (pages * bs, D), "float16"),
              Param("table", (pages,), "int32"), Param("O", (bs, D), "float32", "out")]
    k = [f"with T.Kernel(1, threads={threads}):",
         IND + f'K_s = T.alloc_shared(({bs}, {D}), "float16")',
         IND + f'V_s = T.alloc_shared(({bs}, {D}), "float16")',
         IND + f'acc = T.alloc_fragment(({bs}, {D}), "float32")',
         IND + "T.clear(acc)",
         IND + f"for p in T.Pipelined({pages}, num_stages={stages}):",
         IND * 2 + f"start = table[p] * {bs}",
         IND * 2 + f"T.copy(K[start:start + {bs}, :], K_s)",
         IND * 2 + f"T.copy(V[start:start + {bs}, :], V_s)",
         IND * 2 + f"for i, j in T.Parallel({bs}, {D}):",
         IND * 3 + 'acc[i, j] += T.cast(K_s[i, j], "float32") * V_s[i, j]',
         IND + "T.copy(acc, O)"]

    def inputs(r):
        return {"K": random_values(r, (pages * bs, D), "float16"),
                "V": random_values(r, (pages * bs, D), "float16"),
                "table": r.permutation(pages).astype(np.int64)}

    def oracle(arrs):
        Kt, Vt = (np.asarray(arrs[x], np.float64).reshape(pages, bs, D) for x in "KV")
        prod = Kt * Vt  # every page once, in table order
        return {"O": (prod.sum(0), _sum_tol("float32", np.abs(prod).sum(0), pages))}

    spec = dict(pages=pages, bs=bs, D=D, threads=threads, stages=stages)
    return _case("paged", seed, params, k, inputs, oracle, spec)


# ---- fp8: casts from and to the 8-bit floats -------------------------------------------------

def _fp8(rng, seed):
    f8 = pick(rng, ("float8_e4m3", "float8_e5m2"))
    wide = pick(rng, ("float16", "bfloat16", "float32"))
    n = int(pick(rng, (16, 64, 128, 96)))
    threads = int(pick(rng, (32, 64, 128)))
    via = pick(rng, ("parallel", "fragment"))
    params = [Param("X", (n,), f8), Param("W", (n,), wide), Param("Y", (n,), wide, "out"),
              Param("Z", (n,), f8, "out")]
    k = [f"with T.Kernel(1, threads={threads}):"]
    if via == "parallel":
        k += [IND + f"for i in T.Parallel({n}):",
              IND * 2 + f'Y[i] = T.cast(X[i], "{wide}")',
              IND * 2 + f'Z[i] = T.cast(W[i], "{f8}")']
    else:
        k += [IND + f'x_f = T.alloc_fragment(({n},), "{wide}")',
              IND + f'z_f = T.alloc_fragment(({n},), "{f8}")',
              IND + "T.copy(X, x_f)", IND + "T.copy(W, z_f)",
              IND + "T.copy(x_f, Y)", IND + "T.copy(z_f, Z)"]

    def inputs(r):
        # values exact in both fp8 formats and in every wide type: casts are exact
        return {"X": random_values(r, (n,), f8), "W": random_values(r, (n,), f8)}

    def oracle(arrs):
        x, w = (np.asarray(arrs[v], np.float64) for v in "XW")
        return {"Y": (x, np.zeros(n)), "Z": (w, np.zeros(n))}

    spec = dict(f8=f8, wide=wide, n=n, threads=threads, via=via)
    return _case("fp8", seed, params, k, inputs, oracle, spec, (f8, wide, via))


# ---- staged: a gemm accumulator read at a runtime row ----------------------------------------

def _staged(rng, seed):
    threads = int(pick(rng, (64, 128)))
    while True:
        M, N = int(pick(rng, (16, 32, 64))), int(pick(rng, (16, 32, 64)))
        if fam_gemm._partitionable(M, N, threads // 32):
            break
    K = 16
    params = [Param("A", (M, K), "float16"), Param("Bm", (K, N), "float16"),
              Param("O", (M, N), "float32", "out")]
    k = [f"with T.Kernel(1, threads={threads}):",
         IND + f'A_s = T.alloc_shared(({M}, {K}), "float16")',
         IND + f'B_s = T.alloc_shared(({K}, {N}), "float16")',
         IND + f'acc = T.alloc_fragment(({M}, {N}), "float32")',
         IND + "T.copy(A, A_s)", IND + "T.copy(Bm, B_s)",
         IND + "T.gemm(A_s, B_s, acc, clear_accum=True)",
         IND + f"for r in T.serial({M}):",
         IND * 2 + f"for j in T.Parallel({N}):",
         IND * 3 + f"O[{M - 1} - r, j] = acc[r, j] + 1.0"]

    def oracle(arrs):
        a, b = (np.asarray(arrs[x], np.float64) for x in ("A", "Bm"))
        out = (a @ b)[::-1] + 1.0
        mag = (np.abs(a) @ np.abs(b))[::-1] + 1.0
        return {"O": (out, _sum_tol("float32", mag, K + 1))}

    spec = dict(M=M, N=N, threads=threads)
    return _case("staged", seed, params, k, _inputs(params), oracle, spec)


def _inputs(params):
    return lambda r: {p.name: random_values(r, p.shape, p.dtype) for p in params
                      if p.role == "in"}


_ = round_to
