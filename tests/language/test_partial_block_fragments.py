"""Fragments given (T.annotate_layout) over part of the block's threads: 64 of 128 threads, or
threads 32..95. They hold the same values as any other layout; the compiler places them from
thread 0 with the other threads holding copies. Reductions over them need a warp-aligned first
thread (as in the reference); threads with a gap between them are rejected when the layout is
given. Also: the default layout of a tile whose T.reshape view straddles its rows.

Kernels run on the CPU interpreter and, where there is one, on the GPU; the CUDA source is built
for sm_90a when a CUDA compiler is installed."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.layout import Fragment
from device_params import DEVICES, HAS_COMPILER, target_of

ROWS, WIDTH, VEC = 3, 512, 8


def _normalize_kernel(base, block_threads=128, rows=ROWS):
    """out = x / rowsum(x), x_frag held by threads [base, base + 64) of the block."""

    @T.prim_func
    def kernel(x: T.Tensor((rows, WIDTH), "float32"), out: T.Tensor((rows, WIDTH), "float32")):
        with T.Kernel(1, threads=block_threads):
            x_frag = T.alloc_fragment((rows, WIDTH), "float32")
            s_frag = T.alloc_fragment((rows,), "float32")
            T.annotate_layout({
                x_frag: Fragment(x_frag.shape, forward_fn=lambda i, j: (
                    base + j // VEC, i * VEC + j % VEC)),
                s_frag: Fragment(s_frag.shape, forward_fn=lambda i, rep: (base + rep, i),
                                 replicate=WIDTH // VEC),
            })
            for i, j in T.Parallel(rows, WIDTH):
                x_frag[i, j] = x[i, j]
            T.reduce_sum(x_frag, s_frag, dim=1)
            for i, j in T.Parallel(rows, WIDTH):
                out[i, j] = x_frag[i, j] / s_frag[i]

    return kernel


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("base,block_threads", [(0, 128), (32, 128), (64, 128), (0, 256)])
def test_reduce_over_fragment_held_by_part_of_block(device, base, block_threads):
    kernel = tilelang.compile(_normalize_kernel(base, block_threads), out_idx=-1,
                              target=target_of(device))
    x = torch.rand(ROWS, WIDTH, device=device) + 0.5
    out = kernel(x)
    torch.testing.assert_close(out, x / x.sum(dim=1, keepdim=True), rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
@pytest.mark.parametrize("base", [0, 32])
def test_fragment_held_by_part_of_block_builds_for_sm90(base):
    src = tilelang.compile(_normalize_kernel(base), out_idx=-1,
                           target="cuda -arch=sm_90a").get_kernel_source()
    assert "__global__" in src


def test_thread_base_is_kept_for_the_reference_queries():
    frag = Fragment((2, 512), forward_fn=lambda i, j: (32 + j // 8, i * 8 + j % 8))
    assert frag.thread_base == 32 and frag.num_threads == 64
    assert frag.map_forward_thread([1, 511]) == 32 + 511 // 8
    assert frag.get_thread_size() == 96
    fitted = frag.fit_to_block(128)
    assert fitted.num_threads == 128 and fitted.replication == 2 and fitted.thread_base == 32
    with pytest.raises(ValueError, match=r"threads \[32, 96\), beyond the block's 64"):
        frag.fit_to_block(64)
    other = Fragment((2, 512), forward_fn=lambda i, j: (j // 8, i * 8 + j % 8))
    assert not frag.is_equal(other) and other.is_equal(
        Fragment((2, 512), forward_fn=lambda i, j: (j // 8, i * 8 + j % 8)))


@pytest.mark.parametrize("target", ["cpu", pytest.param("cuda -arch=sm_90a", marks=[
    pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")])])
def test_reduce_from_inside_a_warp_is_rejected(target):
    with pytest.raises(Exception, match="warp-aligned participating thread range"):
        tilelang.compile(_normalize_kernel(16), out_idx=-1, target=target)


def test_thread_count_not_dividing_the_block_is_rejected():
    with pytest.raises(Exception, match=r"held by 48 threads, which does not divide the "
                                        r"block's 128 threads"):
        @T.prim_func
        def kernel(x: T.Tensor((1, 384), "float32"), out: T.Tensor((1, 384), "float32")):
            with T.Kernel(1, threads=128):
                f = T.alloc_fragment((1, 384), "float32")
                T.annotate_layout({f: Fragment(f.shape, forward_fn=lambda i, j: (
                    j // 8, j % 8))})
                for i, j in T.Parallel(1, 384):
                    f[i, j] = x[i, j]
                T.copy(f, out)


def test_threads_with_a_gap_are_rejected():
    with pytest.raises(Exception, match="one contiguous thread range"):
        @T.prim_func
        def kernel(x: T.Tensor((2, 512), "float32"), out: T.Tensor((2, 512), "float32")):
            with T.Kernel(1, threads=256):
                f = T.alloc_fragment((2, 512), "float32")
                T.annotate_layout({f: Fragment(f.shape, forward_fn=lambda i, j: (
                    i * 128 + j // 8, j % 8))})
                for i, j in T.Parallel(2, 512):
                    f[i, j] = x[i, j]
                T.copy(f, out)


def _straddle_kernel(rows, groups, group_len, threads=128):
    @T.prim_func
    def kernel(a: T.Tensor((rows, groups * group_len), T.float32),
               b: T.Tensor((rows, groups), T.float32)):
        with T.Kernel(1, threads=threads):
            src = T.alloc_fragment((rows, groups * group_len), T.float32)
            dst = T.alloc_fragment((rows, groups), T.float32)
            for i, j in T.Parallel(rows, groups * group_len):
                src[i, j] = a[i, j]
            T.reduce_sum(T.reshape(src, (rows, groups, group_len)), dst, dim=2)
            for i, g in T.Parallel(rows, groups):
                b[i, g] = dst[i, g]

    return kernel


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows,groups,group_len", [(2, 6, 32), (3, 5, 16)])
def test_reduce_of_a_reshape_that_straddles_rows(device, rows, groups, group_len):
    kernel = tilelang.compile(_straddle_kernel(rows, groups, group_len), out_idx=-1,
                              target=target_of(device))
    a = torch.randn(rows, groups * group_len, device=device)
    b = kernel(a)
    torch.testing.assert_close(b, a.reshape(rows, groups, group_len).sum(dim=2),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
def test_reshape_straddling_rows_builds_for_sm90():
    src = tilelang.compile(_straddle_kernel(2, 6, 32), out_idx=-1,
                           target="cuda -arch=sm_90a").get_kernel_source()
    assert "__global__" in src


def _owner_kernel(loop_fn, loop_rep):
    @T.prim_func
    def kernel(out: T.Tensor((8, 4), T.float32)):
        with T.Kernel(1, threads=64):
            frag = T.alloc_fragment((8, 4), T.float32)
            T.annotate_layout({frag: Fragment((8, 4), forward_fn=lambda i, j, rep: (
                i * 4 + j + rep * 32, 0), replicate=2)})
            for i, j in T.Parallel(8, 4, loop_layout=Fragment(
                    (8, 4), forward_fn=loop_fn, replicate=loop_rep)):
                frag[i, j] = T.float32(i * 4 + j)
            T.copy(frag, out)

    return kernel


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
def test_loop_layout_writing_from_non_holders_is_a_layout_conflict():
    with pytest.raises(Exception, match="Layout infer conflict"):
        tilelang.compile(_owner_kernel(lambda i, j, rep: (i * 4 + rep % 4 + (rep // 4) * 32, j),
                                       8), out_idx=-1, target="cuda -arch=sm_90a")


@pytest.mark.parametrize("device", DEVICES)
def test_loop_layout_writing_from_holders_is_accepted(device):
    kernel = tilelang.compile(_owner_kernel(lambda i, j, rep: (i * 4 + j + rep * 32, 0), 2),
                              out_idx=-1, target=target_of(device))
    out = kernel()
    torch.testing.assert_close(out.cpu(), torch.arange(32, dtype=torch.float32).reshape(8, 4))


def test_make_fully_replicated_layout_fragment():
    frag = tilelang.layout.make_fully_replicated_layout_fragment((4, 8), 128)
    assert frag.num_threads == 128 and frag.replication == 128 and frag.num_values == 32
    with pytest.raises(ValueError, match="threads must be a positive int"):
        tilelang.layout.make_fully_replicated_layout_fragment((4, 8), 0)
