"""`tilelang.layout.cute`: CuTe's layout algebra in Python (the reference's public module).

    from tilelang.layout import cute
    L = cute.make_layout((4, 8), stride=(8, 1))      # (4,8):(8,1)
    L(5)                                              # 9: mode 0 fastest
    cute.composition(L, cute.make_layout(8, 2))       # A o B
    cute.ComposedLayout.from_tilelang(layout, buf)    # Sw<3,4,3> o 0 o ...

* int_tuple.py: IntTuple trees (static / dynamic / ScaledBasis leaves), their arithmetic and
  text, and the Python view (`to_python`, `from_python`, `E`, `ScaledBasis`);
* layout.py: `Layout` and the algebra (coalesce, composition, complement, inverses, divide,
  products, restrict);
* swizzle.py: `Swizzle` and `ComposedLayout`;
* recovery.py: TileLang layouts read back as CuTe layouts.

Sizes and strides may be kernel expressions (`T.dynamic`, loop variables); the results then
are expressions. Failed preconditions raise `LayoutAlgebraError` (a ValueError, caught by
`tvm.error.InternalError` as the reference's failed checks are).
"""

from .errors import LayoutAlgebraError
from .int_tuple import (E, IntTuple, IntTupleConst, IntTuplePrimExpr, IntTupleScaledBasis,
                        IntTupleTuple, ScaledBasis, compatible, congruent, flatten_to_tuple,
                        from_python, product, to_python)
from .layout import (Layout, blocked_product, coalesce, complement, composition, coshape,
                     cosize, filter, flatten, left_inverse, logical_divide, logical_product,
                     make_column_major_layout, make_identity_layout, make_layout,
                     make_row_major_layout, rank, restrict, right_inverse, size,
                     tiled_product)
from .swizzle import ComposedLayout, Swizzle

__all__ = ["LayoutAlgebraError", "E", "IntTuple", "IntTupleConst", "IntTuplePrimExpr",
           "IntTupleScaledBasis", "IntTupleTuple", "ScaledBasis", "compatible", "congruent",
           "flatten_to_tuple", "from_python", "product", "to_python", "Layout",
           "blocked_product", "coalesce", "complement", "composition", "coshape", "cosize",
           "filter", "flatten", "left_inverse", "logical_divide", "logical_product",
           "make_column_major_layout", "make_identity_layout", "make_layout",
           "make_row_major_layout", "rank", "restrict", "right_inverse", "size",
           "tiled_product", "ComposedLayout", "Swizzle"]
