"""The reference's `tilelang.tileop` package: only `tileop.base.GemmWarpPolicy` (the warp
partition policy of `T.gemm`, also `T.GemmWarpPolicy`) is provided here; the tile operators
themselves are `T.gemm`, `T.copy`, ... (tilelang/language/tile_ops.py)."""

from .base import GemmWarpPolicy  # noqa: F401
