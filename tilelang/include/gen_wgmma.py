"""Generate tl/wgmma_ops.cuh (and tl/wgmma_ops_extra.cuh, tl/wgmma_ops_fp8.cuh): one inline-asm
wrapper per wgmma.mma_async shape N (8..256, step 8) from a table of operand types (HARDWARE §5).

    python tilelang/include/gen_wgmma.py            # rewrite the headers
    python tilelang/include/gen_wgmma.py --check    # exit 1 if they are out of date
    python -m tilelang.codegen.library              # then renew the table of header names

Every wrapper is `template <imm args> TL_DEVICE void wgmma_m64n<N>k<K>_<ss|rs>_<acc>_<ab>(...)`
and a dispatcher `tl::wgmma_ss<N, AB, ...>` / `tl::wgmma_rs<N, AB, ...>` picks one at compile
time. The per-N operand lists (accumulator registers `"+f"(d[i])`) are generated here, never
written by hand. Everything for shape N sits under `#if !defined(TL_WGMMA_SELECT) ||
defined(TL_WGMMA_N<N>)`, so a kernel that names its shapes skips the rest in the preprocessor.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
NS = list(range(8, 257, 8))


@dataclass(frozen=True)
class Kind:
    ab: str  # C++ type of A/B elements (dispatcher key)
    ptx: str  # PTX type of A and B
    acc: str  # "f32" or "f16"
    k: int
    transpose: bool  # imm-trans-a/b exist (f16/bf16 only)
    suffix: str  # function-name suffix
    b_ptx: str = ""  # PTX type of B when it differs from A (fp8 mixes e4m3 and e5m2)
    b_ab: str = ""  # C++ type of B elements for the (A, B)-keyed fp8 dispatcher

    @property
    def ptx_b(self):
        return self.b_ptx or self.ptx

    @property
    def ab_b(self):
        return self.b_ab or self.ab

    @property
    def acc_regs_per_n(self):  # accumulator registers per thread = N * this
        return 0.5 if self.acc == "f32" else 0.25

    @property
    def acc_ctype(self):
        return "float" if self.acc == "f32" else "uint32_t"

    @property
    def acc_constraint(self):
        return "+f" if self.acc == "f32" else "+r"


MAIN = [
    Kind("half_t", "f16", "f32", 16, True, "f32_f16"),
    Kind("bfloat16_t", "bf16", "f32", 16, True, "f32_bf16"),
]
EXTRA = [
    Kind("half_t", "f16", "f16", 16, True, "f16_f16"),
    Kind("tfloat32_t", "tf32", "f32", 8, False, "f32_tf32"),
    Kind("fp8_e4_t", "e4m3", "f32", 32, False, "f32_e4m3"),
    Kind("fp8_e5_t", "e5m2", "f32", 32, False, "f32_e5m2"),
]

# 8-bit floats: any mix of e4m3 / e5m2 for A and B, f32 or f16 accumulators, K-major only
# (PTX §9.7.15.5.2: no imm-trans for 8-bit types); dispatched by (A, B) element types.
_FP8 = (("fp8_e4_t", "e4m3"), ("fp8_e5_t", "e5m2"))
FP8 = [Kind(a, pa, acc, 32, False, f"{acc}_{pa}_{pb}", pb, b)
       for acc in ("f32", "f16") for a, pa in _FP8 for b, pb in _FP8]


def _regs(first: int, count: int) -> str:
    return "{" + ", ".join(f"%{i}" for i in range(first, first + count)) + "}"


def _acc_operands(kind: Kind, n: int) -> str:
    r = int(n * kind.acc_regs_per_n)
    ops = [f'"{kind.acc_constraint}"(d[{i}])' for i in range(r)]
    lines, line = [], "      : "
    for op in ops:
        if len(line) + len(op) > 96:
            lines.append(line.rstrip())
            line = "        "
        line += op + ", "
    lines.append(line.rstrip(", "))
    return "\n".join(lines)


def wrapper(kind: Kind, n: int, form: str) -> str:
    r = int(n * kind.acc_regs_per_n)
    name = f"wgmma_m64n{n}k{kind.k}_{form}_{kind.suffix}"
    shape = f"m64n{n}k{kind.k}.{kind.acc}.{kind.ptx}.{kind.ptx_b}"
    if form == "ss":
        tparams = "int ScaleA = 1, int ScaleB = 1" + (", int TransA = 0, int TransB = 0"
                                                     if kind.transpose else "")
        args = f"{kind.acc_ctype}* d, uint64_t desc_a, uint64_t desc_b, int scale_d"
        a_ops = f"%{r}"
        b_op, pred = r + 1, r + 2
        imms = ["ScaleA", "ScaleB"] + (["TransA", "TransB"] if kind.transpose else [])
        inputs = ['"l"(desc_a)', '"l"(desc_b)', '"r"(scale_d)']
    else:
        tparams = "int ScaleA = 1, int ScaleB = 1" + (", int TransB = 0" if kind.transpose
                                                     else "")
        args = (f"{kind.acc_ctype}* d, const uint32_t* a, uint64_t desc_b, int scale_d")
        a_ops = _regs(r, 4)
        b_op, pred = r + 4, r + 5
        imms = ["ScaleA", "ScaleB"] + (["TransB"] if kind.transpose else [])
        inputs = [f'"r"(a[{i}])' for i in range(4)] + ['"l"(desc_b)', '"r"(scale_d)']
    imm_ops = ", ".join(f"%{pred + 1 + i}" for i in range(len(imms)))
    inputs += [f'"n"({x})' for x in imms]
    asm = (f'"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{pred}, 0;\\n"\n'
           f'      "wgmma.mma_async.sync.aligned.{shape} "\n'
           f'      "{_regs(0, r)}, "\n'
           f'      "{a_ops}, %{b_op}, p, {imm_ops};\\n}}\\n"')
    return (f"{_want(n)}\n"
            f"template <{tparams}>\n"
            f"TL_DEVICE void {name}({args}) {{\n"
            f"  asm volatile(\n      {asm}\n{_acc_operands(kind, n)}\n"
            f"      : {', '.join(inputs)});\n}}\n#endif\n")


def _want(n: int) -> str:
    """The guard of everything for shape N: all shapes unless the including source defined
    TL_WGMMA_SELECT, then only those it named with TL_WGMMA_N<N> (tl/wgmma.cuh)."""
    return f"#if !defined(TL_WGMMA_SELECT) || defined(TL_WGMMA_N{n})"


def _n_chain(lines: list, n_calls) -> None:
    """`if constexpr (N == n) call;` for every N, each under its shape guard, then a
    static_assert for an N this build left out."""
    lines.append("    if constexpr (N < 0) {")
    lines.append("    }")
    for n, call in n_calls:
        lines.append(_want(n))
        lines.append(f"    else if constexpr (N == {n}) {call};")
        lines.append("#endif")
    lines.append("    else {")
    lines.append("      static_assert(N < 0, \"wgmma: this N was left out of the build "
                 "(TL_WGMMA_SELECT without TL_WGMMA_N<N>)\");")
    lines.append("    }")


def dispatcher(kinds: list[Kind], form: str, tag: str = "") -> str:
    """`wgmma_ss<N, AB, ...>(...)`: picks the wrapper for N (and accumulator type) at compile
    time; only the chosen branch is instantiated."""
    acc_kinds = sorted({k.acc for k in kinds})
    out = []
    for acc in acc_kinds:
        ks = [k for k in kinds if k.acc == acc]
        ctype = ks[0].acc_ctype
        trans = all(k.transpose for k in ks)
        fname = f"wgmma_{form}" + ("" if acc == "f32" else "_f16acc") + tag
        if form == "ss":
            tp = "int ScaleA = 1, int ScaleB = 1, int TransA = 0, int TransB = 0"
            args = f"{ctype}* d, uint64_t desc_a, uint64_t desc_b, int scale_d"
            call_args = "d, desc_a, desc_b, scale_d"
            tr = ["TransA", "TransB"]
        else:
            tp = "int ScaleA = 1, int ScaleB = 1, int TransB = 0"
            args = f"{ctype}* d, const uint32_t* a, uint64_t desc_b, int scale_d"
            call_args = "d, a, desc_b, scale_d"
            tr = ["TransB"]
        body = [f"template <int N, class AB, {tp}>",
                f"TL_DEVICE void {fname}({args}) {{",
                '  static_assert(N >= 8 && N <= 256 && N % 8 == 0, '
                '"wgmma: N must be a multiple of 8 in [8, 256]");']
        first = True
        for k in ks:
            cond = "if constexpr" if first else "} else if constexpr"
            first = False
            body.append(f"  {cond} (is_same_v<AB, {k.ab}>) {{")
            if not k.transpose:
                body.append(f'    static_assert({" && ".join(f"{t} == 0" for t in tr)}, '
                            f'"wgmma: {k.ptx} operands must be K-major (no transpose)");')
            targs = "ScaleA, ScaleB" + (", " + ", ".join(tr) if k.transpose else "")
            _n_chain(body, [(n, f"wgmma_m64n{n}k{k.k}_{form}_{k.suffix}<{targs}>({call_args})")
                            for n in NS])
        body.append("  } else {")
        body.append(f'    static_assert(is_same_v<AB, void>, "wgmma_{form}: unsupported A/B '
                    f'type");')
        body.append("  }")
        body.append("}")
        out.append("\n".join(body) + "\n")
        _ = trans
    return "\n".join(out)


def dispatcher_fp8(kinds: list[Kind], form: str) -> str:
    """`wgmma_ss_fp8<N, TA, TB, ScaleA, ScaleB>(d, ...)`: the 8-bit float wrappers keyed by
    the A and B element types (no transpose arguments: 8-bit operands are K-major)."""
    out = []
    for acc in sorted({k.acc for k in kinds}, reverse=True):
        ks = [k for k in kinds if k.acc == acc]
        ctype = ks[0].acc_ctype
        fname = f"wgmma_{form}_fp8" + ("" if acc == "f32" else "_f16acc")
        if form == "ss":
            args = f"{ctype}* d, uint64_t desc_a, uint64_t desc_b, int scale_d"
            call_args = "d, desc_a, desc_b, scale_d"
        else:
            args = f"{ctype}* d, const uint32_t* a, uint64_t desc_b, int scale_d"
            call_args = "d, a, desc_b, scale_d"
        body = ["template <int N, class TA, class TB, int ScaleA = 1, int ScaleB = 1>",
                f"TL_DEVICE void {fname}({args}) {{",
                '  static_assert(N >= 8 && N <= 256 && N % 8 == 0, '
                '"wgmma: N must be a multiple of 8 in [8, 256]");']
        for i, k in enumerate(ks):
            cond = "if constexpr" if i == 0 else "} else if constexpr"
            body.append(f"  {cond} (is_same_v<TA, {k.ab}> && is_same_v<TB, {k.ab_b}>) {{")
            _n_chain(body, [(n, f"wgmma_m64n{n}k{k.k}_{form}_{k.suffix}<ScaleA, ScaleB>"
                                f"({call_args})") for n in NS])
        body.append("  } else {")
        body.append(f'    static_assert(is_same_v<TA, void>, "{fname}: A and B must be '
                    f'fp8_e4_t or fp8_e5_t");')
        body.append("  }")
        body.append("}")
        out.append("\n".join(body) + "\n")
    return "\n".join(out)


HEADER = """// {name} — GENERATED by tilelang/include/gen_wgmma.py; do not edit by hand.
//
// wgmma.mma_async wrappers (sm_90a), one per N in 8..256 step 8 (HARDWARE §5):
//   SS: wgmma_m64n<N>k<K>_ss_<acc>_<ab><ScaleA, ScaleB[, TransA, TransB]>(d, desc_a, desc_b,
//       scale_d)
//   RS: wgmma_m64n<N>k<K>_rs_<acc>_<ab><ScaleA, ScaleB[, TransB]>(d, a[4], desc_b, scale_d)
//   d: the N/2 (f32) or N/4 (f16x2) accumulator registers of this thread; scale_d == 0 means
//   D = A*B (old D ignored); ScaleA/B = 1 or -1 (negate); Trans* = 1 selects MN-major (f16 and
//   bf16 only). {dispatch}
// Callers keep wgmma.fence / commit_group / wait_group discipline (tl/wgmma.cuh).
// Operand types: {types}.
// A source that defines TL_WGMMA_SELECT gets only the shapes it names with TL_WGMMA_N<N>
// (generated kernels do: parsing all 32 shapes is most of the header cost); dispatching to
// a left-out N is a static_assert.
#pragma once
#include "common.cuh"

namespace tl {{
{extra_types}
#if TL_HAVE_SM90A

"""

FOOTER = """
#endif  // TL_HAVE_SM90A

}  // namespace tl
"""


def render(kinds: list[Kind], name: str, extra_types: str = "", tag: str = "",
           fp8: bool = False) -> str:
    if fp8:
        types = "e4m3/e5m2 x e4m3/e5m2 (any mix) -> f32 or f16"
    else:
        types = ", ".join(f"{k.ptx}->{k.acc}" for k in kinds)
    if fp8:
        dispatch = ("Dispatch by N and the A/B element types (fp8_e4_t / fp8_e5_t):\n"
                    "//   wgmma_ss_fp8<N, TA, TB>(...), wgmma_rs_fp8<N, TA, TB>(...) (f16 "
                    "accumulators:\n//   wgmma_ss_fp8_f16acc / wgmma_rs_fp8_f16acc). A "
                    "suffix <a>_<b> names both types.")
    else:
        dispatch = (f"Dispatch by N: wgmma_ss{tag}<N, AB, ...>(...), wgmma_rs{tag}<N, AB, "
                    f"...>(...)\n//   (f16 accumulators: wgmma_ss_f16acc{tag} / "
                    f"wgmma_rs_f16acc{tag}).")
    parts = [HEADER.format(name=name, types=types, extra_types=extra_types, tag=tag,
                           dispatch=dispatch)]
    for k in kinds:
        for form in ("ss", "rs"):
            for n in NS:
                parts.append(wrapper(k, n, form))
    if fp8:
        parts.append(dispatcher_fp8(kinds, "ss"))
        parts.append(dispatcher_fp8(kinds, "rs"))
    else:
        parts.append(dispatcher(kinds, "ss", tag))
        parts.append(dispatcher(kinds, "rs", tag))
    parts.append(FOOTER)
    return "\n".join(parts)


TF32_TYPE = """
// Tag type for tf32 operands (stored as float in memory).
struct tfloat32_t {
  float value;
};
"""

OUTPUTS = {
    "tl/wgmma_ops.cuh": lambda: render(MAIN, "tl/wgmma_ops.cuh"),
    "tl/wgmma_ops_extra.cuh": lambda: render(EXTRA, "tl/wgmma_ops_extra.cuh", TF32_TYPE, "_ext"),
    "tl/wgmma_ops_fp8.cuh": lambda: render(FP8, "tl/wgmma_ops_fp8.cuh", fp8=True),
}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    stale = []
    for rel, make in OUTPUTS.items():
        text = make()
        path = HERE / rel
        if "--check" in argv:
            if not path.exists() or path.read_text() != text:
                stale.append(rel)
        else:
            path.write_text(text)
    if stale:
        print("out of date (run python tilelang/include/gen_wgmma.py):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
