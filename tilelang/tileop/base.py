"""`tilelang.tileop.base.GemmWarpPolicy`: the same object as `T.GemmWarpPolicy`."""

from ..language.tile_ops import GemmWarpPolicy  # noqa: F401

__all__ = ["GemmWarpPolicy"]
