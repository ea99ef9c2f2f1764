"""Helpers of the reference's `tilelang.utils` that user programs import: tensor supply types
and comparison (`tilelang.utils.tensor`), target selection (`tilelang.utils.target`) and
buffer-scope tests (`tilelang.utils.language`).

Heavy modules (torch) are imported on first use.
"""

from .language import (is_fragment, is_global, is_local, is_shared,  # noqa: F401
                       is_shared_dynamic)
from .target import determine_target  # noqa: F401
from .tensor import (TensorSupplyType, get_tensor_supply, map_torch_type,  # noqa: F401
                     torch_assert_close)
