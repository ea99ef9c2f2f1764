"""partition_parallel: a barrier inside a T.Parallel body (`T.sync_grid()` between reading a
tile and updating it) is reached by every thread, also by the replicas of a replicated loop
layout that skip the body's stores, and orders every iteration's statements before it ahead
of every iteration's statements after it: a thread running several iterations runs them as
one loop per part, the barrier once between the loops. Both targets compute the same."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T

from device_params import DEVICES, target_of


def swap_halves(N=1024, block=64, threads=128):
    """A[j] += A[N - 1 - j] for all j, each block reading elements another block updates."""
    @T.prim_func
    def kernel(A: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            mirror = T.alloc_fragment((block,), "float32")
            n0 = bx * block
            for i in T.Parallel(block):
                A[n0 + i] = n0 + i
            T.sync_grid()
            for i in T.Parallel(block):
                mirror[i] = A[N - n0 - i - 1]
                T.sync_grid()
                A[n0 + i] = A[n0 + i] + mirror[i]
    return kernel


def test_every_thread_reaches_the_barrier_once_between_the_parts():
    src = tilelang.compile(swap_halves(), target="cuda -arch=sm_90a").get_kernel_source()
    body = src[src.index("__global__"):]
    syncs = [m.start() for m in re.finditer(r"this_grid\(\)\.sync\(\);", body)]
    assert len(syncs) == 2
    for at in syncs:  # at the kernel's top level: in no loop, under no branch
        assert body[:at].count("{") - body[:at].count("}") == 1, body
    # the reads of all iterations come before the second barrier, the updates after it
    first, second = syncs
    assert "mirror[" in body[first:second] and "+ mirror[" in body[second:], body


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("threads", [64, 128, 256])
def test_results_on_both_targets(device, threads):
    N = 1024
    kernel = tilelang.compile(swap_halves(N, threads=threads), target=target_of(device))
    A = torch.rand(N, device=device)
    kernel(A)
    assert torch.equal(A.cpu(), torch.full((N,), float(N - 1)))
