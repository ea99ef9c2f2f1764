"""`Layout`: where each element of a shared-memory (or global) tile is stored.

A Layout maps a logical index `(i0, ..., in-1)` of a tile of `shape` to one physical element
offset (swizzles, padding, stacked stages). `forward(*idx)` accepts Python ints, numpy integer
arrays (vectorised) or IR expressions, so the same object drives checks, plots and lowering.

Guarantees: `forward` is a pure function of the indices; `physical_size` is the number of
elements of storage it needs (offsets lie in [0, physical_size)). Static-shape layouts can be
enumerated: `offsets()`, `inverse_table()`, `layout_equal`. Layouts are immutable and compare by
identity; compare mappings with `layout_equal`.

Reference compatibility: `Layout(shape, forward_fn)` where forward_fn may also return a list of
output indices (like the reference's `T.Layout`); the list is linearised row-major over
`physical_shape` (inferred by enumeration for static shapes when not given).
"""

from __future__ import annotations

import numpy as np

from ..ir import nodes as ir
from .index import is_symbolic, prod, static_int, static_shape

__all__ = ["Layout", "row_major", "layout_equal", "make_padded_layout", "make_linear_layout"]


class Layout:
    """Logical tile index -> physical element offset.

    Parameters
    ----------
    shape: the logical tile shape (ints; symbolic extents are allowed for layouts that never
        need enumeration, e.g. `row_major`).
    forward: `forward(*idx)` -> offset (or a list of output indices, see module docstring).
        It must work on ints, numpy arrays and IR expressions: write it with `+ - * // %` and
        `tilelang.layout.xor`.
    physical_shape: shape of the storage when `forward` returns a list; for a single offset it
        only fixes `physical_size`.
    name: shown by `repr`.
    """

    def __init__(self, shape, forward, physical_shape=None, name=None, *, elem_bits=None,
                 swizzle_bytes=None, column_block=None, row_major=None, physical_size=None,
                 describe=None):
        if callable(shape) and not callable(forward):  # tolerate (fn, shape)
            shape, forward = forward, shape
        if isinstance(shape, int):
            shape = (shape,)
        self.shape = tuple(static_int(s) if static_int(s) is not None else s for s in shape)
        if not callable(forward):
            raise TypeError(f"Layout forward must be callable, got {forward!r}")
        self._fn = forward
        self.name = name
        self.elem_bits = elem_bits
        # Swizzle facts for TMA / wgmma descriptors: the XOR pattern width in bytes (None: no
        # swizzle) and the number of elements per column block ([block][rows][W bytes]).
        self.swizzle_bytes = swizzle_bytes
        self.column_block = column_block
        self._describe = describe
        self._row_major = row_major
        self._offsets = None
        self.physical_shape = None
        if physical_shape is not None:
            self.physical_shape = tuple(physical_shape)
        self._multi = self._probe_multi()
        if self._multi and self.physical_shape is None:
            self.physical_shape = self._infer_output_shape()
        if physical_size is not None:
            self._physical_size = physical_size
        elif self.physical_shape is not None:
            self._physical_size = prod(self.physical_shape)
        else:
            self._physical_size = None  # computed on demand by enumeration

    # ---- construction helpers --------------------------------------------------------------
    @classmethod
    def from_function(cls, shape, fn, physical_shape=None, name=None):
        """Build a Layout from any index function (the reference's `T.Layout(shape, fn)`)."""
        return cls(shape, fn, physical_shape=physical_shape, name=name)

    def _probe_multi(self) -> bool:
        """Does `forward` return several output indices? Probe with index (0, ..., 0)."""
        try:
            r = self._fn(*([0] * len(self.shape)))
        except Exception:  # a function written only for symbolic indices
            r = self._fn(*(ir.Var(f"i{k}") for k in range(len(self.shape))))
        if isinstance(r, (list, tuple)):
            return len(r) != 1
        return False

    def _infer_output_shape(self):
        shape = static_shape(self.shape, "a Layout whose function returns several indices")
        idx = np.indices(shape, dtype=np.int64).reshape(len(shape), -1)
        outs = self._fn(*idx)
        return tuple(int(np.max(np.broadcast_to(np.asarray(o), idx.shape[1:]))) + 1
                     if idx.shape[1] else 1 for o in outs)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    # ---- the mapping ----------------------------------------------------------------------
    def forward(self, *idx):
        """Physical element offset of logical index `idx` (ints, arrays or expressions)."""
        if len(idx) == 1 and isinstance(idx[0], (list, tuple)):
            idx = tuple(idx[0])
        if len(idx) != len(self.shape):
            raise ValueError(f"layout of shape {list(self.shape)} indexed with {len(idx)} "
                             f"indices")
        r = self._fn(*idx)
        if isinstance(r, (list, tuple)):
            if len(r) == 1:
                return r[0]
            off = 0
            for x, e in zip(r, self.physical_shape):
                off = off * e + x
            return off
        return r

    __call__ = forward
    forward_index = forward  # the name `T.annotate_layout` looks for

    def map_forward_index(self, indices):
        """Reference spelling: the output index list (here always one physical offset)."""
        return [self.forward(*indices)]

    def get_input_shape(self):
        return list(self.shape)

    def get_output_shape(self):
        """The physical shape: the output extents of a multi-output layout, else its size."""
        if self._multi:
            return list(self.physical_shape)
        return [self.physical_size]

    def is_equal(self, other) -> bool:
        return layout_equal(self, other)

    def expand(self, leading) -> "Layout":
        """This layout repeated over leading dimensions: shape `leading + shape`, index
        `(l..., rest)` stored at `[l..., forward(rest)]` (one copy of the tile per leading
        index, the leading dims outermost). An empty `leading` gives the layout itself."""
        if isinstance(leading, int) and not isinstance(leading, bool):
            leading = [leading]
        if not isinstance(leading, (list, tuple)):
            raise TypeError(f"Layout.expand takes an int or a list of ints, got {leading!r}")
        leading = list(leading)
        if not leading:
            return self
        if any(isinstance(n, bool) or not isinstance(n, int) or n <= 0 for n in leading):
            raise ValueError(f"Layout.expand: leading extents must be positive ints, got "
                             f"{leading}")
        k = len(leading)
        inner = self

        def fwd(*idx):
            out = inner._fn(*idx[k:])
            out = list(out) if isinstance(out, (list, tuple)) else [out]
            return list(idx[:k]) + out

        phys = (self.physical_shape if self._multi else (self.physical_size,))
        return Layout(tuple(leading) + tuple(self.shape), fwd,
                      physical_shape=tuple(leading) + tuple(phys), name=self.name)

    def repeat(self, dim: int, factor: int) -> "Layout":
        """This layout tiled `factor` times along input dim `dim` (negative counts from the
        end): shape[dim] grows `factor`-fold and index `idx` is stored at
        `[idx[dim] // extent, *forward(idx with idx[dim] % extent)]`, the copy index a new
        outermost output dim. `factor` 1 gives the layout itself."""
        for name, value in (("dim", dim), ("factor", factor)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {type(value)!r}")
        if factor < 1:
            raise ValueError(f"factor must be >= 1, got {factor}")
        if factor == 1:
            return self
        ndim = len(self.shape)
        if ndim == 0:
            raise ValueError("cannot repeat a 0-dim layout")
        if not -ndim <= dim < ndim:
            raise ValueError(f"dim out of range: dim={dim}, ndim={ndim}")
        dim %= ndim
        extent = self.shape[dim]
        inner = self

        def fwd(*idx):
            local = list(idx)
            local[dim] = idx[dim] % extent
            out = inner._fn(*local)
            out = list(out) if isinstance(out, (list, tuple)) else [out]
            return [idx[dim] // extent] + out

        shape = list(self.shape)
        shape[dim] = extent * factor
        phys = (self.physical_shape if self._multi else (self.physical_size,))
        return Layout(tuple(shape), fwd, physical_shape=(factor,) + tuple(phys), name=self.name)

    def get_linearized_forward_index(self):
        """The physical offset as one expression of the layout's canonical index variables
        (`_i0, _i1, ...`, shared by all layouts, so that two layouts' indices compare), the
        outputs of a multi-output layout combined row-major over its output shape."""
        return self.forward(*index_placeholders(len(self.shape)))

    # ---- enumeration (static shapes) -------------------------------------------------------
    def offsets(self) -> np.ndarray:
        """Offsets of every logical element, as an int64 array of `shape`."""
        if self._offsets is None:
            shape = static_shape(self.shape)
            idx = np.indices(shape, dtype=np.int64)
            try:
                off = self.forward(*idx)
                if is_symbolic(off):
                    raise TypeError
                off = np.broadcast_to(np.asarray(off, dtype=np.int64), shape)
            except (TypeError, ValueError):
                # functions that only work on scalars: one call per element
                off = np.zeros(shape, dtype=np.int64)
                for pos in np.ndindex(*shape):
                    v = static_int(self.forward(*pos))
                    if v is None:
                        raise TypeError(f"layout function of {self.name or 'a layout'} did not "
                                        f"return an integer for index {pos}") from None
                    off[pos] = v
            self._offsets = off.copy()
            self._offsets.flags.writeable = False
        return self._offsets

    @property
    def physical_size(self):
        """Number of elements of storage (an int, or an expression for symbolic shapes)."""
        if self._physical_size is None:
            off = self.offsets()
            self._physical_size = int(off.max()) + 1 if off.size else 0
        return self._physical_size

    def is_row_major(self) -> bool:
        """True when the layout is the plain row-major (C order) layout of its shape."""
        if self._row_major is None:
            off = self.offsets()
            self._row_major = bool(np.array_equal(off.ravel(), np.arange(off.size)))
        return self._row_major

    def inverse_table(self) -> np.ndarray:
        """For each physical offset, the row-major flat logical index stored there (-1: unused).

        Raises ValueError when two logical elements share an offset (not invertible)."""
        off = self.offsets().ravel()
        size = int(self.physical_size)
        if off.size and off.min() < 0:
            raise ValueError(f"{self!r} maps an element to a negative offset {int(off.min())}")
        counts = np.bincount(off, minlength=size)
        if counts.size and counts.max() > 1:
            o = int(np.argmax(counts))
            who = [np.unravel_index(int(k), self.shape) for k in np.nonzero(off == o)[0][:2]]
            raise ValueError(f"{self!r} is not invertible: elements {tuple(map(int, who[0]))} "
                             f"and {tuple(map(int, who[1]))} share offset {o}")
        table = np.full(size, -1, dtype=np.int64)
        table[off] = np.arange(off.size)
        return table

    def vector_width(self, limit=None) -> int:
        """Largest power of two v (<= limit) such that every aligned run of v elements along the
        last dim is stored contiguously at a v-aligned offset (safe vector loads/stores)."""
        off = self.offsets()
        if off.ndim == 0 or off.size == 0:
            return 1
        last = off.shape[-1]
        v, best = 2, 1
        while last % v == 0 and (limit is None or v <= limit):
            runs = off.reshape(off.shape[:-1] + (last // v, v))
            if not (np.all(runs[..., 0] % v == 0)
                    and np.all(runs - runs[..., :1] == np.arange(v))):
                break
            best, v = v, v * 2
        return best

    # ---- printing --------------------------------------------------------------------------
    def __repr__(self):
        shape = list(self.shape)
        if self._describe is not None:
            return f"Layout({self._describe}, shape={shape})"
        try:
            vars_ = [ir.Var(f"i{k}") for k in range(len(self.shape))]
            body = str(self.forward(*vars_))
        except Exception:  # a user function that only works on ints
            body = "<function>"
        name = f"{self.name}: " if self.name else ""
        return f"Layout({name}{shape} -> {body})"


_PLACEHOLDERS: list = []


def index_placeholders(n: int) -> tuple:
    """The canonical index variables `_i0 .. _i{n-1}` (the same Var objects every call)."""
    while len(_PLACEHOLDERS) < n:
        _PLACEHOLDERS.append(ir.Var(f"_i{len(_PLACEHOLDERS)}"))
    return tuple(_PLACEHOLDERS[:n])


def layout_equal(a: Layout, b: Layout) -> bool:
    """True when two layouts have the same shape and the same offset for every index.

    Static shapes are compared by enumeration; symbolic ones structurally (two row-major
    layouts of the same shape are equal; otherwise the forward expressions must match)."""
    if len(a.shape) != len(b.shape):
        return False
    static = True
    for x, y in zip(a.shape, b.shape):
        sx, sy = static_int(x), static_int(y)
        if sx is None or sy is None:
            static = False
            if x is not y and not ir.structural_equal(x, y):
                return False
        elif sx != sy:
            return False
    if static:
        return bool(np.array_equal(a.offsets(), b.offsets()))
    if a._row_major and b._row_major:
        return True
    vars_ = [ir.Var(f"i{k}") for k in range(len(a.shape))]
    return ir.structural_equal(ir.as_expr(a.forward(*vars_)), ir.as_expr(b.forward(*vars_)))


def row_major(shape, name="row_major") -> Layout:
    """The C-order layout of `shape` (symbolic extents allowed)."""
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(static_int(s) if static_int(s) is not None else s for s in shape)
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc = acc * s
    strides = tuple(reversed(strides))

    def fwd(*idx):
        off = 0
        for i, st in zip(idx, strides):
            off = off + (i if static_int(st) == 1 else i * st)
        return off

    return Layout(shape, fwd, name=name, row_major=True, physical_size=prod(shape),
                  describe="row_major")


def make_linear_layout(*args):
    """Reference spelling: row-major layout of a buffer or of (rows, cols)."""
    if len(args) == 1:
        shape = args[0].shape if hasattr(args[0], "shape") else args[0]
    else:
        shape = args
    return row_major(tuple(shape))


def make_padded_layout(shape, pad: int) -> Layout:
    """Rows of the last dim padded by `pad` elements: pitch = shape[-1] + pad.

    offset = row * (C + pad) + c, where row is the row-major index over all leading dims.
    Padding by 16 bytes' worth of elements is the classic fix for column-wise bank conflicts;
    physical_size includes the padding after the last row."""
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(static_int(s) if static_int(s) is not None else s for s in shape)
    if static_int(pad) is None or pad < 0:
        raise ValueError(f"make_padded_layout pad must be a non-negative int, got {pad!r}")
    if pad == 0:
        return row_major(shape)
    pitch = shape[-1] + pad
    lead = shape[:-1]

    def fwd(*idx):
        row = 0
        for i, e in zip(idx[:-1], lead):
            row = row * e + i
        return row * pitch + idx[-1]

    return Layout(shape, fwd, name="padded", row_major=len(shape) == 1,
                  physical_size=prod(lead) * pitch, describe=f"padded(+{pad})")
