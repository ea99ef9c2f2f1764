"""User roles and mbarriers on the CPU interpreter.

A *role* is a region that runs on a contiguous range of the block's threads: `with T.ws(k):`
or a branch on the thread index (`if tx < 128:` / `else:`), recognised as in
ir/thread_range.py. Inside a role, tile operations and `T.Parallel` nests are performed by the
role's threads together (the reference lays them out on those threads), so they run once, as
at block level, when every thread of the role reaches them.

mbarriers (`T.alloc_barrier`) are modelled as the hardware keeps them (PTX mbarrier): a phase
number, the arrivals still pending in the phase and a transaction count (bytes expected by
`expect_tx` minus bytes completed by TMA). A phase completes when both reach zero; then the
pending count starts again from the barrier's arrive count. Waiting on parity P passes once
the phase of parity P has completed, i.e. while the current phase's parity is not P (a fresh
barrier reports parity 1 complete). More arrivals than a phase expects are an error (undefined
behaviour on the GPU).

Sibling roles (consecutive role statements, and the branches of an `if` / `elif` / `else`
chain on the thread index) that wait on mbarriers run as coroutines (one Python thread each,
only one running at a time): a role runs until it waits on a phase that has not completed,
then the next role that can make progress runs. The order is deterministic (a role keeps running until
it blocks; the next runnable role in program order follows). When every unfinished role waits
on a phase that no role can complete any more, the program would hang on the GPU: that is an
error at the line of each waiting role. A wait outside any role never yields: if its phase has
not completed there is nothing that could complete it (the error says so).
"""

from __future__ import annotations

import threading

import numpy as np

from ..errors import located
from .lanes import EMPTY, fail, mask_and, mask_or


class Role:
    """The role a statement runs in: its thread range and the mask of threads that entered."""

    __slots__ = ("lo", "hi", "mask")

    def __init__(self, lo, hi, mask):
        self.lo, self.hi, self.mask = lo, hi, mask

    def covers(self, mask) -> bool:
        """Whether `mask` is every thread that entered the role (a collective may run)."""
        if mask is self.mask:
            return True
        if mask is None or self.mask is None or mask is EMPTY or self.mask is EMPTY:
            return False
        return bool(np.array_equal(np.broadcast_to(mask, np.shape(self.mask)), self.mask))


def collective_ok(ctx, mask) -> bool:
    """A collective operation may run under `mask`: every thread of the block, or of the role
    that the statement is in."""
    return mask is None or (ctx.role is not None and ctx.role.covers(mask))


# ---- mbarriers -----------------------------------------------------------------------------------


class Barriers:
    """The mbarriers of one block: per `T.alloc_barrier` buffer, arrays of phase, pending
    arrivals, transaction bytes and arrive counts."""

    def __init__(self, inits):
        self.state = {}
        for buf, counts in inits:
            c = np.asarray(counts, np.int64)
            self.state[buf] = [np.zeros_like(c), c.copy(), np.zeros_like(c), c]

    def _get(self, ctx, buf):
        st = self.state.get(buf)
        if st is None:
            raise fail(ctx, ValueError, f"{buf.name} is not a barrier of T.alloc_barrier")
        return st

    def _check(self, ctx, buf, idx):
        n = len(self.state[buf][0])
        bad = (idx < 0) | (idx >= n)
        if np.any(bad):
            raise fail(ctx, IndexError, f"barrier {buf.name}[{int(np.asarray(idx)[bad][0])}] "
                                        f"does not exist ({buf.name} has {n})")

    def _settle(self, buf, i):
        phase, pending, tx, count = self.state[buf]
        if pending[i] == 0 and tx[i] == 0:
            phase[i] += 1
            pending[i] = count[i]

    def arrive(self, ctx, buf, idx, n):
        """`n` arrivals on barrier `buf[idx]`."""
        phase, pending, tx, count = self._get(ctx, buf)
        self._check(ctx, buf, idx)
        if n > pending[idx]:
            raise fail(ctx, RuntimeError,
                       f"{n} arrivals on barrier {buf.name}[{idx}] whose phase expects "
                       f"{pending[idx]} more (arrive count {count[idx]}): more arrivals than "
                       "a phase expects are undefined behaviour on the GPU")
        pending[idx] -= n
        self._settle(buf, idx)

    def expect_tx(self, ctx, buf, idx, nbytes):
        st = self._get(ctx, buf)
        self._check(ctx, buf, idx)
        st[2][idx] += nbytes

    def complete_tx(self, ctx, buf, idx, nbytes):
        st = self._get(ctx, buf)
        st[2][idx] -= nbytes
        self._settle(buf, idx)

    def passed(self, buf, idx, parity) -> bool:
        """Whether waiting on parity `parity` of `buf[idx]` returns (arrays: every one)."""
        phase = self.state[buf][0]
        return bool(np.all((phase[idx] & 1) != (np.asarray(parity) & 1)))

    def describe(self, buf, idx) -> str:
        phase, pending, tx, count = self.state[buf]
        i = int(np.asarray(idx).reshape(-1)[0])
        return (f"{buf.name}[{i}] is in phase {phase[i]} (parity {phase[i] & 1}) with "
                f"{pending[i]} of {count[i]} arrivals and {tx[i]} transaction bytes pending")


def per_lane(ctx, mask, values):
    """[(value, number of active lanes holding it)] of a per-thread int value."""
    n = ctx.nthreads
    if type(values) is not np.ndarray or values.ndim == 0:
        active = n if mask is None else int(np.count_nonzero(np.broadcast_to(mask, (n,))))
        return [(int(values), active)] if active else []
    v = np.broadcast_to(values, (n,))
    if mask is not None:
        v = v[np.broadcast_to(mask, (n,))]
    uniq, counts = np.unique(v, return_counts=True)
    return [(int(u), int(k)) for u, k in zip(uniq, counts)]


def wait(ctx, buf, idx, parity, what):
    """Block the running role until `buf[idx]` passes `parity` (see the module docstring)."""
    bars = ctx.barriers

    from .tileops import cluster_rank

    cluster = getattr(ctx, "cluster_barrier", None)

    def ready():
        while not bars.passed(buf, idx, parity):
            # a multicast on its way to this block may land now
            if cluster is None or not cluster.land(ctx, cluster_rank(ctx), buf, int(idx)):
                return False
        return True

    if ready():
        return
    if ctx.sched is None:
        raise fail(ctx, RuntimeError,
                   f"{what} would wait forever: {bars.describe(buf, idx)}, and no other role "
                   "runs alongside this statement to complete the phase")
    ctx.sched.block(ctx, ready, lambda: bars.describe(buf, idx))


# ---- concurrent roles ------------------------------------------------------------------------


class _Abort(BaseException):
    """Unwinds a role thread when a sibling failed or the roles deadlocked."""


class RoleScheduler:
    """Runs sibling roles as coroutines on Python threads, one at a time (module docstring)."""

    def __init__(self, n):
        self.cv = threading.Condition()
        self.turn = 0
        self.state = ["ready"] * n
        self.ready = [None] * n
        self.where = [None] * n  # (loc, description) of each blocked role's wait
        self.error = None
        self.deadlock = False
        self.stuck = []  # (loc, description) of the waits that can never complete

    def block(self, ctx, ready, describe):
        i = ctx.part
        with self.cv:
            self.state[i] = "blocked"
            self.ready[i] = ready
            self.where[i] = (ctx.loc, describe)
            self._pass_on(i)
            self.cv.wait_for(lambda: self.turn == i or self.error is not None or
                             self.deadlock)
            if self.turn != i:
                raise _Abort()
            self.state[i] = "ready"

    def _pass_on(self, i):
        n = len(self.state)
        for k in range(1, n + 1):
            j = (i + k) % n
            if self.state[j] == "ready" or (self.state[j] == "blocked" and self.ready[j]()):
                self.turn = j
                self.cv.notify_all()
                return
        self.turn = None
        if any(s == "blocked" for s in self.state):
            self.deadlock = True
            self.stuck = [w for w, s in zip(self.where, self.state) if s == "blocked"]
        self.cv.notify_all()

    def run(self, parts, func_name):
        """`parts`: callables, each running one role to the end. Returns when all are done."""
        threads = []
        for i, part in enumerate(parts):
            t = threading.Thread(target=self._main, args=(i, part), daemon=True,
                                 name=f"tilelang-role-{func_name}-{i}")
            threads.append(t)
            t.start()
        for t in threads:
            t.join()
        if self.error is not None:
            raise self.error
        if self.deadlock:
            lines = [f"line {loc.lineno if loc else '?'}: {describe()}"
                     for loc, describe in self.stuck]
            loc = self.stuck[0][0]
            raise located(RuntimeError)(
                "the roles wait on each other forever (the kernel would hang on the GPU): " +
                "; ".join(lines), loc)

    def _main(self, i, part):
        with self.cv:
            self.cv.wait_for(lambda: self.turn == i or self.error is not None or
                             self.deadlock)
            if self.turn != i:
                self.state[i] = "done"
                return
        try:
            part()
        except _Abort:
            pass
        except BaseException as exc:  # handed to the launching thread
            with self.cv:
                if self.error is None:
                    self.error = exc
        with self.cv:
            self.state[i] = "done"
            if self.error is not None:
                self.turn = None
                self.cv.notify_all()
            else:
                self._pass_on(i)


def run_concurrently(ctx, mask, parts):
    """Run role parts [(cond_fn, body_fn, (lo, hi))] side by side (each on the threads where
    its condition holds); returns the lanes that continue after them."""
    active = []
    rest = mask
    for cond, body, rng in parts:
        ctx.mask = mask
        m = mask_and(mask, cond(ctx))
        if m is EMPTY:
            continue
        active.append((m, body, rng))
        rest = _without(rest, m)
    sched = RoleScheduler(len(active))
    outs = [None] * len(active)
    clones = []

    def make(k, m, body, rng):
        sub = ctx.clone()
        sub.sched, sub.part, sub.role = sched, k, Role(rng[0], rng[1], m)
        clones.append(sub)

        def part():
            outs[k] = body(sub, m)
        return part

    runners = [make(k, m, body, rng) for k, (m, body, rng) in enumerate(active)]
    sched.run(runners, ctx.func_name)
    for sub in clones:  # breaks out of loops around the roles
        for d in range(len(ctx.brk)):
            ctx.brk[d] = mask_or(ctx.brk[d], sub.brk[d])
    out = rest
    for o in outs:
        out = mask_or(out, o)
    return out


def _without(mask, m):
    from .lanes import mask_andnot

    if m is None:
        return EMPTY
    return mask_andnot(mask, m)


# ---- grid-wide barriers (T.sync_grid) -------------------------------------------------------------


class GridBarrier:
    """T.sync_grid: every block of the grid arrives, then all continue (a generation count)."""

    def __init__(self, nblocks):
        self.nblocks, self.arrived, self.generation = nblocks, 0, 0

    def sync(self, ctx):
        if ctx.mask is not None:
            raise fail(ctx, RuntimeError, "T.sync_grid reached by only some threads of the "
                                          "block (the kernel would hang on the GPU)")
        sched, index = ctx.grid
        gen = self.generation
        self.arrived += 1
        if self.arrived == self.nblocks:
            self.arrived, self.generation = 0, gen + 1
            return
        saved = ctx.part
        ctx.part = index
        try:
            sched.block(ctx, lambda: self.generation > gen,
                        lambda: f"T.sync_grid: {self.arrived} of {self.nblocks} blocks arrived")
        finally:
            ctx.part = saved


def run_grid(ctx, blocks, start_block, body):
    """Run the blocks of a kernel that uses T.sync_grid side by side (one coroutine each), as
    a cooperative launch keeps them all resident on the GPU."""
    sched = RoleScheduler(len(blocks))
    barrier = GridBarrier(len(blocks))

    def make(k, block):
        sub = ctx.clone()

        def part():
            start_block(sub, *block)
            sub.grid, sub.grid_barrier, sub.sched = (sched, k), barrier, None
            body(sub, None)
        return part

    sched.run([make(k, b) for k, b in enumerate(blocks)], ctx.func_name)


# ---- thread block clusters (T.cluster_arrive / T.cluster_wait / remote mbarrier arrivals) ------


class ClusterBarrier:
    """The cluster barrier of one cluster (`barrier.cluster`): a block's arrival counts once
    all its threads arrive; a wait returns once every block of the cluster has arrived in the
    block's current phase. Also the directory of the blocks' mbarriers, for arrivals from
    peers (`T.mbarrier_arrive(bar, cta_id)`)."""

    def __init__(self, nblocks):
        self.nblocks, self.arrived, self.generation = nblocks, 0, 0
        self.peers = {}  # rank -> Barriers of the block, once it has started
        self.blocks = {}  # rank -> the block's context (its shared tiles), once started
        # (rank, barrier buffer, index) -> multicast tiles on their way to that block, oldest
        # first: (buffer, starts, tile, bytes)
        self.in_flight = {}
        self.phase = {}  # block index in the scheduler -> the generation it arrived in

    def arrive(self, ctx, what):
        if ctx.mask is not None:
            raise fail(ctx, RuntimeError, f"{what} reached by only some threads of the block "
                                          "(every thread of the cluster takes part; the kernel "
                                          "would hang on the GPU)")
        _, index = ctx.grid
        if index in self.phase:
            raise fail(ctx, RuntimeError, f"{what}: this block arrived twice on the cluster "
                                          "barrier without a T.cluster_wait in between")
        self.phase[index] = self.generation
        self.arrived += 1
        if self.arrived == self.nblocks:
            self.arrived, self.generation = 0, self.generation + 1

    def wait(self, ctx, what):
        sched, index = ctx.grid
        if index not in self.phase:
            raise fail(ctx, RuntimeError, f"{what} without a T.cluster_arrive before it")
        gen = self.phase.pop(index)
        if self.generation > gen:
            return
        saved = ctx.part
        ctx.part = index
        try:
            sched.block(ctx, lambda: self.generation > gen,
                        lambda: f"{what}: {self.arrived} of {self.nblocks} blocks of the "
                                "cluster arrived")
        finally:
            ctx.part = saved

    def peer(self, ctx, rank):
        if rank not in self.peers:
            raise fail(ctx, RuntimeError, f"an arrival on a barrier of block {rank} of the "
                                          "cluster, which has not started (or does not exist): "
                                          "T.cluster_sync() after T.alloc_cluster_barrier "
                                          "orders the peers' arrivals after its initialisation")
        return self.peers[rank]

    def post(self, rank, bar, i, delivery):
        """A multicast tile for block `rank`, completing its barrier `bar[i]` on landing."""
        self.in_flight.setdefault((rank, bar, i), []).append(delivery)

    def land(self, ctx, rank, bar, i) -> bool:
        """Land the oldest tile in flight to this block (`rank`) on `bar[i]`: a moment the GPU
        may deliver it (after the block's own expect_tx, or while it waits). False: none."""
        queue = self.in_flight.get((rank, bar, i))
        if not queue:
            return False
        buf, starts, tile, nbytes = queue.pop(0)
        arr = ctx.bufs[buf]
        arr[tuple(slice(a, a + n) for a, n in zip(starts, tile.shape))] = tile
        ctx.barriers.complete_tx(ctx, bar, i, nbytes)
        return True

    def block(self, ctx, rank):
        """The context of the cluster's block `rank` (its barriers and shared tiles)."""
        self.peer(ctx, rank)
        return self.blocks[rank]


def run_clusters(ctx, clusters, start_block, body):
    """Run the blocks of each cluster side by side (one coroutine each), as the GPU keeps a
    cluster's blocks resident together; clusters one after the other. `clusters` lists each
    cluster's blocks as (rank, (bx, by, bz))."""
    for members in clusters:
        sched = RoleScheduler(len(members))
        barrier = ClusterBarrier(len(members))

        def make(k, rank, block):
            sub = ctx.clone()

            def part():
                start_block(sub, *block)
                barrier.peers[rank], barrier.blocks[rank] = sub.barriers, sub
                sub.grid, sub.cluster_barrier = (sched, k), barrier
                sub.sched, sub.part = sched, k  # mbarrier waits block on the peers too
                body(sub, None)
            return part

        sched.run([make(k, rank, b) for k, (rank, b) in enumerate(members)], ctx.func_name)
