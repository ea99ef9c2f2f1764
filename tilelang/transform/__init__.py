"""The compiler's passes (one per module, or per package for a pass with parts of its own;
engine/pipeline.py lists them in order; what they share is in transform/analysis/, and no
pass imports another), plus the reference's public names of this package: `PassConfigKey`
(keys of `pass_configs`) and the simplify helpers `simplify_prim_func` / `apply_simplify`
(simplify.py: no pass; lowering simplifies)."""

from .pass_config import PassConfigKey, PassContext  # noqa: F401
from .simplify import apply_simplify, simplify_prim_func  # noqa: F401

__all__ = ["PassConfigKey", "PassContext", "apply_simplify", "simplify_prim_func"]
