"""The reference's `tilelang.carver` (tile-configuration recommendation), with our own model:
`carver.arch` describes devices (`CUDA(target)`, `driver` queries of the current GPU),
`carver.template.MatmulTemplate(...).with_arch(arch).recommend_hints(topk)` ranks GEMM tile
configurations (`carver.roller.recommend`), whose `Hint`s carry the reference's fields
(`block`, `warp`, `rstep`, `pipeline_stage`, `rasterization_plan`)."""

from . import arch  # noqa: F401
