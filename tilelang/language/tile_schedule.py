"""`T.PersistentTileScheduler`: the reference's persistent, grid-strided tile order.

    sched = T.PersistentTileScheduler(m_blocks, n_blocks, num_workers, swizzle_size=8)
    sched.init(block_id)
    while sched.valid():
        bx, by = sched.m_idx, sched.n_idx
        ...
        sched.next_tile()

Worker w visits the linear tile indices w, w + num_workers, ... below the tile count. A
linear index is decoded (`coord`) over a grid of ceil(M / cluster_size) x N tiles: the
primary axis (M when `column_major`, else N) is swept whole for each panel of
`swizzle_size` tiles of the other axis (a narrower last panel when it does not divide).
"""

from __future__ import annotations

from ..frontend.builder import error
from ..ir import nodes as ir


class PersistentTileScheduler:
    """Tile coordinates of a persistent kernel (module docstring). State (`m_idx`, `n_idx`,
    `linear_idx`, `current_iter`: the tile, the linear cursor and how many tiles this worker
    has finished) lives in per-thread `T.alloc_var`s; `stateful=False` keeps only the pure
    decoder `coord(tile_id)`. `num_workers` defaults to the GPU's SM count / cluster_size."""

    def __init__(self, num_m_tiles, num_n_tiles, num_workers=None, swizzle_size: int = 1,
                 column_major: bool = True, cluster_size: int = 1, stateful: bool = True,
                 name: str | None = None):
        from .alloc import alloc_var
        from .math import ceildiv

        if not isinstance(swizzle_size, int) or swizzle_size < 1:
            raise error(ValueError, f"T.PersistentTileScheduler swizzle_size must be an int "
                                    f">= 1, got {swizzle_size!r}")
        if not isinstance(cluster_size, int) or cluster_size < 1:
            raise error(ValueError, f"T.PersistentTileScheduler cluster_size must be an int "
                                    f">= 1, got {cluster_size!r}")
        if num_workers is None:
            from ..carver.arch import driver

            num_workers = driver.get_num_sms() // cluster_size
        self.num_workers = num_workers
        self.swizzle_size = swizzle_size
        self.cluster_size = cluster_size
        self._column_major = column_major
        m_clusters = ceildiv(num_m_tiles, cluster_size)
        self._total_tiles = m_clusters * num_n_tiles
        self._primary, self._secondary = (m_clusters, num_n_tiles) if column_major else \
            (num_n_tiles, m_clusters)
        self._stateful = stateful
        if stateful:
            self._state = {}
            for field in ("m_idx", "n_idx", "linear_idx", "current_iter"):
                var = alloc_var("int32")
                var.name = f"{name}_{field}" if name else field
                self._state[field] = var

    def _var(self, field):
        if not self._stateful:
            raise error(ValueError, f"sched.{field}: this T.PersistentTileScheduler was made "
                                    "with stateful=False (only coord() is available)")
        return self._state[field]

    def _load(self, field):
        var = self._var(field)
        return ir.Load(var, (ir.const(0),), var.dtype)

    def _store(self, field, value):
        from ..frontend.builder import emit

        var = self._var(field)
        emit(ir.Store, var, (ir.const(0),), ir.cast_to(value, var.dtype))

    m_idx = property(lambda self: self._load("m_idx"), doc="The current tile's row.")
    n_idx = property(lambda self: self._load("n_idx"), doc="The current tile's column.")
    linear_idx = property(lambda self: self._load("linear_idx"),
                          doc="This worker's linear cursor.")
    current_iter = property(lambda self: self._load("current_iter"),
                            doc="Tiles this worker has moved past (the wave index).")

    def coord(self, tile_id):
        """(m, n) of the linear tile index `tile_id` (m is the cluster row when
        cluster_size > 1: add the block's rank in its cluster)."""
        from .math import max as tmax, min as tmin

        primary, secondary, swizzle = self._primary, self._secondary, self.swizzle_size
        group = tile_id // (primary * swizzle)
        base = group * swizzle
        width = tmax(1, tmin(swizzle, secondary - base))
        in_group = tile_id - group * (primary * swizzle)
        fast, slow = in_group // width, base + in_group % width
        return (fast, slow) if self._column_major else (slow, fast)

    def _update(self):
        m, n = self.coord(self.linear_idx)
        self._store("m_idx", m)
        self._store("n_idx", n)

    def init(self, worker_id):
        """Start at tile `worker_id` (the block index, or the cluster index when clustered)."""
        self._store("current_iter", 0)
        self._store("linear_idx", worker_id)
        self._update()

    def next_tile(self):
        """Move to this worker's next tile."""
        self._store("current_iter", self.current_iter + 1)
        self._store("linear_idx", self.linear_idx + self.num_workers)
        self._update()

    def valid(self):
        """Whether the current tile exists (the persistent loop's condition)."""
        return self.linear_idx < self._total_tiles
