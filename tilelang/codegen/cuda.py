"""Thread IR -> CUDA C++ source.

Expects a lowered kernel (`LoweredKernel`): a `Kernel` whose body holds only thread-level
statements (loops, ifs, lets, register arrays, element loads/stores on global, shared and
local buffers, calls of device intrinsics), shared buffers already placed in the dynamic
shared-memory arena, and global accesses already guarded. Produces readable C++: the user's
buffer and variable names, simplified indices, one statement per line.
"""

from __future__ import annotations

import math
import re

from ..arith import Analyzer
from ..ir import nodes as ir
from ..ir.dtype import PACKED_INTS, DType
from ..ir.printer import Namer
from ..ir.visitor import free_vars
from .intrinsics import render_call

# float4_e2m1fn: a struct in tl/common.cuh, read and written through tl::fp4_load / fp4_store
_FP4 = "float4_e2m1fn"

_BIN_C = {"add": "+", "sub": "-", "mul": "*", "div": "/", "bitand": "&", "bitor": "|",
          "bitxor": "^", "shl": "<<", "shr": ">>", "truncdiv": "/", "truncmod": "%"}
_PREC = {"add": 5, "sub": 5, "mul": 6, "div": 6, "truncdiv": 6, "truncmod": 6, "floordiv": 6,
         "floormod": 6, "bitand": 3, "bitor": 1, "bitxor": 2, "shl": 4, "shr": 4}
_SHIFT_MASK_OPERAND = _PREC["mul"] + 1  # binds tighter than any binary operator: parenthesized
_CMP_C = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}

BUILTIN_INDEX = {"threadIdx.x", "threadIdx.y", "threadIdx.z", "blockIdx.x", "blockIdx.y",
                 "blockIdx.z"}


def _scalar_packed_access(b: ir.Buffer, dt: DType):
    """Elements of a packed sub-byte buffer are accessed one at a time (vector widths are 1
    for them: engine/context.py)."""
    if dt.lanes > 1:
        raise AssertionError(f"codegen: a {dt} access of the packed {b.dtype} buffer {b.name}")


def _power_of_two_exponent(e) -> int | None:
    """k where `e` is the integer constant 2**k (k >= 1), else None."""
    if isinstance(e, ir.Const) and isinstance(e.value, int) and e.value > 1 and \
            e.value & (e.value - 1) == 0:
        return e.value.bit_length() - 1
    return None


def _not_packed_int(b: ir.Buffer):
    """transform/pack_sub_byte.py leaves no element access of a packed int4 buffer."""
    if b.dtype.base in PACKED_INTS:
        raise AssertionError(f"codegen: an element access of the packed {b.dtype} buffer "
                             f"{b.name} (pack_sub_byte rewrites them onto its bytes)")


def _summands(e) -> list:
    """The terms of a sum `a + b + ...` (one term for anything else)."""
    if isinstance(e, ir.Binary) and e.op == "add":
        return _summands(e.a) + _summands(e.b)
    return [e]


def _sum(terms):
    total = terms[0]
    for t in terms[1:]:
        total = ir.binary("add", total, t)
    return total


def ctype(dt: DType) -> str:
    if dt.lanes > 1:
        return f"tl::vec<{DType(dt.base).ctype}, {dt.lanes}>"
    return dt.ctype


# Codes of the 8-bit floats' non-finite values, spelled as bits because the fp8 classes' float
# constructors saturate (CUDA's SATFINITE conversion turns an infinity into the largest finite
# value). E4M3 has no infinity: its constants were rounded to +-448 when built, as torch does.
_FP8_NONFINITE_CODES = {"float8_e5m2": {"inf": 0x7C, "nan": 0x7F},
                        "float8_e4m3": {"nan": 0x7F}}


def float_literal(value: float, dt: DType) -> str:
    codes = _FP8_NONFINITE_CODES.get(dt.name)
    if codes is not None and not math.isfinite(value):
        code = codes["nan"] if math.isnan(value) else codes["inf"] | (0x80 if value < 0 else 0)
        return f"tl::bit_cast<{dt.ctype}>((unsigned char){code:#04x})"
    if math.isnan(value):
        text = "CUDART_NAN_F" if dt.name != "float64" else "CUDART_NAN"
    elif math.isinf(value):
        text = ("CUDART_INF_F" if dt.name != "float64" else "CUDART_INF")
        if value < 0:
            text = "-" + text
    elif dt.name == "float64":
        text = repr(float(value))
        if "e" not in text and "." not in text:
            text += ".0"
    else:
        text = repr(float(value))
        if "e" not in text and "." not in text and "inf" not in text:
            text += ".0"
        text += "f"
        if text.startswith("-"):
            text = f"({text})"
    if dt.name in ("float32", "float64"):
        return text
    if dt.base == _FP4:  # a plain struct (tl/common.cuh): converted, not constructed
        return f"tl::cast<{dt.ctype}>({text})"
    return f"{dt.ctype}({text})"


# C++ keywords and names the generated code itself uses: user names that clash get a suffix.
RESERVED = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
extern false float for friend goto if inline int long mutable namespace new noexcept not
not_eq nullptr operator or or_eq private protected public register reinterpret_cast requires
return short signed sizeof static static_assert static_cast struct switch template this
thread_local throw true try typedef typeid typename union unsigned using virtual void volatile
wchar_t while xor xor_eq
smem tl half half_t bfloat16_t threadIdx blockIdx blockDim gridDim warpSize dim3 int2 main
min max abs exp uint4 uint2 uint1 float2 float4 std block_
""".split())


def c_identifier(name: str) -> str:
    """`name` as an identifier the generated C++ may declare: a character other than an ASCII
    letter, digit or '_' is spelled by its code point (`é` -> `v_ue9_`), and the forms C++
    reserves (`__shared__`, `_Tile`, any `__`) lose their extra underscores behind a `v`.
    Keywords and the names the kernel itself uses are avoided by `CudaPrinter`'s Namer."""
    text = "".join(c if c.isascii() and (c.isalnum() or c == "_") else f"_u{ord(c):x}_"
                   for c in name)
    text = re.sub("_{2,}", "_", text) or "v"
    if text[0] == "_" or text[0].isdigit():
        text = "v" + text
    return text


class CudaPrinter:
    """Prints one kernel; `names` keeps C identifiers unique and readable."""

    def __init__(self, analyzer: Analyzer = None, fast_math: bool = False, sm: int = 0):
        self.sm = sm  # the target's compute capability (90 for sm_90a); 0 when unknown
        self.names = Namer(c_identifier)
        self.names.used.update(RESERVED)
        self.lines: list[str] = []
        self.indent = 1
        self.analyzer = analyzer or Analyzer()
        self.fast_math = fast_math
        self.var_names: dict = {}  # Var -> C text (for builtins)
        # A var or buffer the IR binds more than once (a let the pipeliner copied into the
        # prologue and the loop body, say) would be declared twice in one C++ scope, or
        # shadow itself: a binding while an earlier one is still in scope gets a fresh name
        # while its body is printed.
        self.scopes: list = [set()]  # ids declared in each open C++ block, innermost last
        self.rebound: dict = {}  # id -> the C name of the binding being printed
        self.scalar_buffers: set = set()  # local.var buffers printed as scalars
        self.block_thread = None  # the thread index of a one-dimensional block (role splits)
        self.unrolled: set = set()  # the vars of the fully unrolled loops around the statement

    # ---- expressions ------------------------------------------------------------------------
    def name(self, obj) -> str:
        if isinstance(obj, ir.Var) and obj in self.var_names:
            return self.var_names[obj]
        if id(obj) in self.rebound:
            return self.rebound[id(obj)]
        if isinstance(obj, ir.Buffer) and obj.view_of is not None:
            # a view (T.Tensor(shape, dtype, X.data)) is X's pointer indexed at its own shape
            return f"(({ctype(obj.dtype)}*){self.names(obj.view_of)})"
        return self.names(obj)

    def expr(self, e, prec: int = 0) -> str:
        if isinstance(e, bool):
            return "true" if e else "false"
        if isinstance(e, int):
            return str(e) if e >= 0 or prec == 0 else f"({e})"
        if isinstance(e, ir.Var):
            return self.name(e)
        if isinstance(e, ir.Const):
            return self.const(e, prec)
        if isinstance(e, ir.Binary):
            return self.binary(e, prec)
        if isinstance(e, ir.Compare):
            if e.a.dtype.is_float8:  # the fp8 types have no comparisons; float holds them
                text = (f"float({self.expr(e.a)}) {_CMP_C[e.op]} "
                        f"float({self.expr(e.b)})")
            else:
                text = f"{self.expr(e.a, 7)} {_CMP_C[e.op]} {self.expr(e.b, 7)}"
            return f"({text})" if prec > 0 else text
        if isinstance(e, ir.Logical):
            op = "&&" if e.op == "and" else "||"
            text = f"{self.expr(e.a, 1)} {op} {self.expr(e.b, 1)}"
            return f"({text})" if prec > 0 else text
        if isinstance(e, ir.Unary):
            if e.op == "neg":
                if e.dtype.name in ("float16", "bfloat16"):
                    return f"(-{self.expr(e.a, 8)})"
                return f"(-{self.expr(e.a, 8)})" if prec > 0 else f"-{self.expr(e.a, 8)}"
            if e.op == "not":
                return f"(!{self.expr(e.a, 8)})"
            return f"(~{self.expr(e.a, 8)})"
        if isinstance(e, ir.Select):
            text = (f"{self.expr(e.cond, 1)} ? {self.expr(e.true_value, 1)} : "
                    f"{self.expr(e.false_value, 1)}")
            return f"({text})"
        if isinstance(e, ir.Cast):
            return self.cast(e)
        if isinstance(e, ir.Load):
            return self.load(e)
        if isinstance(e, ir.Call):
            return render_call(self, e)
        raise TypeError(f"cannot print {type(e).__name__} as CUDA")

    def const(self, c: ir.Const, prec: int = 0) -> str:
        dt, v = c.dtype, c.value
        if dt.is_bool:
            return "true" if v else "false"
        if dt.is_int:
            suffix = {"int64": "LL", "uint64": "ULL", "uint32": "u"}.get(dt.name, "")
            if dt.name == "int32" and v == -2**31:
                return "(-2147483647 - 1)"
            text = f"{v}{suffix}"
            if dt.name in ("int8", "int16", "uint8", "uint16"):
                text = f"({dt.ctype}){v}"
                return f"({text})" if prec > 0 else text
            return f"({text})" if v < 0 and prec > 0 else text
        return float_literal(v, dt)

    def binary(self, e: ir.Binary, prec: int) -> str:
        op = e.op
        if op in ("min", "max"):
            if e.dtype.name in ("float32", "float64") or e.dtype.is_int:
                fn = {"min": "min", "max": "max"}[op]
                if e.dtype.name == "float32":
                    fn = "f" + fn
                return f"{fn}({self.expr(e.a)}, {self.expr(e.b)})"
            return f"tl::{op}({self.expr(e.a)}, {self.expr(e.b)})"
        if op == "pow":
            return f"tl::pow({self.expr(e.a)}, {self.expr(e.b)})"
        if op in ("floordiv", "floormod") and e.dtype.is_int:
            nonneg = self.analyzer.prove(ir.logical_and(ir.compare("ge", e.a, 0),
                                                        ir.compare("gt", e.b, 0)))
            if not nonneg:
                fn = "tl::floordiv" if op == "floordiv" else "tl::floormod"
                return f"{fn}({self.expr(e.a)}, {self.expr(e.b)})"
            shift = _power_of_two_exponent(e.b)
            if shift is not None:
                # a shift or a mask, as the division means on a non-negative value: nvcc keeps
                # `tx / 4 % 8` of a signed index as a signed division (its range is lost), and
                # a mask comparison written with them compiled to 150 ISETP + 66 FSEL where the
                # shifted form took 90 + 36 (attention-sink forward, sm_90a)
                if op == "floordiv":
                    op, b = "shr", ir.const(shift, e.b.dtype)
                else:
                    op, b = "bitand", ir.const((1 << shift) - 1, e.b.dtype)
                # parenthesized as an operand, and its own operand parenthesized, wherever
                # C would not need it too (`(a + b) >> 2`, `((tx >> 2) & 7) ^ b`): C ranks
                # & below comparisons and shifts below +, which readers (and -Wparentheses)
                # do not expect
                text = f"{self.expr(e.a, _SHIFT_MASK_OPERAND)} {_BIN_C[op]} {self.expr(b)}"
                return f"({text})" if prec > 0 else text
            sym = "/" if op == "floordiv" else "%"
        else:
            sym = _BIN_C[op]
        p = _PREC[op]
        text = f"{self.expr(e.a, p)} {sym} {self.expr(e.b, p + 1)}"
        return f"({text})" if p < prec else text

    def cast(self, e: ir.Cast) -> str:
        src = e.value.dtype
        dst = e.dtype
        inner = self.expr(e.value, 9)
        if dst.is_bool:
            if src.is_bool:
                return inner
            if src.is_float8 or src.name in ("float16", "bfloat16"):
                # `x != 0` is ambiguous or missing on these classes: compare as float
                return f"tl::cast<bool>({self.expr(e.value)})"
            return f"({inner} != 0)"
        if dst.base in PACKED_INTS:  # 4-bit integers wrap like every narrower integer
            sign = "s" if dst.kind == "i" else "u"
            if src.is_int or src.is_bool:
                return f"tl::wrap_{sign}4((int){inner})"
            return f"tl::sat_{sign}4(tl::cast<int>({self.expr(e.value)}))"
        if src.name in ("float16", "bfloat16") or dst.name in ("float16", "bfloat16") or \
                src.is_float8 or dst.is_float8 or src.base == _FP4 or dst.base == _FP4:
            return f"tl::cast<{ctype(dst)}>({self.expr(e.value)})"
        return f"(({ctype(dst)}){inner})"

    def load(self, e: ir.Load) -> str:
        b = e.buffer
        if b in self.scalar_buffers:
            return self.name(b)
        _not_packed_int(b)
        if b.dtype.base == _FP4:
            _scalar_packed_access(b, e.dtype)
            return f"tl::fp4_load({self.name(b)}, {self.flat_index(b, e.indices)})"
        if e.dtype.lanes > 1:
            return f"(*({ctype(e.dtype)}*){self.element_address(b, e.indices)})"
        return self.element(b, e.indices)

    def element(self, b: ir.Buffer, indices) -> str:
        """`b[index]`, or for a shared buffer indexed by unrolled loops `(b + rest)[unrolled]`
        (`_unrolled_split`)."""
        split = self._unrolled_split(b, indices)
        if split is None:
            return f"{self.name(b)}[{self.flat_index(b, indices)}]"
        rest, unrolled = split
        return f"({self.name(b)} + {rest})[{unrolled}]"

    def element_address(self, b: ir.Buffer, indices) -> str:
        """`(b + index)`: the index binds as the right operand of `+` (a shifted or masked
        index, `(b + (i & 7))`, keeps its meaning)."""
        split = self._unrolled_split(b, indices)
        if split is not None:
            return f"(({self.name(b)} + {split[0]}) + {split[1]})"
        return f"({self.name(b)} + {self.flat_index(b, indices, _PREC['add'])})"

    def _unrolled_split(self, b: ir.Buffer, indices):
        """The index of a shared-memory access inside fully unrolled loops, as the texts of
        (the terms that vary otherwise, the terms of the unrolled loop vars and constants),
        both bound as `+` operands; None where one part would be empty or `b` is not shared.

        Why: NVRTC computes shared addresses in 64 bits (nvcc in 32), so `b[rest + c]` is
        scaled after the add and every unrolled access costs an add and a shift of its own;
        `(b + rest)[c]` leaves each c, a constant once the loop is unrolled, to the load's
        immediate offset (mHC pre's 128 bfloat16 loads per stage: 224 fewer instructions)."""
        if not self.unrolled or b.scope not in ("shared", "shared.dyn"):
            return None
        rest, unrolled, varies = [], [], False
        for term in _summands(self._flat(b, indices)):
            names = free_vars(term)
            if all(v in self.unrolled for v in names):
                unrolled.append(term)
                varies = varies or bool(names)
            else:
                rest.append(term)
        if not rest or not varies:
            return None
        return (f"({self.expr(_sum(rest))})", self.expr(_sum(unrolled), _PREC["add"]))

    def _flat(self, b: ir.Buffer, indices) -> ir.Expr:
        if len(indices) == 1:
            return ir.as_expr(indices[0])
        strides = b.effective_strides()
        total = 0
        for i, s in zip(indices, strides):
            total = ir.binary("add", total, ir.binary("mul", i, s))
        from ..arith import simplify

        return simplify(total, self.analyzer)

    def flat_index(self, b: ir.Buffer, indices, prec: int = 0) -> str:
        if len(indices) == 1:
            return self.expr(indices[0], prec)
        return self.expr(self._flat(b, indices), prec)

    # ---- statements -------------------------------------------------------------------------
    def emit(self, text: str):
        self.lines.append("  " * self.indent + text)

    def stmt(self, s):
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            raise TypeError(f"codegen: unexpected statement {type(s).__name__} (a tile "
                            "operator that was not lowered?)")
        method(s)

    def block(self, s):
        self.indent += 1
        self.scopes.append(set())
        self.stmt(s)
        self.scopes.pop()
        self.indent -= 1

    def s_Seq(self, s):
        for x in s.stmts:
            self.stmt(x)

    def s_Evaluate(self, s):
        text = self.expr(s.value)
        if text:
            self.emit(text + ";")

    def s_Store(self, s):
        b = s.buffer
        if b in self.scalar_buffers:
            self.emit(f"{self.name(b)} = {self.expr(s.value)};")
            return
        _not_packed_int(b)
        if b.dtype.base == _FP4:
            _scalar_packed_access(b, s.value.dtype)
            self.emit(f"tl::fp4_store({self.name(b)}, {self.flat_index(b, s.indices)}, "
                      f"{self.expr(s.value)});")
            return
        if s.value.dtype.lanes > 1:
            self.emit(f"*({ctype(s.value.dtype)}*){self.element_address(b, s.indices)} = "
                      f"{self.expr(s.value)};")
            return
        self.emit(f"{self.element(b, s.indices)} = {self.expr(s.value)};")

    def _declare(self, obj, print_binding):
        """Print a declaration of `obj` and what follows in its scope (`print_binding()`),
        under a fresh C name when `obj` was declared before."""
        key = id(obj)
        if not any(key in scope for scope in self.scopes):
            self.scopes[-1].add(key)
            print_binding()
            return
        outer = self.rebound.get(key)
        self.rebound[key] = self.names.fresh(self.names(obj))
        try:
            print_binding()
        finally:
            if outer is None:
                del self.rebound[key]
            else:
                self.rebound[key] = outer

    def s_LetStmt(self, s):
        value = self.expr(s.value)  # before a rebinding: the value may read an earlier one

        def binding():
            self.emit(f"const {ctype(s.var.dtype)} {self.name(s.var)} = {value};")
            self.stmt(s.body)

        self._declare(s.var, binding)

    def s_Allocate(self, s):
        self._declare(s.buffer, lambda: self._allocate(s))

    def _allocate(self, s):
        b = s.buffer
        if b.scope == "local.var":
            self.scalar_buffers.add(b)
            init = f" = {self.expr(s.init)}" if s.init is not None else ""
            self.emit(f"{ctype(b.dtype)} {self.name(b)}{init};")
        else:
            n = b.numel()
            # a register array may be moved by one vector access (tl::copy_vec of its whole
            # size): aligned to its size (a power of two), at most 16 bytes
            size = b.dtype.bytes * (n if isinstance(n, int) else 1)
            width = 16 if size >= 16 else size if size & (size - 1) == 0 else 0
            align = f" __align__({width})" if width > b.dtype.bytes else ""
            self.emit(f"{ctype(b.dtype)} {self.name(b)}[{self.expr(n)}]{align};")
        self.stmt(s.body)

    def s_If(self, s):
        self.emit(f"if ({self._role_split_cond(s) or self.expr(s.cond)}) {{")
        self.block(s.then_body)
        if s.else_body is not None:
            if isinstance(s.else_body, ir.If):
                self.emit("} else")
                self.s_If(s.else_body)
                return
            self.emit("} else {")
            self.block(s.else_body)
        self.emit("}")

    def _role_split_cond(self, s):
        """The condition of a split of the block into thread groups (both branches
        `thread_group` regions, the warp specialisation's producer / consumers) at the kernel's
        top level, `tx > c` or the like on a warp boundary, printed on lane 0's thread index
        (`__shfl_sync(~0, tx, 0)`); None for any other branch. The branch is the same for
        every lane either way, but only a condition the CUDA compiler knows to be warp-uniform
        lets it keep each role's loop counters, stage indices and shared-memory addresses
        (mbarriers, wgmma descriptors) in uniform registers: on `tx > 127` the 2xAcc fp8 GEMM
        (one consumer warpgroup) computed them per thread, spilled the stage address and
        reloaded it before every mbarrier wait, and moved every wgmma descriptor over with
        R2UR (ptxas, sm_90a). Every thread reaches a top-level statement, so the full-warp
        shuffle is safe; the IR keeps `tx > c`, whose bounds the passes use."""
        roles = (s.then_body, s.else_body)
        if self.indent != 1 or self.block_thread is None or not all(
                isinstance(b, ir.Attr) and b.key == "thread_group" for b in roles):
            return None
        c = s.cond
        if not isinstance(c, ir.Compare) or c.a is not self.block_thread or \
                not isinstance(c.b, ir.Const):
            return None
        first_of_upper = c.b.value + 1 if c.op in ("gt", "le") else c.b.value
        if c.op not in ("gt", "ge", "lt", "le") or first_of_upper % 32:
            return None
        lane0 = f"__shfl_sync(0xffffffffu, {self.expr(c.a)}, 0, 32)"
        return f"{lane0} {_CMP_C[c.op]} {self.expr(c.b)}"

    def s_For(self, s):
        v = self.name(s.var)
        dt = ctype(s.var.dtype)
        start = self.expr(s.start)
        from ..arith import simplify

        stop = simplify(ir.binary("add", s.start, ir.binary("mul", s.extent, s.step))
                        if s.step != 1 else ir.binary("add", s.start, s.extent), self.analyzer)
        if s.kind == "unroll":
            factor = s.annotation("unroll_factor")
            self.emit(f"#pragma unroll {factor}" if factor else "#pragma unroll")
        elif s.kind == "serial" and s.annotation("no_unroll"):
            self.emit("#pragma unroll 1")
        cmp = "<" if s.step > 0 else ">"
        inc = f"++{v}" if s.step == 1 else f"{v} += {s.step}"
        # C's comparison binds tighter than & ^ | (looser than a shift): `i < (n & 3)`, never
        # `(i < n) & 3`
        bound = self.expr(stop, _PREC["shr"])
        self.emit(f"for ({dt} {v} = {start}; {v} {cmp} {bound}; {inc}) {{")
        if s.step == 1:  # the body's index arithmetic may rely on start <= var < stop
            self.analyzer.bind(s.var, s.start, s.extent)
        # a constant-trip loop under a plain `#pragma unroll` is unrolled whole by NVVM
        unrolled = s.kind == "unroll" and not s.annotation("unroll_factor") and \
            isinstance(s.extent, (int, ir.Const))
        if unrolled:
            self.unrolled.add(s.var)
        self.block(s.body)
        self.unrolled.discard(s.var)
        self.emit("}")

    def s_While(self, s):
        self.emit(f"while ({self.expr(s.cond)}) {{")
        self.block(s.body)
        self.emit("}")

    def s_Attr(self, s):
        if s.key == "tensor_address":  # T.make_tensor(address, ...): a pointer from here on
            buf, addr = s.value
            t = ctype(buf.dtype)
            self.emit(f"{t}* __restrict__ {self.name(buf)} = ({t}*)({self.expr(addr)});")
            self.stmt(s.body)
            return
        if s.key != "partitioned":  # a marker for insert_sync, nothing a reader needs
            self.emit(f"// {s.key}: {s.value}")
        self.stmt(s.body)

    def s_Break(self, s):
        self.emit("break;")

    def s_Continue(self, s):
        self.emit("continue;")

    def s_Assert(self, s):
        msg = (s.message or "device assertion failed").replace('"', "'")
        self.emit(f'tl::device_assert({self.expr(s.cond)}, "{msg}");')
