"""A T.Pipelined loop whose work is all under a block-uniform branch (`if Mask[ko]:`, a
block-sparse GEMM) is pipelined by the warp-specialised TMA schedule too: producer and
consumers both evaluate the branch and count the iterations they run, so the ring slot and
mbarrier parity of each iteration that runs are the same on both sides whichever iterations
are skipped. Checked by running the producer and consumer regions the pass emits on an
abstract machine (mbarrier phases, TMA loads landing at arbitrary times, random
interleavings of the two roles), and in the generated CUDA; `@gpu` tests compare with torch."""

import random
import re

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir

from transform_helpers import (BK, SM90, eval_with_memory, guarded_gemm, nodes, requires_gpu,
                               run_passes)


class _Barriers:
    """mbarriers by (name, slot): arrivals and transaction bytes of the current phase, and
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

    def complete_tx(self, key, nbytes):
        self.tx[key] -= nbytes
        assert self.tx[key] >= 0
        self._check(key)

    def passes(self, key, parity):
        return self.done.get(key, 0) % 2 != parity


class _Machine:
    """The producer thread and (one for all) the consumer threads, run as coroutines."""

    def __init__(self, memory, consumers, seed):
        self.memory = memory
        self.bars = _Barriers({"full_bar": 1, "empty_bar": consumers})
        self.consumers = consumers
        self.rng = random.Random(seed)
        self.in_flight = []      # (barrier key, stage key, iteration, bytes)
        self.content = {}        # stage key -> iteration whose tile landed there
        self.reads = []          # (ko, buffer, slot) of every gemm operand read

    def _slot(self, addr, env, local):
        load = addr.args[0]
        idx = tuple(int(eval_with_memory(i, env, {**self.memory, **local}))
                    for i in load.indices)
        return load.buffer, idx[0]

    def role(self, stmt, env):
        local = {}
        yield from self._run(stmt, dict(env), local)

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
                return  # the accumulator's fill and store: registers, no ring traffic
            start, n = ev(s.start), ev(s.extent)
            for i in range(start, start + n):
                yield from self._run(s.body, {**env, s.var: i}, local)
        elif isinstance(s, ir.Gemm):
            for region in (s.A, s.B):
                key = (region.buffer.name, int(ev(region.region[0][0])))
                assert not any(f[1] == key for f in self.in_flight), f"{key} read in flight"
                self.reads.append((env[self.loop_var], key[0], key[1], self.content.get(key)))
            yield
        elif isinstance(s, ir.Evaluate) and ir.is_extern_call(s.value):
            name, args = s.value.args[0], s.value.args[1:]
            if name == "tl::mbarrier_wait":
                buf, slot = self._slot(args[0], env, local)
                parity = ev(args[1])
                while not self.bars.passes((buf.name, slot), parity):
                    yield "blocked"
            elif name == "tl::mbarrier_arrive_expect_tx":
                buf, slot = self._slot(args[0], env, local)
                self.bars.arrive((buf.name, slot), 1, ev(args[1]))
            elif name == "tl::mbarrier_arrive":
                buf, slot = self._slot(args[0], env, local)
                self.bars.arrive((buf.name, slot), self.consumers)
            elif name == "tl::tma_load":
                bar, bslot = self._slot(args[1], env, local)
                dst, dslot = self._slot(args[2], env, local)
                coords = [ev(c) for c in args[3:]]
                ko = coords[0] // BK if dst.name == "As" else coords[1] // BK
                nbytes = int(np.prod(dst.shape[1:])) * dst.dtype.bytes
                self.in_flight.append(((bar.name, bslot), (dst.name, dslot), ko, nbytes))
            elif name in ("tl::fence_proxy_async",):
                pass
            else:
                raise AssertionError(f"unexpected call {name}")
            yield
        else:
            raise AssertionError(f"unexpected statement {type(s).__name__}")

    def land_one(self):
        bar, key, ko, nbytes = self.in_flight.pop(self.rng.randrange(len(self.in_flight)))
        self.content[key] = ko
        self.bars.complete_tx(bar, nbytes)

    def run(self, producer, consumer, loop_var, env):
        self.loop_var = loop_var
        roles = {"p": self.role(producer, env), "c": self.role(consumer, env)}
        blocked = set()
        while roles:
            choices = [r for r in roles if r not in blocked] + (["land"] if self.in_flight
                                                                else [])
            assert choices, "deadlock: both roles wait and no load is in flight"
            pick = self.rng.choice(choices)
            if pick == "land":
                self.land_one()
                blocked.clear()
                continue
            try:
                if next(roles[pick]) == "blocked":
                    blocked.add(pick)
                else:
                    blocked.clear()
            except StopIteration:
                del roles[pick]
        assert not self.in_flight, "loads still in flight at the end"


def _regions(kernel):
    groups = {a.value[0]: a.body for a in nodes(kernel.body, ir.Attr,
                                                 lambda a: a.key == "thread_group")}
    return groups["producer"], groups["consumer"]


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("mask", ["1011001", "0000", "1111", "0110", "1", "0", "1001110101"])
def test_tma_ring_stays_in_step_when_iterations_are_skipped(stages, mask):
    iters = len(mask)
    k, ctx = run_passes(guarded_gemm(iters * BK, stages), "warp_specialize", SM90)
    assert any("warp-specialised pipeline over ko" in n for n in ctx.notes), ctx.notes
    producer, consumer = _regions(k)
    (loop,) = nodes(consumer, ir.For, lambda f: f.kind == "serial")
    tx = k.thread_vars[0]
    memory = {"Mask": np.array([c == "1" for c in mask])}
    expected = sorted((ko, name, n % stages, ko) for n, ko in
                      enumerate(i for i in range(iters) if mask[i] == "1")
                      for name in ("As", "Bs"))
    for seed in range(6):
        m = _Machine(memory, 128, seed)
        m.run(ir.Seq((ir.If(ir.compare("eq", tx, 128), producer, None),)), consumer,
              loop.var, {tx: 128})
        assert sorted(m.reads) == expected


def test_generated_cuda_counts_iterations_in_both_roles():
    src = tilelang.lower(guarded_gemm(8 * BK, 3), target="cuda -arch=sm_90a")
    producer = src[src.index("('producer'"):src.index("('consumer'")]
    consumer = src[src.index("('consumer'"):]
    for role in (producer, consumer):
        branch = role.index("if (Mask[ko])")
        assert role.index("pipe_done = pipe_done + 1") > branch
        assert re.search(r"int pipe_done = 0;\s*for \(int ko", role)
    assert "tl::tma_load" in producer and "tl::mbarrier_arrive((&empty_bar" in consumer


def test_branch_the_producer_cannot_evaluate_keeps_the_cp_async_pipeline():
    """A condition on a value the consumers compute from memory (a fragment) is not the
    producer's to evaluate: no warp specialisation."""
    @T.prim_func
    def f(A: T.Tensor((64, 4 * BK), "float16"), C: T.Tensor((64, BK), "float16")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((64, BK), "float16")
            flag = T.alloc_shared((1,), "int32")
            flag[0] = 1
            for ko in T.Pipelined(4, num_stages=2):
                if flag[0] > ko:
                    T.copy(A[0, ko * BK], As)
            T.copy(As, C)

    k, ctx = run_passes(f, "warp_specialize", SM90)
    assert not any("warp-specialised" in n for n in ctx.notes)


def _blocksparse(M, N, K, bm, bn, bk, stages, threads=128):
    @T.prim_func
    def f(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
          Mask: T.Tensor((T.ceildiv(M, bm), T.ceildiv(N, bn), T.ceildiv(K, bk)), "bool"),
          C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            As = T.alloc_shared((bm, bk), "float16")
            Bs = T.alloc_shared((bk, bn), "float16")
            Cl = T.alloc_fragment((bm, bn), "float32")
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                if Mask[by, bx, k]:
                    T.copy(A[by * bm, k * bk], As)
                    T.copy(B[k * bk, bx * bn], Bs)
                    T.gemm(As, Bs, Cl)
            T.copy(Cl, C[by * bm, bx * bn])
    return f


def _blocksparse_reference(A, B, mask, bm, bn, bk):
    M, N = A.shape[0], B.shape[1]
    C = np.zeros((M, N), np.float32)
    for i, j, k in zip(*np.nonzero(mask)):
        C[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn] += \
            A[i * bm:(i + 1) * bm, k * bk:(k + 1) * bk] @ B[k * bk:(k + 1) * bk,
                                                            j * bn:(j + 1) * bn]
    return C


def test_cpu_interpreter_skips_masked_tiles():
    import torch

    M, N, K, bm, bn, bk = 64, 96, 160, 32, 32, 32
    kernel = tilelang.compile(_blocksparse(M, N, K, bm, bn, bk, 2), target="cpu")
    g = torch.Generator().manual_seed(3)
    A = torch.randn(M, K, generator=g).half()
    B = torch.randn(K, N, generator=g).half()
    mask = torch.rand(M // bm, N // bn, K // bk, generator=g) > 0.5
    mask[0, 0, :] = False  # a block with nothing to add
    C = torch.full((M, N), float("nan"), dtype=torch.float16)
    kernel(A, B, mask, C)
    ref = _blocksparse_reference(A.float().numpy(), B.float().numpy(), mask.numpy(), bm, bn, bk)
    np.testing.assert_allclose(C.float().numpy(), ref, rtol=1e-2, atol=1e-2)


@requires_gpu
@pytest.mark.parametrize("arch_configs", [{}, {"tl.disable_warp_specialized": True}])
@pytest.mark.parametrize("M,N,K,stages", [(256, 384, 512, 2), (200, 136, 328, 3),
                                          (128, 128, 64, 4)])
def test_blocksparse_gemm_matches_torch(arch_configs, M, N, K, stages):
    """Ragged sizes (partial tiles at every edge), random masks with whole rows of blocks
    skipped, outputs poisoned first; both schedules (TMA producer and cp.async)."""
    import torch

    bm, bn, bk = 64, 64, 32
    kernel = tilelang.compile(_blocksparse(M, N, K, bm, bn, bk, stages), target="cuda",
                              pass_configs=arch_configs)
    gm, gn, gk = -(-M // bm), -(-N // bn), -(-K // bk)
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        A = torch.randn(M, K, generator=g).half().cuda()
        B = torch.randn(K, N, generator=g).half().cuda()
        mask = torch.rand(gm, gn, gk, generator=g) > 0.5
        mask[0, :, :] = False
        mask[-1, -1, :] = True
        C = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
        kernel(A, B, mask.cuda(), C)
        Ap = torch.zeros(gm * bm, gk * bk); Ap[:M, :K] = A.float().cpu()  # noqa: E702
        Bp = torch.zeros(gk * bk, gn * bn); Bp[:K, :N] = B.float().cpu()  # noqa: E702
        ref = _blocksparse_reference(Ap.numpy(), Bp.numpy(), mask.numpy(), bm, bn, bk)
        torch.testing.assert_close(C.float().cpu(), torch.from_numpy(ref[:M, :N]),
                                   rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("target,configs", [
    ("cuda -arch=sm_90a", {}), ("cuda -arch=sm_90a", {"tl.disable_warp_specialized": True}),
    ("cuda -arch=sm_80", {})])
def test_ragged_blocksparse_compiles(target, configs):
    kernel = tilelang.compile(_blocksparse(200, 136, 328, 64, 64, 32, 3), target=target,
                              pass_configs=configs)
    src = kernel.get_kernel_source()
    assert "if (Mask[" in src
    specialised = target.endswith("90a") and not configs
    assert ("tl::tma_load" in src) == specialised
    assert ("tl::cp_async_wait<1>" in src) == (not specialised)  # 3 stages in flight
