"""Reference-compatible names for instruction layouts (`tilelang.intrinsics`).

The layouts themselves live in `tilelang.layout`; this module only re-exports them under the
names reference programs import.
"""

from .layout.mma import (mma_a_fragment, mma_accumulator, mma_b_fragment,  # noqa: F401
                         wgmma_a_fragment, wgmma_accumulator)
from .layout.swizzle import make_mma_swizzle_layout  # noqa: F401

__all__ = ["make_mma_swizzle_layout", "mma_accumulator", "mma_a_fragment", "mma_b_fragment",
           "wgmma_accumulator", "wgmma_a_fragment"]
