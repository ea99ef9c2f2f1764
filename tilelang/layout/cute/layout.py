"""CuTe layouts and their algebra.

A `Layout` is a pair of congruent IntTuples, `shape:stride`, read column-major (mode 0 is the
fastest). `layout(c)` maps a coordinate (one linear index, or a tuple congruent to the shape)
to `sum(c_k * stride_k)`: an integer, an expression when a size or stride is dynamic, or a
coordinate tuple when strides are ScaledBases.

The algebra follows CuTe's layout.hpp: coalesce (fuse contiguous modes), composition
(`(A o B)(c) == A(B(c))`), complement (the part of the codomain a layout does not reach),
right/left inverse, logical divide, and the logical / tiled / blocked products. Dynamic
strides pass through where CuTe's algorithms allow them; algorithms that must order strides
(inverses, multi-mode complement) need static ones and say so.
"""

from __future__ import annotations

from .errors import check, fail
from .int_tuple import (ONE, ZERO, IntTuple, IntTupleConst, IntTupleScaledBasis,
                        IntTupleTuple, add, add_leaf, abs_leaf, basis_get, ceil_div_leaf,
                        div_leaf, flatten as flatten_tuple, from_python, is_congruent, is_const,
                        mod_leaf, mul, mul_leaf, product_of, sum_of, to_python, tuple_of,
                        unwrap)

__all__ = ["Layout", "rank", "flatten", "size", "coalesce", "right_inverse", "left_inverse",
           "composition", "filter", "coshape", "cosize", "complement", "logical_divide",
           "logical_product", "tiled_product", "blocked_product", "make_layout",
           "make_column_major_layout", "make_row_major_layout", "make_identity_layout",
           "restrict"]

_UNBOUNDED = float("inf")


class Layout:
    """`shape:stride`, two congruent IntTuples (see the module docstring)."""

    __slots__ = ("shape_tuple", "stride_tuple")

    def __init__(self, shape: IntTuple, stride: IntTuple):
        check(is_congruent(shape, stride),
              f"Layout shape and stride must be congruent: {shape} vs {stride}")
        self.shape_tuple = shape
        self.stride_tuple = stride

    # ---- the Python view -----------------------------------------------------------------
    @property
    def shape(self):
        return to_python(self.shape_tuple)

    @property
    def stride(self):
        return to_python(self.stride_tuple)

    def __getitem__(self, index: int) -> "Layout":
        """Mode `index` as a layout (a scalar mode stays scalar)."""
        return Layout(self.shape_tuple[int(index)], self.stride_tuple[int(index)])

    def __call__(self, coord):
        return to_python(self.apply(from_python(coord)))

    def apply(self, coord: IntTuple) -> IntTuple:
        """CuTe crd2idx on IntTuples."""
        return _crd2idx(coord, self.shape_tuple, self.stride_tuple)

    def with_shape(self, shape) -> "Layout":
        """The same function over another (compatible) shape: this layout composed with the
        column-major layout of `shape`."""
        return composition(self, make_column_major_layout(from_python(shape)))

    def same_as(self, other) -> bool:
        return (isinstance(other, Layout) and self.shape_tuple.same_as(other.shape_tuple)
                and self.stride_tuple.same_as(other.stride_tuple))

    # ---- text ----------------------------------------------------------------------------
    @staticmethod
    def parse(text: str) -> "Layout":
        """Read `shape:stride` (the inverse of `str`)."""
        text = str(text)
        check(":" in text, f"Layout text must be 'shape:stride', got {text!r}")
        shape, stride = text.split(":", 1)
        return Layout(IntTuple.parse(shape), IntTuple.parse(stride))

    def __str__(self):
        return f"{self.shape_tuple}:{self.stride_tuple}"

    def __repr__(self):
        return str(self)

    # ---- TileLang layouts ----------------------------------------------------------------
    @staticmethod
    def from_tilelang(layout):
        """The affine TileLang layout as a CuTe layout congruent to its shape (None when the
        address is not affine: a swizzle, an offset, a non-linear map)."""
        from .recovery import layout_from_tilelang

        return layout_from_tilelang(layout)

    @staticmethod
    def from_tilelang_hierarchical(layout):
        """A multi-output TileLang layout with each output axis on its basis E<i> (None when an
        axis is not affine or two axes depend on one input mode)."""
        from .recovery import layout_from_tilelang_hierarchical

        return layout_from_tilelang_hierarchical(layout)

    def to_tilelang(self):
        """The TileLang layout of the same function over `(size(mode 0), size(mode 1), ...)`;
        a coordinate-valued layout becomes a multi-output one."""
        from ..layout import Layout as TileLangLayout

        shape = [size(self[i]) for i in range(rank(self))]

        def forward(*coords):
            out = self(tuple(coords))
            return list(out) if isinstance(out, tuple) else [out]

        return TileLangLayout(shape, forward)


# =============================================================================================
# Evaluation
# =============================================================================================


def _crd2idx(coord: IntTuple, shape: IntTuple, stride: IntTuple) -> IntTuple:
    """CuTe crd2idx: a tuple coordinate sums its modes; a scalar coordinate over a tuple shape
    is split by divmod, the last mode taking the rest unreduced (so the layout extends linearly
    past its domain); a scalar coordinate of a scalar mode is `coord * stride`."""
    if isinstance(coord, IntTupleTuple):
        if not (isinstance(shape, IntTupleTuple) and shape.rank == coord.rank):
            fail(f"coordinate {coord} does not match the layout's shape {shape}")
        return sum_of(_crd2idx(c, s, d)
                      for c, s, d in zip(coord.fields, shape.fields, stride.fields))
    if isinstance(shape, IntTupleTuple):
        acc, rest = ZERO, coord
        last = shape.rank - 1
        for i, (s, d) in enumerate(zip(shape.fields, stride.fields)):
            if i == last:
                acc = add(acc, _crd2idx(rest, s, d))
            else:
                extent = product_of(s)
                acc = add(acc, _crd2idx(mod_leaf(rest, extent), s, d))
                rest = div_leaf(rest, extent)
        return acc
    return mul(coord, stride)


# =============================================================================================
# Structure
# =============================================================================================


def rank(layout: Layout) -> int:
    return layout.shape_tuple.rank


def flatten(layout: Layout) -> Layout:
    return Layout(flatten_tuple(layout.shape_tuple), flatten_tuple(layout.stride_tuple))


def _size(layout: Layout) -> IntTuple:
    return product_of(layout.shape_tuple)


def size(layout):
    """The domain size (of a ComposedLayout: of its layout)."""
    layout = getattr(layout, "layout", layout)
    return to_python(_size(layout))


def _modes(shapes, strides) -> Layout:
    """A layout of the given leaf modes: one mode is scalar-shaped (CuTe builds a tuple only
    for two or more)."""
    if len(shapes) == 1:
        return Layout(shapes[0], strides[0])
    return Layout(tuple_of(shapes), tuple_of(strides))


def concat(layouts) -> Layout:
    """make_layout(l0, l1, ...): each layout becomes one mode."""
    layouts = list(layouts)
    return Layout(tuple_of(l.shape_tuple for l in layouts),
                  tuple_of(l.stride_tuple for l in layouts))


# =============================================================================================
# Coalesce
# =============================================================================================


def _bw_coalesce(shapes, strides, front_shape, front_stride, max_extent) -> Layout:
    """CuTe bw_coalesce over flat modes (fastest first), scanning from the slowest with a
    running front mode seeded by the caller: extent-1 modes vanish, a mode that steps exactly
    onto the front's stride (`shape * stride == front.stride`) fuses into it while the fused
    extent stays within `max_extent`, anything else starts a new front. A layout that
    collapses entirely is the scalar 1:0."""
    out_shapes, out_strides = [], []
    for s, d in zip(reversed(shapes[:-1]), reversed(strides[:-1])):
        if is_const(s, 1):
            continue
        if is_const(front_shape, 1):
            front_shape, front_stride = s, d
            continue
        fuses = (is_const(s) and is_const(front_shape) and mul(s, d).same_as(front_stride)
                 and s.value * front_shape.value <= max_extent)
        if fuses:
            front_shape, front_stride = IntTupleConst(s.value * front_shape.value), d
        else:
            out_shapes.insert(0, front_shape)
            out_strides.insert(0, front_stride)
            front_shape, front_stride = s, d
    out_shapes.insert(0, front_shape)
    out_strides.insert(0, front_stride)
    if len(out_shapes) == 1 and is_const(out_shapes[0], 1):
        return Layout(ONE, ZERO)
    return _modes(out_shapes, out_strides)


def _flat_modes(layout: Layout):
    return (list(flatten_tuple(layout.shape_tuple).leaves()),
            list(flatten_tuple(layout.stride_tuple).leaves()))


def coalesce(layout: Layout, max_extent=None) -> Layout:
    """Flatten and fuse contiguous modes (each fused run at most `max_extent` long); the
    result is flat and the same function on [0, size)."""
    shapes, strides = _flat_modes(layout)
    cap = _UNBOUNDED if max_extent is None else int(max_extent)
    return _bw_coalesce(shapes, strides, shapes[-1], strides[-1], cap)


def _coalesce_x(layout: Layout) -> Layout:
    """Coalesce keeping the behaviour past the domain (CuTe coalesce_x): a trailing extent-1
    mode seeds the scan as extent 2, so its stride survives ((4,1):(1,0) -> (4,2):(1,0))."""
    shapes, strides = _flat_modes(layout)
    seed = IntTupleConst(2) if is_const(shapes[-1], 1) else shapes[-1]
    return _bw_coalesce(shapes, strides, seed, strides[-1], _UNBOUNDED)


def filter(layout: Layout) -> Layout:  # noqa: A001 - CuTe's name
    """Drop stride-0 and size-1 modes, then coalesce (CuTe filter)."""
    shapes, strides = _flat_modes(layout)
    shapes = [ONE if is_const(d, 0) else s for s, d in zip(shapes, strides)]
    return coalesce(_modes(shapes, strides))


# =============================================================================================
# Inverses
# =============================================================================================


def _static_modes(layout: Layout, what: str):
    shapes, strides = _flat_modes(layout)
    check(all(is_const(x) for x in shapes + strides),
          f"{what} requires static shapes and strides, got {layout}")
    return [s.value for s in shapes], [d.value for d in strides]


def _prefix_products(shapes):
    out, acc = [], 1
    for s in shapes:
        out.append(acc)
        acc *= s
    return out


def _layout_of_ints(shapes, strides) -> Layout:
    return Layout(tuple_of(map(IntTupleConst, shapes)), tuple_of(map(IntTupleConst, strides)))


def right_inverse(layout: Layout) -> Layout:
    """R with layout(R(i)) == i for i < size(R) (CuTe right_inverse): sorted by stride, the
    modes whose strides chain 1, s0, s0*s1, ... invert onto their input positions; the rest
    (including dynamic strides) is dropped."""
    c = coalesce(layout)
    shapes, strides = _flat_modes(c)
    check(all(is_const(s) for s in shapes), f"right_inverse requires static shapes, got {c}")
    shapes = [s.value for s in shapes]
    weights = _prefix_products(shapes)
    order = sorted((k for k, d in enumerate(strides) if is_const(d)),
                   key=lambda k: strides[k].value)
    inv_shapes, inv_strides, expected = [], [], 1
    for k in order:
        d = strides[k].value
        check(d >= 0, f"right_inverse requires non-negative strides, got {d}")
        if d == expected:
            inv_shapes.append(shapes[k])
            inv_strides.append(weights[k])
            expected = shapes[k] * d
    if not inv_shapes:
        return coalesce(_layout_of_ints([1], [0]))
    return coalesce(_layout_of_ints(inv_shapes, inv_strides))


def left_inverse(layout: Layout) -> Layout:
    """L with L(layout(i)) == i for an injective layout (CuTe left_inverse): sorted by stride,
    each mode's extent in the inverse is the stride ratio (a gap folds into the mode covering
    it), a leading stride-0 slot absorbs what lies below the smallest stride, and stride-0
    modes are skipped."""
    shapes, strides = _static_modes(coalesce(layout), "left_inverse")
    weights = _prefix_products(shapes)
    order = sorted(range(len(shapes)), key=lambda k: strides[k])
    inv_shapes, inv_strides, covered = [], [0], 1
    for k in order:
        d = strides[k]
        if d == 0:
            continue
        check(d % covered == 0, f"left_inverse divisibility condition: stride {d} is not a "
              f"multiple of the covered extent {covered}")
        inv_shapes.append(d // covered)
        inv_strides.append(weights[k])
        covered = d
    inv_shapes.append(shapes[order[-1]])
    return coalesce(_layout_of_ints(inv_shapes, inv_strides))


# =============================================================================================
# Composition
# =============================================================================================


def _coprofile(stride: IntTuple) -> IntTuple:
    """The codomain structure a layout addresses (CuTe coprofile): a single slot for plain
    strides, else the tree of the basis paths its ScaledBasis strides name. Composition
    coalesces its left operand down to this profile."""
    paths = [d.basis if isinstance(d, IntTupleScaledBasis) else () for d in stride.leaves()]
    if not any(paths):
        return ZERO
    return _profile_of_paths(paths)


def _profile_of_paths(paths) -> IntTuple:
    heads = [p[0] for p in paths if p]
    if not heads:
        return ZERO
    return tuple_of(_profile_of_paths([p[1:] for p in paths if p and p[0] == j])
                    if j in heads else ZERO for j in range(max(heads) + 1))


def _coalesce_to_profile(layout: Layout, profile: IntTuple) -> Layout:
    """coalesce_x at the terminals of `profile`; modes beyond the profile stay as they are."""
    if not isinstance(profile, IntTupleTuple):
        return _coalesce_x(layout)
    r = rank(layout)
    modes = [_coalesce_to_profile(layout[i], profile[i]) if i < profile.rank else layout[i]
             for i in range(r)]
    return concat(modes)


def _compose(lhs_shape, lhs_stride, rhs_shape, rhs_stride) -> Layout:
    """One rhs mode through the lhs (CuTe composition_impl); the result is congruent to the
    rhs mode."""
    if isinstance(rhs_shape, IntTupleTuple):  # composition distributes over rhs modes
        return concat(_compose(lhs_shape, lhs_stride, s, d)
                      for s, d in zip(rhs_shape.fields, rhs_stride.fields))
    if isinstance(rhs_stride, IntTupleScaledBasis):  # route into the lhs mode it names
        return _compose(basis_get(rhs_stride.basis, lhs_shape),
                        basis_get(rhs_stride.basis, lhs_stride), rhs_shape, rhs_stride.value)
    if is_const(rhs_stride, 0):
        return Layout(rhs_shape, rhs_stride)
    if not isinstance(lhs_shape, IntTupleTuple):
        return Layout(rhs_shape, mul(rhs_stride, lhs_stride))
    check(is_const(rhs_stride) and is_const(rhs_shape),
          f"composition needs a static rhs mode here, got {rhs_shape}:{rhs_stride}")
    return _compose_across_modes(lhs_shape, lhs_stride, rhs_shape.value, rhs_stride.value)


def _compose_across_modes(lhs_shape, lhs_stride, rest_shape: int, rest_stride: int) -> Layout:
    """A scalar rhs mode `rest_shape:rest_stride` walks the lhs modes fastest first: each lhs
    mode takes the part of the rhs extent that lands in it, and the remainder (extent and
    stride) carries to the next; the slowest lhs mode takes whatever is left. The divisibility
    checks are CuTe's conditions for the composition to exist."""
    shapes, strides = [], []
    last = lhs_shape.rank - 1
    for i in range(last):
        check(is_const(lhs_shape[i]), f"composition needs static lhs shapes, got {lhs_shape}")
        extent = lhs_shape[i].value
        check(rest_stride % extent == 0 or rest_stride < extent,
              f"composition stride divisibility: rest_stride={rest_stride}, "
              f"curr_shape={extent}")
        span = -(-extent // abs(rest_stride))
        next_stride = -(-abs(rest_stride) // extent) * (1 if rest_stride > 0 else -1)
        if span != 1 and rest_shape != 1:
            taken = min(span, rest_shape)
            check(rest_shape % taken == 0, f"composition shape divisibility: "
                  f"rest_shape={rest_shape}, new_shape={taken}")
            shapes.append(IntTupleConst(taken))
            strides.append(mul(IntTupleConst(rest_stride), lhs_stride[i]))
            rest_shape //= taken
        rest_stride = next_stride
    slowest = mul(IntTupleConst(rest_stride), lhs_stride[last])
    if not shapes:
        return Layout(IntTupleConst(rest_shape), slowest)
    if rest_shape == 1:
        return Layout(unwrap(tuple_of(shapes)), unwrap(tuple_of(strides)))
    return Layout(tuple_of(shapes + [IntTupleConst(rest_shape)]), tuple_of(strides + [slowest]))


def composition(lhs: Layout, rhs: Layout) -> Layout:
    """`lhs o rhs`: result(c) == lhs(rhs(c)) on the domain of rhs, congruent to rhs. A
    ScaledBasis rhs stride routes into the lhs axis its path names."""
    lhs = _coalesce_to_profile(lhs, _coprofile(rhs.stride_tuple))
    return _compose(lhs.shape_tuple, lhs.stride_tuple, rhs.shape_tuple, rhs.stride_tuple)


# =============================================================================================
# Codomain
# =============================================================================================


def _coshape(layout: Layout) -> IntTuple:
    """CuTe coshape: 1 + inner_product(shape - 1, |stride|), per codomain axis."""
    minus_one = layout.shape_tuple.map_leaves(lambda s: add_leaf(s, IntTupleConst(-1)))
    reach = sum_of(mul(minus_one, layout.stride_tuple.map_leaves(abs_leaf)).leaves())
    return reach.map_leaves(lambda c: add_leaf(c, ONE))


def coshape(layout: Layout):
    return to_python(_coshape(layout))


def _cosize(layout: Layout) -> IntTuple:
    return product_of(_coshape(layout))


def cosize(layout: Layout):
    """The codomain size, size(coshape(layout))."""
    return to_python(_cosize(layout))


# =============================================================================================
# Complement, divide, products
# =============================================================================================


def complement(layout: Layout, cotarget=None) -> Layout:
    """The layout of the codomain positions [0, cotarget) that `layout` does not reach, in
    order (CuTe complement). Dynamic strides are supported for a single mode only."""
    f = filter(layout)
    if cotarget is None:
        total = _cosize(f)
        check(is_const(total), f"complement without a cotarget needs a static cosize, got "
              f"{total}")
        cotarget = total.value
    cotarget = int(cotarget)
    shapes, strides = _flat_modes(f)
    modes = [(s, d) for s, d in zip(shapes, strides) if not (is_const(s, 1) and is_const(d, 0))]
    if all(is_const(s) and is_const(d) for s, d in modes):
        return _complement_static([s.value for s, _ in modes], [d.value for _, d in modes],
                                  cotarget)
    check(len(modes) == 1, f"dynamic-stride complement only for rank-1 layouts (as CuTe); "
          f"got rank {len(modes)}")
    (s, d), = modes
    check(not isinstance(d, (IntTupleTuple, IntTupleScaledBasis)),
          f"complement requires a scalar stride, got {d}")
    step = mul_leaf(d, s)
    return coalesce(Layout(tuple_of([d, ceil_div_leaf(IntTupleConst(cotarget), step)]),
                           tuple_of([ONE, step])))


def _complement_static(shapes, strides, cotarget) -> Layout:
    """Sort-and-fold (CuTe detail::complement): take the smallest remaining stride, emit the
    gap below it as a mode, step past it; finally a mode fills up to `cotarget`."""
    if not shapes:
        return coalesce(_layout_of_ints([cotarget], [1]))
    modes = sorted(zip(strides, shapes))
    out_shapes, out_strides, run = [], [], 1
    for d, s in modes:
        gap = d // run
        check(gap != 0, "non-injective layout detected in complement")
        out_shapes.append(gap)
        out_strides.append(run)
        run = d * s
    out_shapes.append(-(-cotarget // run))
    out_strides.append(run)
    return coalesce(_layout_of_ints(out_shapes, out_strides))


def logical_divide(layout: Layout, tiler: Layout) -> Layout:
    """(tile, rest): layout composed with (tiler, complement(tiler, size(layout)))."""
    total = _size(coalesce(layout))
    check(is_const(total), f"logical_divide needs a static layout size, got {total}")
    return composition(layout, concat([tiler, complement(tiler, total.value)]))


def logical_product(block: Layout, tiler: Layout) -> Layout:
    """(block, rest): the block repeated as the tiler says, each copy placed in the part of
    the codomain the block does not reach."""
    block_size, tiler_cosize = _size(block), _cosize(tiler)
    check(is_const(block_size) and is_const(tiler_cosize),
          f"logical_product needs a static block size and tiler cosize, got {block_size} and "
          f"{tiler_cosize}")
    rest = composition(complement(block, block_size.value * tiler_cosize.value), tiler)
    return concat([block, rest])


def tiled_product(block: Layout, tiler: Layout) -> Layout:
    """(block, rest_0, rest_1, ...): the logical product with its rest mode unpacked (a
    rank-1 rest stays as it is)."""
    product_ = logical_product(block, tiler)
    rest = product_[1]
    if rank(rest) == 1:
        return product_
    return concat([product_[0]] + [rest[i] for i in range(rank(rest))])


def blocked_product(block: Layout, tiler: Layout) -> Layout:
    """Mode i is ((block_i, rest_i)): a flat per-mode coordinate covers block extent x tiler
    extent along that mode. The shorter operand is padded with 1:0 modes."""
    r = max(rank(block), rank(tiler))
    scalar = Layout(ONE, ZERO)

    def padded(layout):
        return concat(layout[i] if i < rank(layout) else scalar for i in range(r))

    product_ = logical_product(padded(block), padded(tiler))
    blocks, rest = product_[0], product_[1]
    check(rank(rest) == r, f"blocked_product: rest profile {rest.shape_tuple} does not match "
          f"the tiler rank {r}")
    return concat(concat([blocks[i], rest[i]]) for i in range(r))


# =============================================================================================
# Makers
# =============================================================================================


def _compact_strides(shape: IntTuple, fastest_first: bool) -> IntTuple:
    """CuTe compact_col_major / compact_row_major: a running product threads through the
    leaves (mode 0 first, or last first); a static extent-1 leaf takes stride 0 and does not
    advance it."""
    acc = ONE

    def visit(t):
        nonlocal acc
        if isinstance(t, IntTupleTuple):
            order = range(t.rank) if fastest_first else range(t.rank - 1, -1, -1)
            out = [None] * t.rank
            for i in order:
                out[i] = visit(t[i])
            return tuple_of(out)
        if is_const(t, 1):
            return ZERO
        stride, acc = acc, mul_leaf(acc, t)
        return stride

    return visit(shape)


def _identity_strides(shape: IntTuple, path=()) -> IntTuple:
    if isinstance(shape, IntTupleTuple):
        return tuple_of(_identity_strides(s, path + (i,)) for i, s in enumerate(shape.fields))
    return IntTupleScaledBasis(ONE, path)


def make_column_major_layout(shape) -> Layout:
    shape = from_python(shape)
    return Layout(shape, _compact_strides(shape, True))


def make_row_major_layout(shape) -> Layout:
    shape = from_python(shape)
    return Layout(shape, _compact_strides(shape, False))


def make_identity_layout(shape) -> Layout:
    """Each leaf at tree path p has stride E<p>: the layout maps a coordinate to itself."""
    shape = from_python(shape)
    return Layout(shape, _identity_strides(shape))


def make_layout(shape, stride=None) -> Layout:
    """`make_layout(shape, stride)`; without a stride, column-major; `make_layout([l0, l1,
    ...])` of layouts concatenates them as modes."""
    if (stride is None and isinstance(shape, (tuple, list)) and shape
            and all(isinstance(x, Layout) for x in shape)):
        return concat(shape)
    if stride is None:
        return make_column_major_layout(shape)
    return Layout(from_python(shape), from_python(stride))


# =============================================================================================
# Restrict
# =============================================================================================


def restrict(layout: Layout, region):
    """(offset, sublayout) for a region (one Range per top-level mode): layout(min + c) ==
    offset + sublayout(c). Each mode is reshaped to its extent with `with_shape`; statically
    extent-1 modes are dropped."""
    region = list(region)
    check(len(region) == rank(layout),
          f"restrict: region rank {len(region)} != layout rank {rank(layout)}")
    mins, modes = [], []
    for i, rng in enumerate(region):
        mins.append(from_python(rng.min))
        extent = from_python(rng.extent)
        if is_const(extent, 1):
            continue
        modes.append(layout[i].with_shape(extent))
    offset = layout.apply(tuple_of(mins))
    sub = concat(modes) if modes else Layout(ONE, ZERO)
    return to_python(offset), sub
