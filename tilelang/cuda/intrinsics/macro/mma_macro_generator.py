"""`TensorCoreIntrinEmitter`: mma.sync GEMM written warp by warp, as the reference's emitter
offers it to hand-scheduled kernels (examples/gemm/example_gemm_intrinsics.py).

    emitter = TensorCoreIntrinEmitter(a_dtype=T.float16, b_dtype=T.float16,
                                      accum_dtype=T.float32, a_transposed=False,
                                      b_transposed=True, block_row_warps=2, block_col_warps=2,
                                      warp_row_tiles=64, warp_col_tiles=64, chunk=32)
    ... inside the kernel, per K step ki of a shared tile:
    emitter.ldmatrix_a(A_local, A_shared, ki)     # T.ptx_ldmatrix per m16 x k micro tile
    emitter.ldmatrix_b(B_local, B_shared, ki)
    emitter.mma(A_local, B_local, C_local)        # T.ptx_mma per m16 x n8 atom
    emitter.stmatrix(C_local, C_shared)           # accumulators -> shared (or global)

The warps of the block form a block_row_warps x block_col_warps grid; warp (wm, wn) computes
the warp_row_tiles x warp_col_tiles tile at (wm, wn). Each thread holds, in per-thread arrays
(`T.alloc_local`), `warp_rows * local_size_a` A elements, `warp_cols * local_size_b` B
elements and `warp_rows * warp_cols * local_size_out` accumulators in mma.sync's register
order (tilelang/cuda/intrinsics/layout/mma_layout.py). Operands: float16, bfloat16 (fp32
accumulators; float16 also fp16), float32 as TF32, int8/uint8 (int32), float8 e4m3/e5m2.
Shared operands are K-contiguous or not (`a_transposed`: A stored K x M; `b_transposed`: B
stored N x K); 8- and 32-bit operands that are not K-contiguous are loaded element by element
(ldmatrix cannot transpose them).
"""

from __future__ import annotations

from ....frontend.builder import error
from ....ir import nodes as ir
from ....ir.dtype import DType
from ..layout import mma_layout as L
from ..layout.utils import get_ldmatrix_offset, mma_store_index_map

__all__ = ["TensorCoreIntrinEmitter", "TensorCoreIntrinEmitterWithLadderTransform",
           "INT4TensorCoreIntrinEmitter", "INT4TensorCoreIntrinEmitterWithLadderTransform"]

_ABBREV = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "int8": "int8",
           "uint8": "uint8", "int32": "int32", "float8_e4m3": "e4m3", "float8_e5m2": "e5m2"}
_PREFIX = {8: "m16n8k8", 16: "m16n8k16", 32: "m16n8k32"}

# per operand element width: (A element loads, B element loads) when ldmatrix cannot be used
_ELEMENT_LOADS = {
    8: (L.mma_load_a_32x16_to_shared_16x32_layout, L.mma_load_b_32x16_to_shared_16x32_layout),
    16: (L.mma_load_a_32x8_to_shared_16x16_layout, L.mma_load_b_32x8_to_shared_16x16_layout),
    32: (L.mma_load_a_32x4_to_shared_16x8_layout, L.mma_load_b_32x4_to_shared_16x8_layout),
}


def _region(buf):
    """(buffer, start index per dim) of a shared operand given as a buffer or a region."""
    if isinstance(buf, ir.BufferRegion):
        return buf.buffer, [ir.as_expr(s) if not isinstance(s, int) else s
                            for s in buf.starts]
    if isinstance(buf, ir.Buffer):
        return buf, [0] * buf.ndim
    raise error(TypeError, f"expected a shared buffer or a region of one, got {buf!r}")


def _local(buf, what):
    if not isinstance(buf, ir.Buffer) or buf.scope != "local":
        scope = getattr(buf, "scope", type(buf).__name__)
        raise error(NotImplementedError,
                    f"{what}: the emitter keeps operands in per-thread arrays (T.alloc_local); "
                    f"got {getattr(buf, 'name', buf)} ({scope})")
    return buf


class TensorCoreIntrinEmitter:
    """mma.sync emitter; see the module docstring."""

    M_DIM = 16
    WARP_SIZE = 32

    def __init__(self, a_dtype="float16", b_dtype="float16", accum_dtype="float16",
                 a_transposed=False, b_transposed=False, block_row_warps=2, block_col_warps=2,
                 warp_row_tiles=8, warp_col_tiles=8, chunk=16, reduce_k=1,
                 num_elems_per_byte=1, is_m_first=False, thread_var=None):
        self.a_dtype, self.b_dtype = DType(a_dtype), DType(b_dtype)
        self.accum_dtype = DType(accum_dtype)
        self.a_transposed, self.b_transposed = bool(a_transposed), bool(b_transposed)
        self.block_row_warps, self.block_col_warps = block_row_warps, block_col_warps
        self.warp_row_tiles, self.warp_col_tiles = warp_row_tiles, warp_col_tiles
        self.chunk = chunk
        self.reduce_k = reduce_k
        self.num_elems_per_byte = num_elems_per_byte
        self.is_m_first = bool(is_m_first)
        self.thread_var = thread_var
        if self.a_dtype != self.b_dtype:
            raise ValueError(f"TensorCoreIntrinEmitter: A ({self.a_dtype}) and B "
                             f"({self.b_dtype}) must have the same dtype")
        bits = self.a_dtype.bits
        if bits not in (8, 16, 32):
            raise NotImplementedError(f"TensorCoreIntrinEmitter: {self.a_dtype} operands are "
                                      "not supported (8-, 16- and 32-bit (TF32) only)")
        self.k_dim = min(256 // bits, chunk)
        if self.k_dim not in _PREFIX or 256 // bits != self.k_dim:
            raise ValueError(f"TensorCoreIntrinEmitter: chunk={chunk} is smaller than one mma "
                             f"K step ({256 // bits}) for {self.a_dtype}")
        if warp_row_tiles < 16 or warp_row_tiles % 16:
            raise ValueError(f"warp_row_tiles must be a positive multiple of 16, got "
                             f"{warp_row_tiles}")
        if warp_col_tiles < 8 or warp_col_tiles % 8:
            raise ValueError(f"warp_col_tiles must be a positive multiple of 8, got "
                             f"{warp_col_tiles}")
        self.n_dim = 16 if warp_col_tiles % 16 == 0 else 8
        self.micro_size_x, self.micro_size_y, self.micro_size_k = 16, self.n_dim, self.k_dim
        self.warp_rows = warp_row_tiles // 16
        self.warp_cols = warp_col_tiles // self.n_dim
        self.local_size_a = 16 * self.k_dim // self.WARP_SIZE
        self.local_size_b = self.n_dim * self.k_dim // self.WARP_SIZE
        self.local_size_out = 16 * self.n_dim // self.WARP_SIZE
        self.mma_prefix = _PREFIX[self.k_dim]
        tf32 = bits == 32
        if tf32 and self.accum_dtype.name != "float32":
            raise NotImplementedError("float32 operands (TF32) need a float32 accumulator")
        self.a_dtype_abbrv = "tf32" if tf32 else _ABBREV[self.a_dtype.name]
        self.b_dtype_abbrv = self.a_dtype_abbrv
        self.accum_dtype_abbrv = _ABBREV[self.accum_dtype.name]
        self.threads = self.WARP_SIZE * block_row_warps * block_col_warps * reduce_k

    # ---- threads ------------------------------------------------------------------------------
    def get_thread_binding(self):
        if self.thread_var is not None:
            return self.thread_var
        from ....language.kernel import get_thread_binding

        return get_thread_binding(0)

    def extract_thread_binding(self, thread_id, is_m_first=None):
        """(lane, warp_n, warp_m) of a thread index: warps numbered M-fastest (N-fastest when
        `is_m_first`)."""
        m_first = self.is_m_first if is_m_first is None else is_m_first
        lane, warp = thread_id % self.WARP_SIZE, thread_id // self.WARP_SIZE
        if m_first:
            return lane, warp % self.block_col_warps, \
                (warp // self.block_col_warps) % self.block_row_warps
        return lane, (warp // self.block_row_warps) % self.block_col_warps, \
            warp % self.block_row_warps

    # ---- loads --------------------------------------------------------------------------------
    def _ldmatrix_ok(self, matrix):
        if self.a_dtype.bits == 16:
            return True
        return (matrix == "A" and not self.a_transposed) or (matrix == "B" and self.b_transposed)

    def ldmatrix_a(self, A_local_buf, A_shared_buf, ki, rk=0):
        """Load the warp's A micro tiles of K step `ki` (of reduction split `rk`)."""
        self._load("A", A_local_buf, A_shared_buf, ki, rk)

    def ldmatrix_b(self, B_local_buf, B_shared_buf, ki, rk=0):
        """Load the warp's B micro tiles of K step `ki` (of reduction split `rk`)."""
        self._load("B", B_local_buf, B_shared_buf, ki, rk)

    def _load(self, matrix, local_buf, shared_buf, ki, rk):
        """Micro tiles of operand `matrix` (A: M x K, B: N x K as mma sees them) into the
        per-thread array: one ldmatrix per tile, or element loads where ldmatrix cannot
        transpose (8/32-bit operands that are not K-contiguous)."""
        from .... import language as T

        is_a = matrix == "A"
        local = _local(local_buf, f"ldmatrix_{matrix.lower()}")
        buf, base = _region(shared_buf)
        lane, warp_n, warp_m = self.extract_thread_binding(self.get_thread_binding())
        dtype = self.a_dtype if is_a else self.b_dtype
        # stored spatial-major (M x K for A, N x K for B) or K-major
        k_last = not self.a_transposed if is_a else self.b_transposed
        tiles, size = (self.warp_rows, self.local_size_a) if is_a else \
            (self.warp_cols, self.local_size_b)
        warp, tile, micro = (warp_m, self.warp_row_tiles, self.micro_size_x) if is_a else \
            (warp_n, self.warp_col_tiles, self.micro_size_y)
        wk = rk * self.chunk + ki * self.micro_size_k
        for i in T.unroll(tiles):
            ws = warp * tile + i * micro
            if self._ldmatrix_ok(matrix):
                # A's instruction transposes when A is stored K x M; B's when B is K x N
                row, col = get_ldmatrix_offset(matrix, lane, 0, None, dtype,
                                               self.a_transposed if is_a else self.b_transposed)
                at = (ws + row, wk + col) if k_last else (wk + row, ws + col)
                num = 4 if is_a or self.n_dim == 16 else 2
                T.ptx_ldmatrix(not k_last, num, T.access_ptr(_at(buf, base, at), "r"),
                               T.access_ptr(local[i * size], "w"))
            else:
                element_of = _ELEMENT_LOADS[dtype.bits][0 if is_a else 1]
                for v in T.serial(size):
                    ms, mk = element_of(lane, v)
                    at = (ws + ms, wk + mk) if k_last else (wk + mk, ws + ms)
                    local[i * size + v] = _at(buf, base, at)

    # ---- compute ------------------------------------------------------------------------------
    @property
    def mma_num_inst_m(self) -> int:
        return self.warp_rows

    @property
    def mma_num_inst_n(self) -> int:
        return self.warp_cols

    def mma(self, A_local_buf, B_local_buf, C_local_buf, k_inner=0):
        """C += A @ B over the warp's tile: one mma atom per (row, column) micro tile."""
        from .... import language as T

        for i, j in T.grid(self.warp_rows, self.warp_cols):
            self.mma_atom(A_local_buf, B_local_buf, C_local_buf, i, j, k_inner)

    def mma_atom(self, A_local_buf, B_local_buf, C_local_buf, inst_m_idx, inst_n_idx,
                 k_inner=0):
        """The mma of micro tile (inst_m_idx, inst_n_idx): one m16n8 instruction, two when
        the micro tile is 16 wide."""
        from .... import language as T

        for buf, what in ((A_local_buf, "A"), (B_local_buf, "B"), (C_local_buf, "C")):
            _local(buf, f"mma ({what})")
        a_off = inst_m_idx * self.local_size_a
        b_off = inst_n_idx * self.local_size_b
        c_off = (inst_m_idx * self.warp_cols + inst_n_idx) * self.local_size_out
        halves = 2 if self.n_dim == 16 else 1
        for h in range(halves):
            T.ptx_mma(self.accum_dtype, self.mma_prefix, "row", "col", self.a_dtype_abbrv,
                      self.b_dtype_abbrv, self.accum_dtype_abbrv, A_local_buf.data, a_off,
                      B_local_buf.data, b_off + h * self.local_size_b // 2, C_local_buf.data,
                      c_off + h * self.local_size_out // 2, False)

    # ---- store --------------------------------------------------------------------------------
    def stmatrix(self, C_local_buf, C_buf, pid_m=None, pid_n=None):
        """Write the accumulators to `C_buf`: a shared tile of the block, 2-D (M x N) or 4-D
        (M/16 x N/n x 16 x n micro tiles); or, with `pid_m`/`pid_n`, the global C at block
        (pid_m, pid_n)."""
        from .... import language as T

        C_local = _local(C_local_buf, "stmatrix")
        dims = len(C_buf.shape)
        if dims not in (2, 4):
            raise error(ValueError, f"stmatrix: C_buf must be 2-D or 4-D, not {dims}-D")
        lane, warp_n, warp_m = self.extract_thread_binding(self.get_thread_binding())
        lso, n_dim = self.local_size_out, self.n_dim
        rows_per_block = self.block_row_warps * self.warp_rows
        cols_per_block = self.block_col_warps * self.warp_cols
        for i, j in T.grid(self.warp_rows, self.warp_cols):
            for v in T.serial(lso):
                row, col = mma_store_index_map(lane, v)
                value = C_local[(i * self.warp_cols + j) * lso + v]
                mi, nj = warp_m * self.warp_rows + i, warp_n * self.warp_cols + j
                if pid_m is not None and pid_n is not None:
                    C_buf[(pid_m * rows_per_block + mi) * 16 + row,
                          (pid_n * cols_per_block + nj) * n_dim + col] = value
                elif dims == 2:
                    C_buf[mi * 16 + row, nj * n_dim + col] = value
                else:
                    C_buf[mi, nj, row, col] = value

    # ---- fragment layouts (for T.alloc_fragment operands) -------------------------------------
    def make_mma_load_layout(self, local_buf, matrix="A"):
        raise NotImplementedError("TensorCoreIntrinEmitter.make_mma_load_layout: operands in "
                                  "T.alloc_fragment buffers are not supported; use "
                                  "T.alloc_local arrays (or T.gemm)")

    def make_mma_store_layout(self, local_buf):
        raise NotImplementedError("TensorCoreIntrinEmitter.make_mma_store_layout: "
                                  "accumulators in T.alloc_fragment buffers are not supported; "
                                  "use a T.alloc_local array (or T.gemm)")


def _at(buf, base, idx):
    """buf[base + idx] over the last two dims (leading dims at the region's start)."""
    lead = list(base[:-2])
    return buf[tuple(lead + [base[-2] + idx[0], base[-1] + idx[1]])]


def _unsupported(name, why):
    class _Emitter(TensorCoreIntrinEmitter):
        def __init__(self, *args, **kwargs):
            raise NotImplementedError(f"{name}: {why}; see docs/compatibility.md")
    _Emitter.__name__ = _Emitter.__qualname__ = name
    _Emitter.__doc__ = f"The reference's {name} ({why})."
    return _Emitter


TensorCoreIntrinEmitterWithLadderTransform = _unsupported(
    "TensorCoreIntrinEmitterWithLadderTransform",
    "the BitBLAS ladder-transformed operand layouts are not supported")
INT4TensorCoreIntrinEmitter = _unsupported(
    "INT4TensorCoreIntrinEmitter", "4-bit operands (m16n8k64 s4) are not supported")
INT4TensorCoreIntrinEmitterWithLadderTransform = _unsupported(
    "INT4TensorCoreIntrinEmitterWithLadderTransform",
    "4-bit operands (m16n8k64 s4) are not supported")
