"""Drawing layouts with matplotlib (imported lazily; install it with `pip install matplotlib`).

`plot_layout(fragment, "acc.png")` colours each logical element by the thread that holds it and
writes `T<thread>` / `v<value>` in the cell; `plot_layout(layout, "smem.svg", elem_bits=16)`
colours each element of a shared-memory tile by the 16-byte bank group (0..7) of its physical
address and writes the 4-byte bank (0..31). Tiles of rank > 2 are drawn with the leading dims
flattened into rows. The format follows the file extension (png, svg, pdf).
"""

from __future__ import annotations

import numpy as np

__all__ = ["plot_layout"]


def _grid(shape):
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return 1, shape[0]
    return int(np.prod(shape[:-1])), shape[-1]


def plot_layout(obj, path, *, title=None, elem_bits=None, show_text=None, cell_inches=None,
                dpi=120, outline_warps=True):
    """Draw a Fragment (thread/value of each element) or a Layout (bank of each element) to
    `path`; returns the path. `show_text=None` writes labels when the tile has at most 1024
    cells; `elem_bits` (Layout only) defaults to the layout's own element width, else 16;
    `outline_warps` (Fragment only) draws black lines between elements of different warps."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("plot_layout needs matplotlib: pip install matplotlib") from e
    from .fragment import Fragment
    from .layout import Layout

    if isinstance(obj, Fragment):
        rows, cols = _grid(obj.shape)
        table = obj._holder_table()
        threads = table[0].reshape(rows, cols)
        values = table[1].reshape(rows, cols)
        colour = threads.astype(float)
        edges = threads // 32 if outline_warps and obj.num_threads > 32 else None
        n_colours = max(obj.num_threads, 1)
        labels = [[f"T{threads[r, c]}\nv{values[r, c]}" for c in range(cols)]
                  for r in range(rows)]
        default_title = repr(obj)
        cbar = "thread"
    elif isinstance(obj, Layout):
        bits = elem_bits or obj.elem_bits or 16
        rows, cols = _grid(obj.shape)
        byte = obj.offsets().reshape(rows, cols) * bits // 8
        group = (byte // 16) % 8
        bank = (byte // 4) % 32
        colour = group.astype(float)
        edges = None
        n_colours = 8
        labels = [[f"{bank[r, c]}" for c in range(cols)] for r in range(rows)]
        default_title = f"{obj!r}: colour = 16-byte bank group, text = 4-byte bank"
        cbar = "16-byte bank group"
    else:
        raise TypeError(f"plot_layout draws a Fragment or a Layout, got {type(obj).__name__}")

    if show_text is None:
        show_text = rows * cols <= 1024
    cell = cell_inches or (0.42 if show_text else 0.15)
    fig_w = min(max(cols * cell + 1.5, 4), 60)
    fig_h = min(max(rows * cell + 1.2, 3), 60)
    fig, ax = plt.subplots(figsize=(fig_w, fig_h))
    cmap = plt.get_cmap("tab20" if n_colours <= 20 else "turbo", n_colours)
    im = ax.imshow(colour, cmap=cmap, vmin=-0.5, vmax=n_colours - 0.5, aspect="equal",
                   interpolation="nearest")
    if show_text:
        size = max(2.0, min(7.0, cell * 14))
        for r in range(rows):
            for c in range(cols):
                ax.text(c, r, labels[r][c], ha="center", va="center", fontsize=size,
                        linespacing=0.9)
    if edges is not None:
        _outline(ax, edges)
    ax.set_xticks(range(0, cols, max(1, cols // 16)))
    ax.set_yticks(range(0, rows, max(1, rows // 16)))
    ax.set_xlabel("column")
    ax.set_ylabel("row")
    ax.set_title(title or default_title, fontsize=9, wrap=True)
    fig.colorbar(im, ax=ax, label=cbar, fraction=0.03, pad=0.02)
    fig.tight_layout()
    fig.savefig(str(path), dpi=dpi)
    plt.close(fig)
    return path


def _outline(ax, region):
    """Black segments on the cell borders where `region` (2-D ints) changes."""
    from matplotlib.collections import LineCollection

    segs = []
    rows, cols = region.shape
    for r, c in zip(*np.nonzero(region[:, 1:] != region[:, :-1])):
        segs.append([(c + 0.5, r - 0.5), (c + 0.5, r + 0.5)])
    for r, c in zip(*np.nonzero(region[1:, :] != region[:-1, :])):
        segs.append([(c - 0.5, r + 0.5), (c + 0.5, r + 0.5)])
    if segs:
        ax.add_collection(LineCollection(segs, colors="black", linewidths=1.5))
