"""State shared by the passes that lower one kernel launch (`KernelContext`).

A context is created per `T.Kernel` and carries: the target and pass configs, the block's
thread count and linear thread index, the layouts chosen by inference, the register array of
every fragment, scratch shared buffers added by lowerings, and the gemm instruction backend
(mma.sync on sm_80+, wgmma on sm_90a) that answers layout questions for `T.gemm`.

Inside a role of its own threads (`Attr("thread_group", ("consumer", n, lo, barrier))` from
transform/warp_roles.py, when tile operations run in roles of different thread ranges), the
tile operations are laid out and lowered for the role's n threads: a pass that walks into
such a region enters `ctx.thread_group(...)`, within which `num_threads`, `tid` (the role's
threads numbered from 0), `warpgroup()` and `thread_bounds()` are the role's.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Optional

from ..ir import nodes as ir
from ..transform.analysis.scopes import MEMORY
from ..jit.target import Target
from ..transform.pass_config import PassConfigKey, config_flag


@dataclass
class KernelContext:
    """Every field the passes share, with the pass that writes it (engine/pipeline.py gives
    their order; a pass reads only fields written by passes before it)."""

    func: ir.PrimFunc
    kernel: ir.Kernel
    target: Target
    configs: dict
    index: int = 0
    # buffer -> Layout / Fragment: infer_layouts (every fragment, shared tile and loop); the
    # pipeliners (pipeline, warp_specialize) and stage_epilogue add their new shared tiles
    layouts: dict = field(default_factory=dict)
    # fragment -> its per-thread register array: register_of(), from partition_parallel on
    registers: dict = field(default_factory=dict)
    # shared buffers lowerings add (add_scratch_shared: infer_layouts, warp_specialize,
    # lower_tile_ops, partition_parallel); plan_shared places them with the kernel's
    scratch_shared: list = field(default_factory=list)
    # gemm -> its instruction and warp partition: infer_layouts (is_wgmma and the gemm
    # lowerings, wgmma_wait, fold_clears read it)
    gemm_info: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)  # note(): what a pass chose and why (verbose)
    # TMA tensor maps the host encodes: warp_specialize, tma_reduce, stage_epilogue,
    # lower_copies (T.tma_copy)
    tma_descriptors: list = field(default_factory=list)
    # tile -> its multi-buffered replacement (stages): pipeline, warp_specialize
    replaced_shared: dict = field(default_factory=dict)
    # staged epilogue tiles, written before they are read wherever they are used:
    # stage_epilogue (plan_shared lets them take the pipeline stages' bytes)
    fresh_shared: set = field(default_factory=set)
    # shared buffers other blocks of a cluster may still touch after this block's last use
    # (multicast rings' mbarriers): warp_specialize; plan_shared keeps them to themselves
    pinned_shared: set = field(default_factory=set)
    # flat shared buffer -> byte offset, and the arena's size: plan_shared
    shared_plan: dict = field(default_factory=dict)
    smem_bytes: int = 0
    # a wgmma was lowered (lower_tile_ops, codegen/gemm_sm90.py): insert_sync fences the
    # async proxy before barriers
    uses_wgmma: bool = False
    uses_gemm_sp: bool = False  # a T.gemm_sp was lowered: the module includes its header
    # the warpgroup index the wgmma gemms take, bound once at the kernel's top (lower_tile_ops)
    warpgroup_var: Optional[ir.Var] = None
    # threads the tile operations are laid out for, when they run inside user roles of fewer
    # threads than the block (warp_roles: set_compute_threads); None: the whole block
    compute_threads: Optional[int] = None
    # (lo, n): the role whose statements are being laid out or lowered (thread_group)
    group: Optional[tuple] = None
    # reducers kept as register partials: reducer_fragments (fragment -> op)
    reducer_partials: dict = field(default_factory=dict)

    def __post_init__(self):
        from ..codegen import gemm_sm80

        self.gemm_backend = gemm_sm80
        k = self.kernel
        tx = k.thread_vars[0]
        tid = tx
        if len(k.threads) > 1:
            tid = ir.binary("add", tid, ir.binary("mul", k.thread_vars[1], k.threads[0]))
        if len(k.threads) > 2:
            tid = ir.binary("add", tid, ir.binary("mul", k.thread_vars[2],
                                                  k.threads[0] * k.threads[1]))
        self.block_tid = tid

    @property
    def tid(self) -> ir.Expr:
        """The index of the executing thread among the threads the tile operations run on."""
        if self.group is not None:
            lo = self.group[0]
            tx = self.kernel.thread_vars[0]
            return ir.binary("sub", tx, lo) if lo else tx
        return self.block_tid

    def warpgroup(self) -> ir.Expr:
        """The thread's warpgroup index (within the role, in a role's thread group), the same
        across each warp as far as the compiler can tell (tl::warpgroup_index), so that wgmma
        descriptors stay in uniform registers."""
        if self.warpgroup_var is None:
            self.warpgroup_var = ir.Var("warpgroup")
        if self.group is not None and self.group[0]:
            return ir.binary("sub", self.warpgroup_var, self.group[0] // 128)
        return self.warpgroup_var

    @property
    def num_threads(self) -> int:
        """Threads the tile operations are laid out for and lowered on."""
        if self.group is not None:
            return self.group[1]
        if self.compute_threads is not None:
            return self.compute_threads
        return self.kernel.num_threads

    def set_compute_threads(self, kernel: ir.Kernel, tid: ir.Var, n: int):
        """Tile operations run on the n threads 0..n-1 of `kernel` (relabelled so that the
        role that performs them comes first); `tid` is its thread index."""
        self.kernel, self.block_tid, self.compute_threads = kernel, tid, n

    @contextmanager
    def thread_group(self, group):
        """Lay out and lower for the role `group` ((lo, n); None: the block) meanwhile."""
        saved, self.group = self.group, group
        try:
            yield
        finally:
            self.group = saved

    def thread_bounds(self):
        """(thread variable, lo, hi) triples that hold wherever tile operations run."""
        k = self.kernel
        if self.group is not None:
            lo, n = self.group
            return [(k.thread_vars[0], lo, lo + n)]
        if self.compute_threads is not None:
            return [(k.thread_vars[0], 0, self.compute_threads)]
        return [(v, 0, t) for v, t in zip(k.thread_vars, k.threads)]

    def flag(self, key: PassConfigKey, default=False):
        return config_flag(self.configs, key, default)

    def note(self, text: str):
        self.notes.append(text)

    # ---- fragments -> registers ----------------------------------------------------------
    def register_of(self, frag: ir.Buffer) -> ir.Buffer:
        if frag.view_of is not None:  # a T.reshape of a fragment: the same registers
            return self.register_of(frag.view_of)
        reg = self.registers.get(frag)
        if reg is None:
            layout = self.layouts[frag]
            reg = ir.Buffer(frag.name, (layout.num_values,), frag.dtype, "local", loc=frag.loc)
            self.registers[frag] = reg
        return reg

    def add_scratch_shared(self, name: str, shape, dtype) -> ir.Buffer:
        buf = ir.Buffer(name, tuple(shape), dtype, "shared.dyn")
        self.scratch_shared.append(buf)
        from ..layout import row_major

        self.layouts[buf] = row_major(buf.shape)
        return buf

    # ---- gemm questions (delegated to the instruction backend of each gemm) ---------------
    @property
    def wgmma_disabled(self) -> bool:
        return self.flag(PassConfigKey.TL_DISABLE_WGMMA)

    def gemm_partition(self, g, M, N, num_warps):
        """(backend module, warp partition): wgmma on sm_90a when it applies, else mma.sync;
        mma.sp for `T.gemm_sp`."""
        from ..codegen import gemm_sm80, gemm_sm90, gemm_sp

        if isinstance(g, ir.GemmSp):
            part = gemm_sp.partition(g, M, N, num_warps, self)
            return None if part is None else (gemm_sp, part)

        part = gemm_sm90.eligible(g, M, N, num_warps, self)
        if part is not None:
            wgm, wgn = part
            self._note_gemm(g, f"wgmma m64n{N // wgn} on {wgm}x{wgn} warpgroup(s), "
                               + ("A from registers, B" if g.A.buffer.scope == "local.fragment"
                                  else "A and B") + " from shared memory by descriptor")
            return (gemm_sm90, part)
        if g.require_wgmma:
            obstacle = gemm_sm90.hardware_obstacle(g, M, num_warps, self)
            if obstacle:
                from ..errors import located

                a, b, c = g.A.buffer, g.B.buffer, g.C.buffer
                raise located(ValueError)(
                    f"T.wgmma_gemm() requires Hopper WGMMA lowering, but {obstacle} (A {a.name}: "
                    f"{a.scope} {a.dtype}, B {b.name}: {b.scope} {b.dtype}, C {c.name}: "
                    f"{c.scope} {c.dtype}, M={M}, N={N}); use T.gemm to let the compiler "
                    "choose the instruction", g.loc)
            self.note(f"T.wgmma_gemm {g.A.buffer.name} x {g.B.buffer.name}: this compiler's "
                      "wgmma path does not take these operands; using mma.sync")
        part = gemm_sm80.partition(g, M, N, num_warps, self)
        if part is not None:
            why = gemm_sm90.hardware_obstacle(g, M, num_warps, self) if self.target.is_hopper \
                else None
            self._note_gemm(g, f"mma.sync on {part[0]}x{part[1]} warps"
                               + (f" (no wgmma: {why})" if why else
                                  " (no wgmma: the operands' types or layouts are not ones its "
                                  "descriptors read)" if self.target.is_hopper else ""))
        return None if part is None else (gemm_sm80, part)

    def _note_gemm(self, g, how):
        """One note per gemm (layout inference may ask twice) naming its instruction."""
        text = f"T.gemm {g.A.buffer.name} x {g.B.buffer.name} -> {g.C.buffer.name}: {how}"
        if text not in self.notes:
            self.note(text)

    def is_wgmma(self, g) -> bool:
        """Whether gemm `g` was given to the wgmma backend (after layout inference)."""
        from ..codegen import gemm_sm90

        return isinstance(g, ir.Gemm) and self.gemm_info.get(g.C.buffer, (None,))[0] is gemm_sm90

    def accumulator_layout(self, g, choice):
        return choice[0].accumulator_layout(g, choice[1], self)

    def a_fragment_layout(self, g, choice, M, K):
        return choice[0].a_fragment_layout(g, choice[1], M, K, self)

    def b_fragment_layout(self, g, choice, K, N):
        """B in registers, over the logical K x N operand (mma.sync: wgmma reads B from shared
        memory only, so such a gemm never goes to the wgmma backend)."""
        return choice[0].b_fragment_layout(g, choice[1], K, N, self)

    def shared_operand_layout(self, buf):
        return self.gemm_backend.shared_operand_layout(buf, self)

    # ---- default loop layouts ----------------------------------------------------------------
    def default_loop_layout(self, extents, body):
        from ..layout import elementwise_fragment

        return elementwise_fragment(tuple(extents), self.num_threads,
                                    _vector_width(extents, body, self.num_threads))


def _vector_width(extents, body, num_threads: int = 1) -> int:
    """Elements per thread along the innermost dim: 16 bytes of the narrowest global/shared
    element the loop touches, at most 16 bytes of the widest shared element it stores (fewer
    where a vector call moves several per iteration), limited by the innermost extent."""
    from ..ir.visitor import collect

    accesses = collect(body, lambda n: isinstance(n, (ir.Load, ir.Store))
                       and n.buffer.scope in MEMORY)
    dtypes = [n.buffer.dtype for n in accesses]
    if not dtypes or any(d.bits < 8 for d in dtypes):
        return 1  # packed sub-byte elements are accessed one at a time
    sizes = [d.bytes for d in dtypes]
    vec = 16 // min(sizes)
    # a converting copy from global memory into a wider shared tile (bfloat16 rows into a
    # float32 tile): 16 bytes of the narrow side would give each thread 32 bytes of the tile
    # to store, and a warp's stores 32 bytes apart meet each bank several times (mHC pre's
    # big fuse: 1.1M bank conflicts against the reference's 82K); 16 bytes of the tile a
    # thread keep the warp's stores contiguous
    stored = [n.buffer.dtype.bytes for n in accesses
              if isinstance(n, ir.Store) and n.buffer.scope != "global"]
    if stored:
        vec = min(vec, max(1, 16 // max(stored)))
    # a vector call (T.atomic_addx4) already moves `lanes` elements per iteration: giving a
    # thread several consecutive iterations would only spread its 16-byte accesses apart
    for call in collect(body, lambda n: isinstance(n, ir.Call) and dict(n.attrs).get("lanes")):
        lanes = int(dict(call.attrs)["lanes"])
        for a in call.args:
            if isinstance(a, ir.Load) and a.buffer.scope in MEMORY:
                vec = min(vec, max(1, 16 // (lanes * a.dtype.bytes)))
    inner = extents[-1]
    while vec > 1 and inner % vec:
        vec //= 2
    total = 1
    for e in extents:
        total *= e
    while vec > 1 and total // vec < num_threads:  # rather narrower than idle threads
        vec //= 2
    return max(1, vec)
