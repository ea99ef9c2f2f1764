"""The tile IR: expressions, buffers, statements and functions, all in one module.

Nodes are frozen dataclasses with `__slots__`. Expressions overload Python's operators to build
more IR (so `==` builds a comparison); compare nodes structurally with `structural_equal`, and
key dictionaries by identity (every node hashes by identity).

Typing follows the reference system's observed rules (SEMANTICS.md §10): an int literal is int32
(int64 when it does not fit), a float literal float32; mixing int and float casts the int to the
float type; two floats or two ints widen to the wider; same-width signed/unsigned gives unsigned.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field, fields, replace
from typing import Any, Optional

import numpy as np

from . import hooks
from .dtype import PACKED_GLOBAL, PACKED_SHARED, DType, round_to

__all__ = [
    "Node", "Expr", "Var", "Const", "Binary", "Compare", "Logical", "Unary", "Select", "Cast",
    "Call", "Load", "Buffer", "BufferRegion", "Stmt", "Seq", "Evaluate", "Store", "LetStmt",
    "Allocate", "If", "For", "While", "Break", "Continue", "Attr", "Kernel", "Assert", "Copy", "Fill",
    "Gemm", "GemmSp", "Reduce", "CumSum", "AtomicTile", "Print", "PrimFunc", "as_expr", "const",
    "binary", "compare", "cast_to", "select", "call", "logical_and", "logical_or",
    "logical_not", "structural_equal", "SIDE_EFFECT_CALLS", "INT32", "BOOL", "FLOAT32",
]

INT32 = DType("int32")
INT64 = DType("int64")
BOOL = DType("bool")
FLOAT32 = DType("float32")
HANDLE = DType("handle")


class Node:
    __slots__ = ()

    def __str__(self):
        from .printer import print_node

        return print_node(self)

    def __repr__(self):
        return f"<{type(self).__name__}: {self}>"


# =============================================================================================
# Expressions
# =============================================================================================


class ExprOps:
    """Operator overloading shared by expressions and expression-like values (vars, refs)."""

    __slots__ = ()

    def __add__(self, o): return binary("add", self, o)
    def __radd__(self, o): return binary("add", o, self)
    def __sub__(self, o): return binary("sub", self, o)
    def __rsub__(self, o): return binary("sub", o, self)
    def __mul__(self, o): return binary("mul", self, o)
    def __rmul__(self, o): return binary("mul", o, self)
    def __truediv__(self, o): return binary("div", self, o)
    def __rtruediv__(self, o): return binary("div", o, self)
    def __floordiv__(self, o): return binary("floordiv", self, o)
    def __rfloordiv__(self, o): return binary("floordiv", o, self)
    def __mod__(self, o): return binary("floormod", self, o)
    def __rmod__(self, o): return binary("floormod", o, self)
    def __and__(self, o): return binary("bitand", self, o)
    def __rand__(self, o): return binary("bitand", o, self)
    def __or__(self, o): return binary("bitor", self, o)
    def __ror__(self, o): return binary("bitor", o, self)
    def __xor__(self, o): return binary("bitxor", self, o)
    def __rxor__(self, o): return binary("bitxor", o, self)
    def __lshift__(self, o): return binary("shl", self, o)
    def __rlshift__(self, o): return binary("shl", o, self)
    def __rshift__(self, o): return binary("shr", self, o)
    def __rrshift__(self, o): return binary("shr", o, self)
    def __lt__(self, o): return compare("lt", self, o)
    def __le__(self, o): return compare("le", self, o)
    def __gt__(self, o): return compare("gt", self, o)
    def __ge__(self, o): return compare("ge", self, o)
    def __eq__(self, o): return compare("eq", self, o)
    def __ne__(self, o): return compare("ne", self, o)
    def __neg__(self): return unary("neg", self)
    def __pos__(self): return as_expr(self)
    def __invert__(self): return unary("bitnot", self)
    def __abs__(self): return call("abs", [self])

    def __pow__(self, o):
        raise TypeError("`**` is not defined on kernel expressions; use T.pow(x, y)")

    __rpow__ = __pow__
    __hash__ = object.__hash__

    def __bool__(self):
        raise TypeError(
            "a symbolic kernel value was used where Python needs a concrete bool; conditions "
            "on kernel values work in `if`/`while` inside a kernel or macro body, or use "
            "T.if_then_else(cond, a, b)")

    def __index__(self):
        raise TypeError("a symbolic kernel value cannot be used as a Python integer here "
                        "(e.g. in range(), list indexing or a shape of a Python object)")

    def __iter__(self):
        raise TypeError("a scalar kernel value is not iterable")

    def astype(self, dtype):
        return cast_to(self, dtype)


class Expr(ExprOps, Node):
    """A kernel expression (`T.PrimExpr`): a typed value of the kernel being traced; Python
    operators on it build larger expressions."""

    __slots__ = ()
    dtype: DType


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Var(Expr):
    """A scalar variable: loop, block/thread index, let binding, or symbolic shape/parameter."""

    name: str
    dtype: DType = INT32


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Const(Expr):
    value: Any
    dtype: DType

    # A constant has a concrete value, so Python may use it as one (as TVM's IntImm): the
    # folded answer of `simplify(a - b) == 0`, `int(simplify(expr))`.
    def __bool__(self):
        return bool(self.value)

    def __int__(self):
        return int(self.value)

    def __float__(self):
        return float(self.value)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Binary(Expr):
    """Arithmetic: add sub mul div floordiv floormod truncdiv truncmod min max pow bitand bitor
    bitxor shl shr. `div` is true division (float operands only)."""

    op: str
    a: Expr
    b: Expr
    dtype: DType


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Compare(Expr):
    op: str  # lt le gt ge eq ne
    a: Expr
    b: Expr
    dtype: DType = BOOL


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Logical(Expr):
    op: str  # and or
    a: Expr
    b: Expr
    dtype: DType = BOOL


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Unary(Expr):
    op: str  # neg not bitnot
    a: Expr
    dtype: DType


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Select(Expr):
    cond: Expr
    true_value: Expr
    false_value: Expr
    dtype: DType


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Cast(Expr):
    value: Expr
    dtype: DType


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Call(Expr):
    """An intrinsic or external call. `op` names it (exp, shfl_xor, call_extern, atomic_add...)."""

    op: str
    args: tuple
    dtype: DType
    attrs: tuple = ()  # (key, value) pairs


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Load(Expr):
    buffer: "Buffer"
    indices: tuple
    dtype: DType


# Calls that have an effect beyond their value: never deduplicated, hoisted or dropped.
SIDE_EFFECT_CALLS = frozenset({
    "atomic_add", "atomic_max", "atomic_min", "atomic_or", "atomic_and", "atomic_xor", "atomic_addx2", "atomic_addx4", "atomic_store",
    "atomic_load", "call_extern", "shfl_xor", "shfl_down", "shfl_up", "shfl_sync",
    "sync_threads", "named_barrier_arrive", "sync_warp", "print", "device_assert", "barrier_arrive", "barrier_wait",
    "call_packed", "ptx", "set_max_nreg", "wait_wgmma", "fence_proxy_async",
    "warp_reduce_sum", "warp_reduce_max", "warp_reduce_min", "warp_reduce_bitand",
    "warp_reduce_bitor",
    "pdl_trigger", "pdl_sync",
})

# The CUDA call of T.sync_grid (a `call_extern`): codegen includes <cooperative_groups.h> for a
# kernel launched cooperatively; the interpreter runs the blocks of a kernel making it side by
# side.
GRID_SYNC = "cooperative_groups::this_grid().sync"


def is_collective_sync(node) -> bool:
    """Whether `node` (an expression) is a barrier every thread of the block or grid must
    reach: `T.sync_grid`, `T.sync_threads` / `__syncthreads`. Passes that let only some
    threads run a statement (a replicated loop's representative) must keep these for all."""
    if not isinstance(node, Call):
        return False
    if node.op == "sync_threads":
        return True
    return node.op == "call_extern" and node.args and node.args[0] in (GRID_SYNC, "__syncthreads")


# =============================================================================================
# Buffers and regions
# =============================================================================================

SCOPES = ("global", "shared", "shared.dyn", "local.fragment", "local", "local.var", "shared.barrier")


class Buffer(ExprOps, Node):
    """A named multi-dimensional array in one memory scope.

    `shape` holds Python ints for static extents and `Expr`s for symbolic ones; `strides` is
    None for row-major contiguous storage. A `local.var` buffer (from `T.alloc_var`) behaves
    like the scalar it holds: reading the name reads element 0.
    """

    __slots__ = ("name", "shape", "dtype", "scope", "strides", "view_of", "elem_offset", "loc",
                 "computed_address", "__weakref__")

    def __init__(self, name, shape, dtype, scope="global", strides=None, data=None,
                 elem_offset=0, loc=None, computed_address=False):
        self.name = name
        self.shape = tuple(shape)
        self.dtype = DType(dtype)
        if not self.dtype.storable and not _packed_storage(self.dtype, scope):
            _refuse_element_type(self.dtype, scope)
        self.scope = scope
        self.strides = tuple(strides) if strides is not None else None
        # a view (`T.Tensor(shape, dtype, X.data)` in a kernel) names the buffer whose
        # storage it re-reads at its own shape; None for a buffer with storage of its own
        if isinstance(data, BufferData):
            data = data.buffer
        self.view_of = None if data is None else (data.view_of or data)
        self.elem_offset = elem_offset
        self.loc = loc
        # a global tensor at an address computed in the kernel (`T.make_tensor(table[i], ...)`;
        # bound by an Attr("tensor_address", (buffer, address)) around its uses): no TMA
        # descriptor can be made for it on the host
        self.computed_address = computed_address

    @property
    def data(self) -> "BufferData":
        """The storage handle (the reference's `buf.data`): what `T.Tensor(shape, dtype,
        buf.data)` takes to make a view of this buffer's memory."""
        return BufferData(self.view_of or self)

    # ---- structure ------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_static(self) -> bool:
        return all(isinstance(s, int) for s in self.shape)

    def numel(self):
        n = 1
        for s in self.shape:
            n = n * s
        return n

    def row_major_strides(self) -> tuple:
        strides, acc = [], 1
        for s in reversed(self.shape):
            strides.append(acc)
            acc = acc * s
        return tuple(reversed(strides))

    def effective_strides(self) -> tuple:
        return self.strides if self.strides is not None else self.row_major_strides()

    # ---- indexing ---------------------------------------------------------------------------
    def __getitem__(self, key):
        return hooks.getitem(self, key)

    def __setitem__(self, key, value):
        hooks.setitem(self, key, value)

    def access_ptr(self, mode="r", offset=0, extent=None):
        return hooks.access_ptr(self, mode, offset=offset, extent=extent)

    # Equality stays identity-based so that buffers work in lists and as dict keys; only a
    # scalar `local.var` compares symbolically.
    def __eq__(self, other):
        if self.scope == "local.var":
            return compare("eq", self, other)
        return self is other

    def __ne__(self, other):
        if self.scope == "local.var":
            return compare("ne", self, other)
        return self is not other

    __hash__ = object.__hash__

    def __bool__(self):
        if self.scope == "local.var":
            return ExprOps.__bool__(self)
        return True

    def __iter__(self):
        raise TypeError(f"buffer {self.name} is not iterable; index it or use T.Parallel")

    def __len__(self):
        first = self.shape[0] if self.shape else 1
        if not isinstance(first, int):
            raise TypeError(f"buffer {self.name} has a symbolic first dimension")
        return first

    def __repr__(self):
        return f"Buffer({self.name}, {list(self.shape)}, {self.dtype.name}, {self.scope})"

    __str__ = __repr__


def _packed_storage(dtype: DType, scope: str) -> bool:
    """Whether `scope` memory holds `dtype` packed two to a byte (global tensors: FP4, int4,
    uint4; shared memory: int4, uint4)."""
    if dtype.lanes != 1:
        return False
    if scope == "global":
        return dtype.base in PACKED_GLOBAL
    return scope.startswith("shared") and dtype.base in PACKED_SHARED


def _refuse_element_type(dtype: DType, scope: str):
    if dtype.base in PACKED_SHARED and dtype.lanes == 1:
        why = (f"{dtype} elements are stored packed two to a byte in global and shared memory "
               f"only; registers ({scope}) hold no packed types: use int8 / int32 registers "
               "(T.copy and T.gemm read int4 shared tiles directly)")
    elif dtype.base in PACKED_GLOBAL:
        why = (f"{dtype} elements are stored only in global tensors (kernel parameters, packed "
               f"two to a byte), not in {scope} memory (yet): convert them to a wider type "
               "(e.g. float16) where they are loaded")
    elif dtype.is_float4_e2m1_unpacked():
        why = ("it is the reference's staging type of FP4 tcgen05 operands in shared memory "
               "(sm_100), a backend this TileLang does not have; load float4_e2m1fn values "
               "from a global tensor and convert them")
    elif dtype.bits < 8:
        why = (f"{dtype} is a sub-byte type ({dtype.bits} bits); packed sub-byte storage is not "
               "supported (yet): store the values packed in uint8 / int8 and unpack them with "
               "shifts and masks")
    else:
        why = f"{dtype} has no storage type in this compiler (yet)"
    raise hooks.error(NotImplementedError, f"a buffer of {dtype} elements is not supported: "
                                           f"{why}; see docs/compatibility.md")


class BufferData:
    """`buf.data`: the storage of a buffer, as a handle (not an expression)."""

    __slots__ = ("buffer",)

    def __init__(self, buffer):
        self.buffer = buffer

    def __repr__(self):
        return f"{self.buffer.name}.data"


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BufferRegion(Node):
    """A rectangular region of a buffer: per dimension (start, extent)."""

    buffer: Buffer
    region: tuple  # tuple of (start: Expr|int, extent: Expr|int)

    @property
    def starts(self):
        return tuple(r[0] for r in self.region)

    @property
    def extents(self):
        return tuple(r[1] for r in self.region)

    @staticmethod
    def full(buffer: Buffer) -> "BufferRegion":
        return BufferRegion(buffer, tuple((0, s) for s in buffer.shape))


# =============================================================================================
# Statements
# =============================================================================================


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Stmt(Node):
    loc: Any = field(default=None, kw_only=True)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Seq(Stmt):
    stmts: tuple


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Evaluate(Stmt):
    value: Expr


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Store(Stmt):
    buffer: Buffer
    indices: tuple
    value: Expr


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class LetStmt(Stmt):
    var: Var
    value: Expr
    body: Stmt


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Allocate(Stmt):
    """A buffer private to each executing thread (local, local.var), live in `body`. `init`
    is the initial value of a `local.var` (None: uninitialised local array)."""

    buffer: Buffer
    body: Stmt
    init: Optional[Expr] = None


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class If(Stmt):
    cond: Expr
    then_body: Stmt
    else_body: Optional[Stmt] = None


LOOP_KINDS = ("serial", "parallel", "pipelined", "unroll", "vectorized")


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class For(Stmt):
    """`for var in range(start, start + extent * step, step)`; `extent` is the trip count.
    `annotations` carries kind-specific options, e.g. num_stages/order/stage for pipelined."""

    var: Var
    start: Expr
    extent: Expr
    kind: str
    body: Stmt
    step: int = 1
    annotations: tuple = ()  # (key, value) pairs

    def annotation(self, key, default=None):
        for k, v in self.annotations:
            if k == key:
                return v
        return default


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class While(Stmt):
    cond: Expr
    body: Stmt


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Break(Stmt):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Continue(Stmt):
    pass


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Assert(Stmt):
    cond: Expr
    message: str = ""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Attr(Stmt):
    """An annotated region of thread-level IR, e.g. ("thread_group", ("consumer", 128)): the
    body runs only on one group of threads (warp specialisation), which decides the kind of
    barrier the region may use."""

    key: str
    value: Any
    body: Stmt


# The SM count of the GPU a kernel is launched on, known at the launch only: a grid extent
# may name it (a persistent grid of one block per SM: transform/persistent_grid.py), the
# launcher reads it from the device (the CUDA path) and the kernel's code sees the launched
# extent as `gridDim` (the "num_blocks" call), so a kernel's code never depends on the GPU
# of the machine that compiled it.
DEVICE_SM_COUNT = Var("device_sm_count", INT32)

# CUDA's launch limits per axis (x, y, z). The interpreter enforces them too, so that both
# targets accept the same programs.
GRID_LIMITS = (2**31 - 1, 65535, 65535)
BLOCK_LIMITS = (1024, 1024, 64)


def launch_limit_problem(extents, limits=GRID_LIMITS, what="grid") -> Optional[str]:
    """Why a launch of these (int) extents is impossible, or None."""
    for axis, (e, lim) in enumerate(zip(extents, limits)):
        if isinstance(e, int) and e < 1:
            # the reference raises too (its issue 1993): a launch of no blocks is a bug in the
            # caller's sizes, which a silent no-op would hide
            return (f"{what} extent {e} along {'xyz'[axis]} launches no blocks (every extent "
                    "must be at least 1)")
        if isinstance(e, int) and e > lim:
            return (f"{what} extent {e} along {'xyz'[axis]} is past CUDA's limit of {lim} "
                    f"(at most {', '.join(map(str, limits))} along x, y, z)")
    return None


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Kernel(Stmt):
    """One kernel launch: a grid of blocks (1-3 extents) of `threads` (1-3 extents) threads.

    `allocs` are the block-scope buffers (shared and fragment); `attrs` holds block-level
    annotations such as ("use_swizzle", (panel, order)) and ("layout_map", ((buf, layout), ...)).
    """

    grid: tuple
    threads: tuple
    block_vars: tuple
    thread_vars: tuple
    body: Stmt
    allocs: tuple = ()
    attrs: tuple = ()

    def attr(self, key, default=None):
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    @property
    def num_threads(self) -> int:
        return math.prod(self.threads)


# ---- tile operators: collective per block, lowered by the backend --------------------------


OOB_VALUE = "oob_value"  # Copy option: what a source element outside its tensor reads
PREFER_INSTRUCTION = "prefer_instruction"  # Copy option: "tma", "cp_async" or "sync"


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Copy(Stmt):
    """Element-wise copy (with cast) between two regions of equal extents (after legalisation:
    unit dims aside, the non-unit extents pair up in order)."""

    src: BufferRegion
    dst: BufferRegion
    options: tuple = ()  # (key, value): disable_tma, coalesced_width, eviction_policy...


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class TmaCopy(Stmt):
    """`T.tma_copy`: one TMA transfer between a global region and a shared tile, issued by
    one thread of each group of `scope` threads and never waited for here.

    A load (global -> shared) first adds the tile's bytes to the transaction count of the
    mbarrier `barrier` (a Load of a `T.alloc_barrier` element), which the TMA unit counts
    down as the bytes land; the user arrives on and waits for that barrier. A store (shared
    -> global) commits a bulk group the user waits for (`T.tma_store_wait`). `scope` is the
    size of the leader-election group: None until transform/warp_roles.py sets it to the
    threads of the enclosing region (the block, a `T.ws` role or a thread-range branch);
    `leader` is then the condition, in the user's thread index, of the issuing threads.
    With `cluster_mask` (loads), the lowest-ranked block of the mask multicasts its tile to
    every block of the mask, the others in it issue nothing, blocks outside it load their own;
    every block adds the bytes to its own `barrier`."""

    src: BufferRegion
    dst: BufferRegion
    barrier: Any = None  # Load of a uint64 mbarrier element (loads), None (stores)
    scope: Any = None  # threads per leader-election group (int), None: the enclosing region
    leader: Any = None  # Expr: this thread issues the transfer (set by warp_roles.py)
    eviction_policy: Any = None
    in_role: bool = False  # issued inside a user role (warp_roles.py): ordered by mbarriers
    cluster_mask: Any = None  # int: a load multicast to these blocks of the cluster


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Fill(Stmt):
    dst: BufferRegion
    value: Expr


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Gemm(Stmt):
    """C (+)= op(A) @ op(B); operands are regions of 2-D extent (leading unit dims allowed)."""

    A: BufferRegion
    B: BufferRegion
    C: BufferRegion
    trans_A: bool = False
    trans_B: bool = False
    policy: str = "Square"
    clear_accum: Any = False
    k_pack: int = 1
    wg_wait: int = 0
    # `T.wgmma_gemm`: wgmma or a located error where the reference also has no wgmma
    require_wgmma: bool = False
    # int4 / uint4 operands whose A and B regions address their bytes (two values each):
    # set by transform/pack_sub_byte.py on the CUDA path; None: regions count elements
    packed: Any = None

    def operands(self) -> tuple:
        """The regions the gemm reads besides its accumulator."""
        return (self.A, self.B)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class GemmSp(Gemm):
    """`T.gemm_sp`: C (+)= op(A) @ op(B) where A is 2:4 structured sparse (1:2 for float32):
    the region A holds the kept elements of each group of 4 (2) consecutive elements along K
    (extent K/2 there) and E their positions, 4 bits per group (two 2-bit indices, or for 1:2
    0b0100 / 0b1110), packed from the lowest bits up into E's integers, E being M x K/e or,
    with trans_E, K/e x M (e = get_e_factor(A dtype, E dtype)). A passes wherever T.Gemm
    passes: visitors without `visit_GemmSp` treat it as a Gemm."""

    E: BufferRegion = None
    trans_E: bool = False

    def operands(self) -> tuple:
        return (self.A, self.E, self.B)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Reduce(Stmt):
    kind: str  # max min sum abssum absmax bitand bitor bitxor
    src: Buffer
    dst: Buffer
    dim: int
    clear: bool = True
    nan_propagate: bool = False


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class CumSum(Stmt):
    src: Buffer
    dst: Buffer
    dim: int
    reverse: bool = False
    kind: str = "sum"  # sum | max
    annotations: tuple = ()  # (key, value) pairs the user gave (printed; no lowering options)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class AtomicTile(Stmt):
    """Element-wise atomic read-modify-write of dst from src over a region (tile form)."""

    op: str  # add max min
    src: Any  # BufferRegion or scalar Expr
    dst: BufferRegion
    memory_order: str = "relaxed"
    use_tma: bool = False  # shared -> global add: one TMA reduction where it applies
    # n > 0 (`T.store_cluster_sum`): dst becomes the sum of src over the n blocks of a
    # cluster; the cluster's first block stores its tile, the others add theirs after a
    # cluster barrier, so dst's old contents are never read
    cluster_sum: int = 0


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Print(Stmt):
    """`T.print`: value is an Expr, a BufferRegion (whole buffer) or None (message only)."""

    value: Any
    msg: str = ""


# =============================================================================================
# Functions
# =============================================================================================


class PrimFunc(Node):
    """A traced kernel program: parameters (global buffers and scalar vars) and a body that is a
    sequence of Kernel launches (plus host-level lets/asserts).

    `outputs` lists parameters created by `T.empty` (returned by the lazy JIT); `workspaces`
    lists `T.alloc_global` buffers allocated per call.
    """

    __slots__ = ("name", "params", "body", "attrs", "outputs", "workspaces", "source",
                 "__weakref__")

    def __init__(self, name, params, body, attrs=None, outputs=(), workspaces=(), source=None):
        self.name = name
        self.params = tuple(params)
        self.body = body
        self.attrs = dict(attrs or {})
        self.outputs = tuple(outputs)
        self.workspaces = tuple(workspaces)
        self.source = source  # (filename, firstline) of the user's definition

    def with_body(self, body, **changes) -> "PrimFunc":
        kw = dict(name=self.name, params=self.params, body=body, attrs=self.attrs,
                  outputs=self.outputs, workspaces=self.workspaces, source=self.source)
        kw.update(changes)
        return PrimFunc(**kw)

    @property
    def buffer_map(self) -> dict:
        """The reference's (TVM's) `PrimFunc.buffer_map`: each tensor parameter's storage
        handle -> its buffer (shape and strides in elements of its dtype)."""
        return {p.data: p for p in self.params if isinstance(p, Buffer)}

    @property
    def buffer_params(self):
        return [p for p in self.params if isinstance(p, Buffer)]

    def script(self) -> str:
        from .printer import print_node

        return print_node(self)

    def __repr__(self):
        return self.script()

    __str__ = __repr__


# =============================================================================================
# Construction helpers (typing rules live here)
# =============================================================================================


def const(value, dtype=None) -> Const:
    """A typed constant. Without a dtype: bool -> bool, int -> int32 (int64 if it does not
    fit), float -> float32."""
    if dtype is None:
        if isinstance(value, (bool, np.bool_)):
            return Const(bool(value), BOOL)
        if isinstance(value, (int, np.integer)):
            value = int(value)
            return Const(value, INT32 if -2**31 <= value < 2**31 else INT64)
        if isinstance(value, (float, np.floating)):
            if isinstance(value, np.floating):
                return Const(float(value), DType(value.dtype))
            return Const(float(value), FLOAT32)
        raise TypeError(f"cannot make a kernel constant from {type(value).__name__} {value!r}")
    dtype = DType(dtype)
    return Const(_convert_scalar(value, dtype), dtype)


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _convert_scalar(value, dtype: DType):
    """Convert a Python scalar to the value domain of `dtype` (C conversion semantics)."""
    if dtype.is_bool:
        return bool(value)
    if dtype.is_int:
        if isinstance(value, float):
            if math.isnan(value) or math.isinf(value):
                raise ValueError(f"cannot convert {value} to {dtype}")
            value = int(value)  # truncation toward zero
        value = int(value)
        mod = 1 << dtype.bits
        value %= mod
        if dtype.is_signed_int and value >= mod // 2:
            value -= mod
        return value
    if dtype.is_float:
        value = float(value)
        if dtype.name == "float16":
            return float(np.float16(value))
        if dtype.name == "float32":
            if math.isfinite(value) and abs(value) > _FLOAT32_MAX:
                # a finite literal float32 cannot hold is an error, not a silent infinity
                # (as the reference's FloatImm)
                raise ValueError(f"Literal value {value} exceeds maximum of float32 "
                                 f"(±{_FLOAT32_MAX:.7g})")
            return float(np.float32(value))
        if dtype.name in ("bfloat16", "float8_e4m3", "float8_e5m2", "float8_e8m0fnu"):
            return float(round_to(np.array([value], np.float32), dtype)[0])
        return value
    return value


def int_value(e):
    """The Python int of a literal or an integer Const; None for anything symbolic."""
    if isinstance(e, int) and not isinstance(e, bool):
        return e
    if isinstance(e, Const) and e.dtype.is_int:
        return e.value
    return None


def as_expr(value) -> Expr:
    """Convert a Python value or an expression-like object to an Expr."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, Buffer):
        if value.scope == "local.var":
            return Load(value, (Const(0, INT32),), value.dtype)
        raise TypeError(f"buffer {value.name} ({value.scope}) used as a scalar value; "
                        f"index it, e.g. {value.name}[i]")
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return const(value)
    to_expr = getattr(value, "__tl_expr__", None)
    if to_expr is not None:
        return to_expr()
    raise TypeError(f"cannot use {type(value).__name__} {value!r} as a kernel value")


def _is_literal(value) -> bool:
    return isinstance(value, (bool, int, float)) and not isinstance(value, np.generic)


def promote(a: DType, b: DType) -> DType:
    """The common type of two operand types (reference rules, SEMANTICS.md §10)."""
    if a is b:
        return a
    if a.is_bool:
        a = INT32 if not b.is_float else a
    if b.is_bool:
        b = INT32 if not a.is_float else b
    if a is b:
        return a
    if a.is_float and b.is_float:
        if a.bits != b.bits:
            return a if a.bits > b.bits else b
        return a if a.name == "float16" else b if b.name == "float16" else a
    if a.is_float:
        return a
    if b.is_float:
        return b
    if a.is_handle or b.is_handle:
        return HANDLE
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return a if a.is_unsigned else b


def cast_to(value, dtype) -> Expr:
    dtype = DType(dtype)
    if isinstance(value, (bool, int, float, np.number, np.bool_)):
        return const(value, dtype)
    value = as_expr(value)
    if value.dtype is dtype:
        return value
    if isinstance(value, Const):
        return const(value.value, dtype)
    return Cast(value, dtype)


_FOLD = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "min": min, "max": max, "bitand": operator.and_, "bitor": operator.or_,
    "bitxor": operator.xor, "shl": operator.lshift, "shr": operator.rshift,
}


def _fold_binary(op, a, b, dtype):
    if op in ("shl", "shr") and b < 0:
        return None  # undefined in C; Python would raise: keep the expression as written
    if op in _FOLD:
        return _FOLD[op](a, b)
    if op == "div":
        if b == 0:
            return None
        return a / b
    if op in ("floordiv", "floormod", "truncdiv", "truncmod"):
        if b == 0:
            return None
        if dtype.is_float:
            return None
        if op == "floordiv":
            return a // b
        if op == "floormod":
            return a % b
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        return q if op == "truncdiv" else a - q * b
    if op == "pow":
        return a ** b
    return None


def binary(op: str, a, b) -> Expr:
    """Build an arithmetic node with reference typing; folds constants."""
    # the common cases of the index arithmetic passes build, typed directly: two expressions
    # of one type, or an int32 expression and a Python int that int32 holds
    if isinstance(a, Expr) and isinstance(b, Expr) and a.dtype is b.dtype:
        ea, eb, dt = a, b, a.dtype
    elif type(b) is int and isinstance(a, Expr) and a.dtype is INT32 and \
            _INT32_MIN <= b <= _INT32_MAX:
        ea, eb, dt = a, Const(b, INT32), INT32
    elif type(a) is int and isinstance(b, Expr) and b.dtype is INT32 and \
            _INT32_MIN <= a <= _INT32_MAX:
        ea, eb, dt = Const(a, INT32), b, INT32
    else:
        ea, eb, dt = _typed_operands(op, a, b)
    if op == "div" and dt.is_int:
        raise TypeError(
            "`/` between two integer kernel values is ambiguous; use `//` (floor division), "
            "T.truncdiv or T.floordiv")
    if op in ("floordiv", "floormod") and dt.is_float:
        raise TypeError(f"`{'//' if op == 'floordiv' else '%'}` needs integer operands; for "
                        "floats use T.floor(a / b) or T.fmod")
    if op in ("bitand", "bitor", "bitxor", "shl", "shr") and dt.is_float:
        raise TypeError("bitwise operators need integer or bool operands")
    if dt.is_bool and op in ("bitand", "bitor", "bitxor"):
        pass
    elif dt.is_bool:
        dt = INT32
    if ea.dtype is not dt or eb.dtype is not dt:
        ea, eb = cast_to(ea, dt), cast_to(eb, dt)
    if isinstance(ea, Const) and isinstance(eb, Const):
        folded = _fold_binary(op, ea.value, eb.value, dt)
        if folded is not None:
            return const(folded, dt)
    # cheap identities keep traced index arithmetic readable
    if op == "add":
        if _is_zero(eb):
            return ea
        if _is_zero(ea):
            return eb
    elif op == "sub" and _is_zero(eb):
        return ea
    elif op == "mul":
        if _is_one(eb):
            return ea
        if _is_one(ea):
            return eb
        if dt.is_int and (_is_zero(ea) or _is_zero(eb)):
            return const(0, dt)
    elif op in ("floordiv", "truncdiv") and _is_one(eb):
        return ea
    elif op in ("floormod", "truncmod") and _is_one(eb) and dt.is_int:
        return const(0, dt)
    return Binary(op, ea, eb, dt)


_INT32_MIN, _INT32_MAX = -2**31, 2**31 - 1


def _typed_operands(op: str, a, b) -> tuple:
    """(a as an expression, b as one, their common type) by the reference's rules: a Python
    literal next to an expression takes the expression's type (a float literal next to an
    integer makes min / max float32)."""
    a_lit, b_lit = _is_literal(a), _is_literal(b)
    ea, eb = as_expr(a), as_expr(b)
    if op in ("min", "max") and a_lit and not b_lit:
        dt = eb.dtype if not (isinstance(a, float) and eb.dtype.is_int) else FLOAT32
    elif op in ("min", "max") and b_lit and not a_lit:
        dt = ea.dtype if not (isinstance(b, float) and ea.dtype.is_int) else FLOAT32
    else:
        dt = promote(ea.dtype, eb.dtype)
    return ea, eb, dt


def _is_zero(e) -> bool:
    return isinstance(e, Const) and e.value == 0 and not e.dtype.is_bool


def _is_one(e) -> bool:
    return isinstance(e, Const) and e.value == 1 and not e.dtype.is_bool


_CMP_FOLD = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
             "eq": operator.eq, "ne": operator.ne}


def compare(op: str, a, b) -> Expr:
    ea, eb = as_expr(a), as_expr(b)
    dt = promote(ea.dtype, eb.dtype)
    ea, eb = cast_to(ea, dt), cast_to(eb, dt)
    if isinstance(ea, Const) and isinstance(eb, Const):
        return const(bool(_CMP_FOLD[op](ea.value, eb.value)))
    if ea is eb and dt.is_int:
        # an integer compared with itself (not so for NaN floats; `assert M == M_` where both
        # are one dynamic size) is decided now, not left as a runtime check
        return const(op in ("eq", "le", "ge"))
    return Compare(op, ea, eb)


def _as_bool(e) -> Expr:
    e = as_expr(e)
    if e.dtype.is_bool:
        return e
    return compare("ne", e, const(0, e.dtype))


def logical_and(a, b) -> Expr:
    ea, eb = _as_bool(a), _as_bool(b)
    if isinstance(ea, Const):
        return eb if ea.value else ea
    if isinstance(eb, Const):
        return ea if eb.value else eb
    return Logical("and", ea, eb)


def logical_or(a, b) -> Expr:
    ea, eb = _as_bool(a), _as_bool(b)
    if isinstance(ea, Const):
        return ea if ea.value else eb
    if isinstance(eb, Const):
        return eb if eb.value else ea
    return Logical("or", ea, eb)


def logical_not(a) -> Expr:
    ea = _as_bool(a)
    if isinstance(ea, Const):
        return const(not ea.value)
    return Unary("not", ea, BOOL)


def unary(op: str, a) -> Expr:
    ea = as_expr(a)
    if op == "bitnot" and ea.dtype.is_bool:
        return logical_not(ea)
    if op == "bitnot" and ea.dtype.is_float:
        raise TypeError("`~` needs an integer operand")
    if isinstance(ea, Const):
        if op == "neg":
            return const(-ea.value, ea.dtype)
        if op == "bitnot":
            return const(~ea.value, ea.dtype)
    dt = INT32 if ea.dtype.is_bool else ea.dtype
    return Unary(op, cast_to(ea, dt), dt)


def select(cond, a, b) -> Expr:
    c = _as_bool(cond)
    ea, eb = as_expr(a), as_expr(b)
    dt = promote(ea.dtype, eb.dtype)
    ea, eb = cast_to(ea, dt), cast_to(eb, dt)
    if isinstance(c, Const):
        return ea if c.value else eb
    return Select(c, ea, eb, dt)


def load_or(load: Load, value) -> Expr:
    """`load` where its indices are inside the buffer, else `value` (a load's own out-of-bounds
    value, as `T.annotate_safe_value` gives one inside a `T.sblock`)."""
    cond = None
    for i, n in zip(load.indices, load.buffer.shape):
        c = logical_and(compare("ge", i, 0), compare("lt", i, n))
        cond = c if cond is None else logical_and(cond, c)
    return Select(cond, load, cast_to(value, load.dtype), load.dtype)


def call(op: str, args, dtype=None, attrs=()) -> Expr:
    args = tuple(as_expr(a) if not isinstance(a, (str, Buffer, BufferRegion, tuple)) else a
                 for a in args)
    if dtype is None:
        dtype = args[0].dtype
    return Call(op, args, DType(dtype), tuple(attrs))


def extern_stmt(name: str, *args) -> "Evaluate":
    """A statement calling the void device function `name` (a `tl::` header function)."""
    return Evaluate(Call("call_extern", (name,) + tuple(args), DType("void")))


def is_extern_call(node) -> bool:
    """Whether `node` is a call of a device function by name (`call_extern`)."""
    return isinstance(node, Call) and node.op == "call_extern"


def extern_name(node):
    """The function name a `call_extern` call calls (None for any other node, or a callee
    that is not a name)."""
    if is_extern_call(node) and node.args and isinstance(node.args[0], str):
        return node.args[0]
    return None


def calls_extern(stmt, prefix: str) -> bool:
    """Whether `stmt` is a call_extern statement whose function name starts with `prefix`."""
    name = extern_name(stmt.value) if isinstance(stmt, Evaluate) else None
    return name is not None and name.startswith(prefix)


def address_of(buf: Buffer, indices) -> Expr:
    """The address of `buf[indices]` (a pointer argument for header functions)."""
    return Call("address_of", (Load(buf, tuple(as_expr(i) for i in indices), buf.dtype),),
                DType("handle"))


# =============================================================================================
# Structural equality
# =============================================================================================


def structural_equal(a, b, var_map=None) -> bool:
    """True when two IR trees have the same structure; Vars and Buffers compare by identity
    unless mapped in `var_map` (a dict from a's vars/buffers to b's)."""
    if a is b:
        return True
    if var_map is not None and (isinstance(a, (Var, Buffer))) and id(a) in var_map:
        return var_map[id(a)] is b
    if type(a) is not type(b):
        if isinstance(a, (int, float)) and isinstance(b, Const):
            return b.value == a
        if isinstance(b, (int, float)) and isinstance(a, Const):
            return a.value == b
        return False
    if isinstance(a, (Var, Buffer)):
        return False
    if isinstance(a, Const):
        return a.dtype is b.dtype and a.value == b.value
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(structural_equal(x, y, var_map) for x, y in zip(a, b))
    if isinstance(a, Node):
        for f in fields(a):
            if f.name == "loc":
                continue
            if not structural_equal(getattr(a, f.name), getattr(b, f.name), var_map):
                return False
        return True
    if isinstance(a, DType):
        return a is b
    return a == b


def with_fields(node, **changes):
    """`dataclasses.replace` for IR nodes (kept as a name so passes read naturally)."""
    return replace(node, **changes)
