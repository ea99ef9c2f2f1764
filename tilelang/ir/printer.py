"""Print IR as TileLang source (the same surface syntax users write).

`print_node(func)` gives a `@T.prim_func` that traces back to an equivalent function (the
printer's test checks the round trip). Names are made unique per function: two variables that
the user called `x` print as `x` and `x_1`.
"""

from __future__ import annotations

import math

from . import hooks
from . import nodes as ir
from .dtype import DType

_BIN = {"add": ("+", 5), "sub": ("-", 5), "mul": ("*", 6), "div": ("/", 6),
        "floordiv": ("//", 6), "floormod": ("%", 6), "bitand": ("&", 3), "bitor": ("|", 1),
        "bitxor": ("^", 2), "shl": ("<<", 4), "shr": (">>", 4)}
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_ATOMICS = ("atomic_add", "atomic_max", "atomic_min")
_FUNC_BIN = {"min": "T.min", "max": "T.max", "truncdiv": "T.truncdiv", "truncmod": "T.truncmod",
             "pow": "T.pow"}


class Namer:
    """Unique display names for vars and buffers, by identity; `clean` turns a name into one
    the output language accepts."""

    def __init__(self, clean=lambda name: name.replace(".", "_")):
        self.names: dict = {}
        self.used: set = set()
        self.clean = clean

    def __call__(self, obj) -> str:
        name = self.names.get(id(obj))
        if name is None:
            base = self.clean(obj.name if obj.name and obj.name != "__unnamed" else "buf")
            name, n = base, 0
            while name in self.used:
                n += 1
                name = self.clean(f"{base}_{n}")
            self.used.add(name)
            self.names[id(obj)] = name
        return name

    def fresh(self, base: str) -> str:
        """A name not used yet, derived from `base`, bound to no object."""
        name, n = base, 0
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name


def _dtype_str(dt: DType) -> str:
    return f'"{dt.name}"'


class Printer:
    def __init__(self):
        self.name = Namer()
        self.lines: list[str] = []

    # ---- expressions ------------------------------------------------------------------------
    def expr(self, e, prec: int = 0) -> str:
        if isinstance(e, (int, float, bool)):
            return repr(e)
        if isinstance(e, ir.Buffer):
            return self.name(e)
        if isinstance(e, str):
            return repr(e)
        if isinstance(e, ir.Var):
            return self.name(e)
        if isinstance(e, ir.Const):
            return self.const(e)
        if isinstance(e, ir.Binary):
            if e.op in _FUNC_BIN:
                return f"{_FUNC_BIN[e.op]}({self.expr(e.a)}, {self.expr(e.b)})"
            sym, p = _BIN[e.op]
            if e.op == "div" and e.dtype.is_int:
                return f"T.truncdiv({self.expr(e.a)}, {self.expr(e.b)})"
            text = f"{self.expr(e.a, p)} {sym} {self.expr(e.b, p + 1)}"
            return f"({text})" if p < prec else text
        if isinstance(e, ir.Compare):
            text = f"{self.expr(e.a, 5)} {_CMP[e.op]} {self.expr(e.b, 5)}"
            return f"({text})" if prec > 0 else text
        if isinstance(e, ir.Logical):
            text = f"{self.expr(e.a, 1)} {e.op} {self.expr(e.b, 1)}"
            return f"({text})" if prec > 0 else text
        if isinstance(e, ir.Unary):
            if e.op == "neg":
                return f"-{self.expr(e.a, 7)}"
            if e.op == "not":
                return f"not {self.expr(e.a, 7)}" if prec == 0 else f"(not {self.expr(e.a, 7)})"
            return f"~{self.expr(e.a, 7)}"
        if isinstance(e, ir.Select):
            return (f"T.if_then_else({self.expr(e.cond)}, {self.expr(e.true_value)}, "
                    f"{self.expr(e.false_value)})")
        if isinstance(e, ir.Cast):
            return f"T.cast({self.expr(e.value)}, {_dtype_str(e.dtype)})"
        if isinstance(e, ir.Load):
            if e.buffer.scope == "local.var":
                return self.name(e.buffer)
            return f"{self.name(e.buffer)}[{', '.join(self.expr(i) for i in e.indices)}]"
        if isinstance(e, ir.Call):
            return self.call(e)
        if isinstance(e, ir.BufferRegion):
            return self.region(e)
        return repr(e)

    def const(self, c: ir.Const) -> str:
        v, dt = c.value, c.dtype
        if dt.is_bool:
            return "True" if v else "False"
        if dt.name == "int32":
            return str(v) if v >= 0 else f"({v})"
        if dt.name == "float32" and math.isfinite(v):
            return repr(float(v))
        if dt.is_float and not math.isfinite(v):
            if math.isnan(v):
                return f"T.cast(float('nan'), {_dtype_str(dt)})"
            return f"T.infinity({_dtype_str(dt)})" if v > 0 else \
                f"-T.infinity({_dtype_str(dt)})"
        return f"T.{dt.name}({v!r})"

    def call(self, c: ir.Call, statement: bool = False) -> str:
        args = [self.expr(a) for a in c.args]
        attrs = dict(c.attrs)
        if c.op == "call_extern":
            return f"T.call_extern({_dtype_str(c.dtype)}, {', '.join(args)})"
        if c.op in _ATOMICS:
            mo = attrs.get("memory_order", "relaxed")
            extra = f", memory_order={mo!r}" if mo != "relaxed" else ""
            extra += "" if statement else ", return_prev=True"
            return f"T.{c.op}({args[0]}, {args[1]}{extra})"
        if c.op == "address_of":
            return f"T.address_of({args[0]})"
        if c.op == "access_ptr":
            return f"T.access_ptr({args[0]}, 'rw', {args[1]})"
        if c.op == "reinterpret":
            return f"T.reinterpret({args[0]}, {_dtype_str(c.dtype)})"
        if c.op in ("shfl_xor", "shfl_down", "shfl_up", "shfl_sync"):
            return f"T.{c.op}({', '.join(args)})"
        if c.op == "comment":
            return f"T.comment({args[0]})"
        return f"T.{c.op}({', '.join(args)})"

    def region(self, r: ir.BufferRegion) -> str:
        parts = []
        for (start, extent), full in zip(r.region, r.buffer.shape):
            s = self.expr(start)
            if isinstance(extent, int) and extent == 1:
                parts.append(s)
            elif _is_zero(start) and ir.structural_equal(ir.as_expr(extent), ir.as_expr(full)):
                parts.append(":")
            else:
                end = ir.binary("add", start, extent) if not (
                    isinstance(start, int) and isinstance(extent, int)) else start + extent
                parts.append(f"{s}:{self.expr(end)}" if not _is_zero(start)
                             else f"0:{self.expr(extent)}")
        if all(p == ":" for p in parts):
            return self.name(r.buffer)
        return f"{self.name(r.buffer)}[{', '.join(parts)}]"

    # ---- statements -------------------------------------------------------------------------
    def line(self, indent: int, text: str):
        self.lines.append("    " * indent + text)

    def stmt(self, s, ind: int):
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            self.line(ind, f"# <{type(s).__name__}>")
            return
        method(s, ind)

    def body(self, s, ind: int):
        before = len(self.lines)
        if s is not None:
            self.stmt(s, ind)
        if len(self.lines) == before:
            self.line(ind, "pass")

    def s_Seq(self, s, ind):
        for x in s.stmts:
            self.stmt(x, ind)

    def s_Evaluate(self, s, ind):
        if isinstance(s.value, ir.Call) and s.value.op in _ATOMICS:
            # as a statement the old value is unused: `return_prev=True` would re-trace as a let
            self.line(ind, self.call(s.value, statement=True))
            return
        self.line(ind, self.expr(s.value))

    def s_Store(self, s, ind):
        if s.buffer.scope == "local.var":
            self.line(ind, f"{self.name(s.buffer)} = {self.expr(s.value)}")
            return
        idx = ", ".join(self.expr(i) for i in s.indices)
        self.line(ind, f"{self.name(s.buffer)}[{idx}] = {self.expr(s.value)}")

    def s_LetStmt(self, s, ind):
        self.line(ind, f"{self.name(s.var)}: T.{s.var.dtype.name} = {self.expr(s.value)}")
        self.stmt(s.body, ind)

    def s_Allocate(self, s, ind):
        b = s.buffer
        if b.scope == "local.var":
            init = "" if s.init is None else f", {self.expr(s.init)}"
            self.line(ind, f"{self.name(b)} = T.alloc_var({_dtype_str(b.dtype)}{init})")
        else:
            self.line(ind, f"{self.name(b)} = T.alloc_local({self.shape(b.shape)}, "
                           f"{_dtype_str(b.dtype)})")
        self.stmt(s.body, ind)

    def s_If(self, s, ind):
        self.line(ind, f"if {self.expr(s.cond)}:")
        self.body(s.then_body, ind + 1)
        e = s.else_body
        while e is not None:
            if isinstance(e, ir.If):
                self.line(ind, f"elif {self.expr(e.cond)}:")
                self.body(e.then_body, ind + 1)
                e = e.else_body
            else:
                self.line(ind, "else:")
                self.body(e, ind + 1)
                e = None

    def s_For(self, s, ind):
        if s.kind == "parallel":
            vars_, extents, inner = [s.var], [s], s.body
            while isinstance(inner, ir.For) and inner.kind == "parallel":
                vars_.append(inner.var)
                extents.append(inner)
                inner = inner.body
            ext = ", ".join(self._range_args(f) for f in extents)
            extra = "".join(f", {k}={v!r}" for k, v in s.annotations)
            self.line(ind, f"for {', '.join(self.name(v) for v in vars_)} in "
                           f"T.Parallel({ext}{extra}):")
            self.body(inner, ind + 1)
            return
        fn = {"serial": "T.serial", "pipelined": "T.Pipelined", "unroll": "T.unroll",
              "vectorized": "T.vectorized"}[s.kind]
        args = self._range_args(s)
        if s.kind == "pipelined":
            args += "".join(f", {k}={list(v) if isinstance(v, tuple) else v!r}"
                            for k, v in s.annotations)
        self.line(ind, f"for {self.name(s.var)} in {fn}({args}):")
        self.body(s.body, ind + 1)

    def _range_args(self, s: ir.For) -> str:
        if _is_zero(s.start) and s.step == 1:
            return self.expr(s.extent)
        stop = ir.binary("add", s.start, ir.binary("mul", s.extent, s.step))
        stop = hooks.simplify(stop)
        text = f"{self.expr(s.start)}, {self.expr(stop)}"
        return text + (f", {s.step}" if s.step != 1 else "")

    def s_While(self, s, ind):
        self.line(ind, f"while {self.expr(s.cond)}:")
        self.body(s.body, ind + 1)

    def s_Attr(self, s, ind):
        self.line(ind, f"# {s.key}: {s.value!r}")
        self.stmt(s.body, ind)

    def s_Break(self, s, ind):
        self.line(ind, "break")

    def s_Continue(self, s, ind):
        self.line(ind, "continue")

    def s_Assert(self, s, ind):
        self.line(ind, f"T.device_assert({self.expr(s.cond)}, {s.message!r})")

    def shape(self, shape) -> str:
        items = [self.expr(x) for x in shape]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"

    def s_Kernel(self, s, ind):
        grid = ", ".join(self.expr(g) for g in s.grid)
        threads = s.threads[0] if len(s.threads) == 1 else tuple(s.threads)
        names = [self.name(v) for v in s.block_vars]
        target = names[0] if len(names) == 1 else f"({', '.join(names)})"
        self.line(ind, f"with T.Kernel({grid}, threads={threads}) as {target}:")
        for b in s.allocs:
            fn = {"shared.dyn": "T.alloc_shared", "shared": "T.alloc_shared",
                  "local.fragment": "T.alloc_fragment"}.get(b.scope)
            if fn is None:
                self.line(ind + 1, f"# {self.name(b)}: {b.scope} {list(b.shape)} {b.dtype}")
                continue
            self.line(ind + 1, f"{self.name(b)} = {fn}({self.shape(b.shape)}, "
                               f"{_dtype_str(b.dtype)})")
        for key, value in s.attrs:
            if key == "use_swizzle" and value is None:
                self.line(ind + 1, "T.use_swizzle(enable=False)")
            elif key == "use_swizzle":
                self.line(ind + 1, f"T.use_swizzle(panel_size={value[0]}, order={value[1]!r})")
            elif key == "layout":
                self.line(ind + 1, f"T.annotate_layout({{{self.name(value[0])}: {value[1]!r}}})")
            elif key == "safe_value":
                self.line(ind + 1, f"T.annotate_safe_value({{{self.name(value[0])}: "
                                   f"{self.expr(value[1])}}})")
            else:
                self.line(ind + 1, f"# {key}: {value!r}")
        if s.thread_vars:
            used = _vars_used(s.body)
            for d, tv in enumerate(s.thread_vars):
                if tv in used:
                    self.line(ind + 1, f"{self.name(tv)} = T.get_thread_binding({d})")
        self.body(s.body, ind + 1)

    def s_Copy(self, s, ind):
        self.line(ind, f"T.copy({self.region(s.src)}, {self.region(s.dst)}"
                       f"{_opts(s.options)})")

    def s_TmaCopy(self, s, ind):
        extra = f", barrier={self.expr(s.barrier)}" if s.barrier is not None else ""
        if s.scope is not None:
            extra += f", leader_scope_threads={s.scope}"
        if s.eviction_policy is not None:
            extra += f", eviction_policy={s.eviction_policy!r}"
        self.line(ind, f"T.tma_copy({self.region(s.src)}, {self.region(s.dst)}{extra})")

    def s_Fill(self, s, ind):
        self.line(ind, f"T.fill({self.region(s.dst)}, {self.expr(s.value)})")

    def s_Gemm(self, s, ind):
        extra = ""
        if s.trans_A:
            extra += ", transpose_A=True"
        if isinstance(s, ir.GemmSp) and s.trans_E:
            extra += ", transpose_E=True"
        if s.trans_B:
            extra += ", transpose_B=True"
        if s.policy != "Square":
            extra += f", policy=T.GemmWarpPolicy.{s.policy}"
        if not (isinstance(s.clear_accum, bool) and not s.clear_accum):
            extra += f", clear_accum={self.expr(s.clear_accum)}"
        name, operands = ("wgmma_gemm" if s.require_wgmma else "gemm"), (s.A, s.B, s.C)
        if isinstance(s, ir.GemmSp):
            name, operands = "gemm_sp", (s.A, s.E, s.B, s.C)
        self.line(ind, f"T.{name}({', '.join(self.region(r) for r in operands)}{extra})")

    s_GemmSp = s_Gemm

    def s_Reduce(self, s, ind):
        extra = "" if s.kind == "abssum" else f", clear={s.clear}"
        self.line(ind, f"T.reduce_{s.kind}({self.name(s.src)}, {self.name(s.dst)}, "
                       f"dim={s.dim}{extra})")

    def s_CumSum(self, s, ind):
        extra = "".join(f", {k}={v!r}" if not isinstance(v, str) else f', {k}="{v}"'
                        for k, v in s.annotations)
        self.line(ind, f"T.cum{s.kind}({self.name(s.src)}, {self.name(s.dst)}, dim={s.dim}, "
                       f"reverse={s.reverse}{extra})")

    def s_AtomicTile(self, s, ind):
        src = self.region(s.src) if isinstance(s.src, ir.BufferRegion) else self.expr(s.src)
        self.line(ind, f"T.atomic_{s.op}({self.region(s.dst)}, {src})")

    def s_Print(self, s, ind):
        msg = f", msg={s.msg!r}" if s.msg else ""
        if s.value is None:
            self.line(ind, f"T.print(msg={s.msg!r})")
        else:
            self.line(ind, f"T.print({self.expr(s.value)}{msg})")

    # ---- functions --------------------------------------------------------------------------
    def func(self, f: ir.PrimFunc) -> str:
        dyn = _dynamic_vars(f)
        head = ["# from tilelang import language as T", ""]
        for v in dyn:
            dt = "" if v.dtype.name == "int32" else f", {_dtype_str(v.dtype)}"
            head.append(f'{self.name(v)} = T.dynamic("{v.name}"{dt})')
        if dyn:
            head.append("")
        params = []
        outputs = {id(o) for o in f.outputs}
        for p in f.params:
            if isinstance(p, ir.Buffer):
                strides = "" if p.strides is None else f", strides={self.shape(p.strides)}"
                ann = f"T.Tensor({self.shape(p.shape)}, {_dtype_str(p.dtype)}{strides})"
                params.append(f"{self.name(p)}: {ann}")
            elif p.dtype.is_handle:
                params.append(f"{self.name(p)}: T.handle")
            else:
                params.append(f"{self.name(p)}: T.{p.dtype.name}")
        head.append("@T.prim_func")
        head.append(f"def {f.name}({', '.join(params)}):")
        if outputs:
            head.append("    # outputs (T.empty): " + ", ".join(self.name(o) for o in f.outputs))
        for w in f.workspaces:
            head.append(f"    {self.name(w)} = T.alloc_global({self.shape(w.shape)}, "
                        f"{_dtype_str(w.dtype)})")
        for src in f.attrs.get("import_source", []):
            head.append(f"    T.import_source({src!r})")
        self.lines = []
        self.body(f.body, 1)
        return "\n".join(head + self.lines) + "\n"


def _opts(options) -> str:
    out = ""
    for k, v in options:
        if k == "disable_tma" and not v:
            continue
        out += f", {k}={v!r}"
    return out


def _is_zero(v) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool) and v == 0) or (
        isinstance(v, ir.Const) and v.value == 0)


def _vars_used(node) -> set:
    from .visitor import collect

    return set(collect(node, lambda n: isinstance(n, ir.Var)))


def _dynamic_vars(f: ir.PrimFunc) -> list:
    """Symbolic size variables used in parameter shapes/strides (declared with T.dynamic)."""
    scalar_params = {p for p in f.params if isinstance(p, ir.Var)}
    seen, out = set(), []
    from .visitor import collect

    for p in list(f.params) + list(f.workspaces):
        if not isinstance(p, ir.Buffer):
            continue
        for s in list(p.shape) + list(p.strides or ()):
            if isinstance(s, ir.Expr):
                for v in collect(s, lambda n: isinstance(n, ir.Var)):
                    if v not in seen and v not in scalar_params:
                        seen.add(v)
                        out.append(v)
    return out


def print_node(node) -> str:
    p = Printer()
    if isinstance(node, ir.PrimFunc):
        return p.func(node)
    if isinstance(node, ir.Stmt):
        p.body(node, 0)
        return "\n".join(p.lines)
    return p.expr(node)
