"""`tvm.transform` for reference programs: `PassContext(config={...})`, whose pass configs
apply to the compilations inside its `with` block (tilelang.transform.PassContext)."""

from ..transform.pass_config import PassContext

__all__ = ["PassContext"]
