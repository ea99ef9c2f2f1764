"""An abstract machine for the mbarrier pipelines the passes emit (TMA producer and consumer
roles): each role runs as a coroutine over the IR (one representative thread for a role's
threads), mbarriers count arrivals and transaction bytes per phase, TMA loads land at
arbitrary times, and the roles interleave at random. It records what every gemm read from
each stage and fails on a read of a stage with a load in flight, too many arrivals on a
barrier, a deadlock, or loads left in flight at the end."""

import random

import numpy as np

from tilelang.ir import nodes as ir

from transform_helpers import eval_with_memory


class Barriers:
    """mbarriers by (name, index): arrivals and transaction bytes of the current phase, and
    phases completed (a wait on parity P passes once a phase of parity P has completed,
    which a fresh barrier reports for P = 1)."""

    def __init__(self, counts):
        self.counts = counts  # name -> expected arrivals
        self.done, self.arrived, self.tx = {}, {}, {}

    def _check(self, key):
        assert self.arrived.get(key, 0) <= self.counts[key[0]], f"too many arrivals on {key}"
        if self.arrived.get(key, 0) == self.counts[key[0]] and self.tx.get(key, 0) == 0:
            self.done[key] = self.done.get(key, 0) + 1
            self.arrived[key] = 0

    def arrive(self, key, n=1, tx=0):
        self.arrived[key] = self.arrived.get(key, 0) + n
        self.tx[key] = self.tx.get(key, 0) + tx
        self._check(key)

    def expect(self, key, nbytes):
        self.tx[key] = self.tx.get(key, 0) + nbytes

    def complete_tx(self, key, nbytes):
        self.tx[key] -= nbytes
        assert self.tx[key] >= 0
        self._check(key)

    def passes(self, key, parity):
        return self.done.get(key, 0) % 2 != parity


class MbarrierMachine:
    """`counts`: barrier name -> arrivals per phase. `role_threads`: the threads one
    representative stands for when it arrives with `tl::mbarrier_arrive` (a whole role);
    `mbarrier_arrive_expect_tx` counts one (one elected thread issues it)."""

    def __init__(self, memory, counts, seed, loop_var, role_threads=128):
        self.memory = memory
        self.bars = Barriers(counts)
        self.role_threads = role_threads
        self.rng = random.Random(seed)
        self.loop_var = loop_var
        self.in_flight = []      # (barrier key, stage key, source starts, bytes)
        self.content = {}        # stage key -> source starts of the tile that landed there
        self.reads = []          # (loop iteration, buffer, stage, content) per gemm operand

    def _key(self, load, env, local):
        idx = tuple(int(eval_with_memory(i, env, {**self.memory, **local}))
                    for i in load.indices)
        return load.buffer.name, idx[0]

    def _run(self, s, env, local):
        ev = lambda e: eval_with_memory(e, env, {**self.memory, **local})  # noqa: E731
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                yield from self._run(x, env, local)
        elif isinstance(s, ir.Attr):
            yield from self._run(s.body, env, local)
        elif isinstance(s, ir.LetStmt):
            yield from self._run(s.body, {**env, s.var: ev(s.value)}, local)
        elif isinstance(s, ir.Allocate):
            local[s.buffer.name] = np.array([ev(s.init)])
            yield from self._run(s.body, env, local)
        elif isinstance(s, ir.Store):
            assert s.buffer.name in local, f"unexpected store to {s.buffer.name}"
            local[s.buffer.name][0] = ev(s.value)
        elif isinstance(s, ir.If):
            if ev(s.cond):
                yield from self._run(s.then_body, env, local)
            elif s.else_body is not None:
                yield from self._run(s.else_body, env, local)
        elif isinstance(s, ir.For):
            if s.kind == "parallel":
                return  # an accumulator's fill or store: registers, no ring traffic
            start, n = ev(s.start), ev(s.extent)
            for i in range(start, start + n):
                yield from self._run(s.body, {**env, s.var: i}, local)
        elif isinstance(s, ir.Gemm):
            for region in (s.A, s.B):
                key = (region.buffer.name, int(ev(region.region[0][0])))
                assert not any(f[1] == key for f in self.in_flight), f"{key} read in flight"
                self.reads.append((env[self.loop_var], key[0], key[1], self.content.get(key)))
            yield
        elif isinstance(s, ir.TmaCopy):
            bar = self._key(s.barrier, env, local)
            dst = (s.dst.buffer.name, int(ev(s.dst.region[0][0])))
            starts = tuple(int(ev(a)) for a, _ in s.src.region)
            nbytes = int(np.prod([ev(e) for _, e in s.dst.region])) * s.dst.buffer.dtype.bytes
            self.bars.expect(bar, nbytes)
            self.in_flight.append((bar, dst, starts, nbytes))
            yield
        elif isinstance(s, ir.Evaluate) and ir.is_extern_call(s.value):
            name, args = s.value.args[0], s.value.args[1:]
            if name == "tl::mbarrier_wait":
                key, parity = self._key(args[0].args[0], env, local), ev(args[1])
                while not self.bars.passes(key, parity):
                    yield "blocked"
            elif name == "tl::mbarrier_arrive_expect_tx":
                self.bars.arrive(self._key(args[0].args[0], env, local), 1, ev(args[1]))
            elif name == "tl::mbarrier_expect_tx":
                self.bars.expect(self._key(args[0].args[0], env, local), ev(args[1]))
            elif name == "tl::mbarrier_arrive":
                self.bars.arrive(self._key(args[0].args[0], env, local), self.role_threads)
            elif name == "tl::tma_load":
                bar = self._key(args[1].args[0], env, local)
                dst = self._key(args[2].args[0], env, local)
                load = args[2].args[0].buffer
                starts = tuple(int(ev(c)) for c in reversed(args[3:]))
                nbytes = int(np.prod(load.shape[1:])) * load.dtype.bytes
                self.in_flight.append((bar, dst, starts, nbytes))
            elif name != "tl::fence_proxy_async":
                raise AssertionError(f"unexpected call {name}")
            yield
        else:
            raise AssertionError(f"unexpected statement {type(s).__name__}")

    def _land_one(self):
        bar, key, starts, nbytes = self.in_flight.pop(self.rng.randrange(len(self.in_flight)))
        self.content[key] = starts
        self.bars.complete_tx(bar, nbytes)

    def run(self, roles):
        """Run `roles` ([(statement, env)]) to completion in a random interleaving."""
        running = {i: self._run(stmt, dict(env), {}) for i, (stmt, env) in enumerate(roles)}
        blocked = set()
        while running:
            choices = [r for r in running if r not in blocked] + (["land"] if self.in_flight
                                                                  else [])
            assert choices, "deadlock: every role waits and no load is in flight"
            pick = self.rng.choice(choices)
            if pick == "land":
                self._land_one()
                blocked.clear()
                continue
            try:
                if next(running[pick]) == "blocked":
                    blocked.add(pick)
                else:
                    blocked.clear()
            except StopIteration:
                del running[pick]
        assert not self.in_flight, "loads still in flight at the end"
