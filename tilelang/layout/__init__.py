"""Layouts: where tile elements live (docs/layouts.md).

* `Layout` — shared/global tiles: logical index -> physical element offset (`row_major`,
  `swizzled` 32/64/128-byte XOR swizzles of HARDWARE.md §4, `make_padded_layout`).
* `Fragment` — register tiles: logical index <-> (thread, register slot), described by CuTe-like
  modes; `elementwise_fragment` (T.Parallel default) and the tensor-core layouts of
  HARDWARE.md §1/§5 (`mma_accumulator`, `mma_a_fragment`, `wgmma_accumulator`, ...).
* `plot_layout` draws either (matplotlib, imported only when called).

All index functions accept Python ints, numpy arrays and IR expressions (`layout/index.py`).
"""

from .index import xor  # noqa: F401
from .layout import (Layout, layout_equal, make_linear_layout,  # noqa: F401
                     make_padded_layout, row_major)
from .swizzle import (SWIZZLE_MODES, make_full_bank_swizzled_layout,  # noqa: F401
                      make_half_bank_swizzled_layout, make_mma_swizzle_layout,
                      make_quarter_bank_swizzled_layout, make_swizzled_layout,
                      make_wgmma_swizzled_layout, recognised_swizzle, swizzle_mode,
                      swizzled)
from .swizzle_enum import SwizzleMode  # noqa: F401
from .fragment import Fragment, Mode, ShufflePlan, Span, fragment_equal  # noqa: F401
from .build import (elementwise_fragment, make_fully_replicated_layout_fragment,  # noqa: F401
                    modes_from_function)
from .mma import (make_gemm_fragment_8x8, make_gemm_fragment_8x8_transposed,  # noqa: F401
                  mma_a_fragment, mma_accumulator, mma_b_fragment, mma_k_tile,  # noqa: F401
                  wgmma_a_fragment, wgmma_accumulator)


def plot_layout(obj, path, **kwargs):
    """Draw a Fragment or Layout to `path` (see tilelang/layout/plot.py)."""
    from .plot import plot_layout as _plot

    return _plot(obj, path, **kwargs)
