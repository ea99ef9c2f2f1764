"""`tilelang.cuda.intrinsics`: the mma.sync emitter and its layouts (see tilelang/cuda)."""

from .layout.mma_layout import get_swizzle_layout, make_mma_swizzle_layout  # noqa: F401
from .layout.utils import (get_ldmatrix_offset, get_mma_micro_size,  # noqa: F401
                           mma_store_index_map)
from .macro.mma_macro_generator import (TensorCoreIntrinEmitter,  # noqa: F401
                                        TensorCoreIntrinEmitterWithLadderTransform)
