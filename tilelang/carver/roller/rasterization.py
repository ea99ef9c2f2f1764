"""Block rasterization plans of a recommended configuration (the reference's classes): whether
the kernel should launch its blocks in panels for L2 reuse (`T.use_swizzle(panel_size=...)`)."""

from __future__ import annotations

__all__ = ["Rasterization", "NoRasterization", "Rasterization2DRow", "Rasterization2DColumn"]


class Rasterization:
    panel_width_ = None

    @property
    def panel_width(self) -> int:
        if self.panel_width_ is None:
            raise ValueError(f"{self!r} has no panel width")
        return self.panel_width_

    def get_code(self) -> list:
        return []


class NoRasterization(Rasterization):
    """Blocks launch in grid order."""

    def __repr__(self):
        return "<NoRasterization>"


class Rasterization2DRow(Rasterization):
    """Panels of `panel_width` block rows (`T.use_swizzle(panel_width)`)."""

    def __init__(self, panel_width: int = 4):
        self.panel_width_ = panel_width

    def __repr__(self):
        return f"<Rasterization2DRow({self.panel_width_})>"


class Rasterization2DColumn(Rasterization):
    """Panels of `panel_width` block columns (`T.use_swizzle(panel_width, order="column")`)."""

    def __init__(self, panel_width: int = 4):
        self.panel_width_ = panel_width

    def __repr__(self):
        return f"<Rasterization2DColumn({self.panel_width_})>"
