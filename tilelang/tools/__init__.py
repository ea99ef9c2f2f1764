"""Developer tools: `plot_layout` (draw a Fragment or shared-memory Layout; needs matplotlib)
and `Analyzer` (a static estimate of a kernel's flops, global bytes and time)."""

from .analyzer import AnalysisResult, Analyzer  # noqa: F401


def plot_layout(obj, path, **kwargs):
    """Draw a Fragment or Layout to `path` (see tilelang/layout/plot.py)."""
    from ..layout.plot import plot_layout as _plot

    return _plot(obj, path, **kwargs)


__all__ = ["plot_layout", "Analyzer", "AnalysisResult"]
