"""`Hint`: one recommended tile configuration, with the reference's field names."""

from __future__ import annotations

from .rasterization import NoRasterization

__all__ = ["Hint"]


class Hint:
    """block [M, N] tile; warp [M, N] tile of one warp; rstep [K] step; pipeline_stage;
    rasterization_plan; use_tc (tensor cores). `threads` = warps of the block x 32."""

    def __init__(self) -> None:
        self.arch = None
        self.use_tc = True
        self.block: list = []
        self.warp: list = []
        self.thread: list = []
        self.rstep: list = []
        self.reduce_thread: list = []
        self.rasterization_plan = NoRasterization()
        self.pipeline_stage = 1
        self.use_async = False
        self.split_k_factor = 1
        self.shared_scope = "shared"
        self.score = 0.0  # estimated seconds (lower is better)

    @property
    def threads(self) -> int:
        if not self.block or not self.warp:
            return 0
        return (self.block[0] // self.warp[0]) * (self.block[1] // self.warp[1]) * 32

    def to_dict(self) -> dict:
        out = {"block": list(self.block), "warp": list(self.warp), "rstep": list(self.rstep),
               "use_tc": self.use_tc, "pipeline_stage": self.pipeline_stage}
        if not isinstance(self.rasterization_plan, NoRasterization):
            out["rasterization_plan"] = repr(self.rasterization_plan)
        return out

    def __repr__(self):
        return str(self.to_dict())
