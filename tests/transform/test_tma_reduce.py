"""`T.atomic_add(G[region], S, use_tma=True)` (transform/tma_reduce.py): the TMA reduction on
sm_90a, the element-wise fallback with its reason elsewhere, and the tile semantics on the CPU
interpreter. No GPU needed (tests/gpu/test_tma_reduce.py runs the kernels)."""

from __future__ import annotations

import re

import pytest
import torch

import tilelang

from tma_reduce_kernels import add_then_read, all_into_one, cluster_split_k, scaled_add
from transform_helpers import SM80, SM90, requires_compiler


def _adds(src):
    return re.findall(r"tl::tma_store_add\(\(&(\w+)\), \(&(\w+)\[(\d+)\]\)", src)


def test_swizzled_tile_is_one_reduction_per_column_block():
    src = tilelang.lower(scaled_add(200, 384), target=SM90)
    adds = _adds(src)
    # a 64 x 128 float32 tile in the 128-byte swizzle: four 32-column boxes, 2048 floats apart
    assert [int(a[2]) for a in adds] == [0, 2048, 4096, 6144]
    assert "atomicAdd" not in src and "tl::atomic" not in src
    # every thread's writes reach the async proxy before one thread issues the reduction,
    # and that thread waits until the tile has been read
    tail = src[src.index("tl::fence_proxy_async"):]
    assert tail.index("__syncthreads") < tail.index("if (tx == 0)") < tail.index("tma_store_add")
    assert tail.index("tma_store_arrive") < tail.index("tma_store_wait<0>")


def test_reading_the_sums_back_waits_for_the_writes():
    """Only a kernel that also loads the destination pays for waiting until the sums are in
    memory; the others only wait until the tile has been read."""
    src = tilelang.lower(add_then_read(16, 64), target=SM90)
    tail = src[src.index("tma_store_add"):]
    assert tail.index("tma_store_wait_complete<0>") < tail.index("fence_proxy_async")
    assert "tma_store_wait<0>" not in src
    plain = tilelang.lower(scaled_add(200, 384), target=SM90)
    assert "tma_store_wait<0>" in plain and "wait_complete" not in plain
    x, y, z = torch.randn(16, 64), torch.randn(16, 64), torch.zeros(16, 64)
    want = y + 2 * x
    tilelang.compile(add_then_read(16, 64), target="cpu")(x, y, z)
    torch.testing.assert_close(z, want, rtol=0, atol=0)


def test_row_major_tile_is_one_box():
    src = tilelang.lower(scaled_add(200, 384, swizzle="row_major"), target=SM90)
    assert [int(a[2]) for a in _adds(src)] == [0]


@pytest.mark.parametrize("shape,dtype,swizzled", [((64, 128), "float32", True),
                                                  ((16, 16), "float32", True),
                                                  ((64, 64), "bfloat16", True),
                                                  ((64, 64), "uint64", False),
                                                  ((4, 64), "float32", False)])
def test_an_unannotated_tile_gets_the_swizzle(shape, dtype, swizzled):
    """As on the reference: the tile a TMA add reads is swizzled unless annotated (16/32-bit
    elements, whole 8-row groups, rows of at least 32 bytes), the same layout as
    make_swizzled_layout; otherwise row-major."""
    bm, bn = shape
    auto = tilelang.lower(scaled_add(200, 384, bm, bn, dtype=dtype, swizzle=False),
                          target=SM90)
    annotated = tilelang.lower(scaled_add(200, 384, bm, bn, dtype=dtype,
                                          swizzle=True if swizzled else "row_major"),
                               target=SM90)
    assert auto == annotated
    assert "tma_store_add" in auto


@pytest.mark.parametrize("why,kwargs,target,configs", [
    ("TMA turned off", {}, SM90, {"tl.disable_tma_lower": True}),
    ("sm_80, not asked for", dict(use_tma=False), SM80, None),
    ("not asked for", dict(use_tma=False), SM90, None),
])
def test_element_wise_fallback(why, kwargs, target, configs, capsys):
    src = tilelang.lower(scaled_add(200, 384, **kwargs), target=target, pass_configs=configs)
    assert "tma_store_add" not in src, why
    assert "atomic" in src.lower(), why


@requires_compiler
def test_fallback_says_why(capsys):
    tilelang.compile(scaled_add(200, 384), target=SM90, verbose=True,
                     pass_configs={"tl.disable_tma_lower": True})
    assert "element-wise atomics (TMA needs sm_90a" in capsys.readouterr().err


def test_a_target_without_tma_is_an_error():
    """As on the reference: use_tma=True asks for the TMA unit, which sm_80 does not have."""
    from tilelang.errors import KernelError

    with pytest.raises(KernelError, match=r"TMA atomic add requires a CUDA target with TMA "
                                          r"support \(SM90\+\), but got target sm_80") as e:
        tilelang.lower(scaled_add(200, 384), target=SM80)
    assert "tma_reduce_kernels.py" in str(e.value)
    # the CPU interpreter adds element by element, as the atomics would
    tilelang.compile(scaled_add(200, 384), target="cpu")


@pytest.mark.parametrize("dtype", ["float64", "int64", "int16", "float32x2"])
def test_a_type_the_tma_unit_does_not_add_is_an_error(dtype):
    from tilelang.errors import KernelError

    with pytest.raises(KernelError, match=f"TMA atomic add does not support dtype {dtype}; "
                                          "supported scalar dtypes") as e:
        scaled_add(200, 384, dtype=dtype)
    assert "tma_reduce_kernels.py" in str(e.value)


@requires_compiler
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "uint32", "uint64"])
def test_compiles_for_sm90a(dtype):
    kern = tilelang.compile(scaled_add(200, 384, dtype=dtype), target=SM90)
    assert "tma_store_add" in kern.get_kernel_source()


def test_interpreter_adds_every_element_once():
    torch.manual_seed(0)
    x, y = torch.randn(200, 384), torch.randn(200, 384)
    ref = y + 2 * x
    tilelang.compile(scaled_add(200, 384), target="cpu")(x, y)
    torch.testing.assert_close(y, ref, rtol=0, atol=0)
    xs = torch.randn(5, 16, 64)
    acc = torch.randn(16, 64)
    ref = acc + 3 * xs.sum(0)
    tilelang.compile(all_into_one(16, 64, 5), target="cpu")(xs, acc)
    torch.testing.assert_close(acc, ref, rtol=1e-5, atol=1e-5)


# ---- T.store_cluster_sum -----------------------------------------------------------------

def _cluster_sum_source(**kw):
    return tilelang.lower(cluster_split_k(200, 136, 256, 2, **kw), target=SM90)


def test_cluster_sum_first_block_stores_then_the_others_add():
    src = _cluster_sum_source()
    tail = src[src.index("if (tl::cluster_ctarank() == 0)"):]
    first, rest = tail.split("tl::cluster_arrive();")
    # the first block: a TMA store, waited for until written, then TMA -> generic fence
    assert "tl::tma_store((&C_store_desc" in first and "tma_store_add" not in first
    assert first.index("tma_store_wait_complete<0>") < first.index("fence_proxy_async_global")
    # every block passes the cluster barrier; the others then fence and add
    assert rest.lstrip().startswith("tl::cluster_wait();")
    assert "if (tl::cluster_ctarank() != 0)" in rest
    assert rest.index("fence_proxy_async_global") < rest.index("tl::tma_store_add(")


def test_cluster_sum_of_one_block_is_a_store():
    src = tilelang.lower(cluster_split_k(200, 136, 256, 1, cluster=False), target=SM90)
    assert "tl::tma_store(" in src
    assert "tma_store_add" not in src and "cluster_" not in src


def test_cluster_sum_without_tma_stores_and_adds_element_wise():
    src = _cluster_sum_source(use_tma=False)
    first, rest = src[src.index("if (tl::cluster_ctarank() == 0)"):].split("tl::cluster_arrive")
    assert "atomic" not in first.lower() and "C[" in first
    assert "atomic_add" in rest.lower() and "tma_store" not in src


@requires_compiler
@pytest.mark.parametrize("use_tma", [True, False])
def test_cluster_sum_compiles_for_sm90a(use_tma):
    kern = tilelang.compile(cluster_split_k(200, 136, 256, 2, use_tma=use_tma), target=SM90)
    assert "cluster_wait" in kern.get_kernel_source()


@pytest.mark.parametrize("split,axis", [(2, "z"), (4, "z"), (2, "x"), (1, "z")])
def test_interpreter_cluster_sum_ignores_the_old_output(split, axis):
    """The output starts as NaN: only a store by each cluster's first block (before the
    others add) gives the product."""
    torch.manual_seed(split)
    M, N, K = 72, 100, 256
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    tilelang.compile(cluster_split_k(M, N, K, split, axis, cluster=split > 1),
                     target="cpu")(a, b, c)
    ref = a.double() @ b.double()
    assert not torch.isnan(c).any()
    assert ((c.double() - ref).abs().max() / ref.abs().max()).item() < 2e-3


def test_cluster_sum_before_hopper_is_a_located_error():
    """sm_80 has no clusters to order the blocks (cluster_dims is ignored there), so a sum over
    several blocks cannot be stored: an error, not a wrong result."""
    with pytest.raises(ValueError, match="needs thread block clusters .* not sm_80") as e:
        tilelang.lower(cluster_split_k(200, 136, 256, 2), target=SM80)
    assert "tma_reduce_kernels.py" in str(e.value)


def test_tiles_of_different_types_are_an_error():
    import tilelang.language as T
    from tilelang.errors import KernelError

    @T.prim_func
    def f(Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 64), "float16")
            T.fill(S, 1)
            T.atomic_add(Y[0:64, 0:64], S, use_tma=True)

    with pytest.raises(KernelError, match="requires matching dtypes, but got float16 and "
                                          "float32") as e:
        tilelang.lower(f, target=SM90)
    assert "test_tma_reduce.py" in str(e.value)


def _wgmma_annotated_add(dtype):
    import tilelang.language as T
    import tilelang.layout

    @T.prim_func
    def main(out: T.Tensor((16, 16), dtype)):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((16, 16), dtype)
            T.annotate_layout({tile: tilelang.layout.make_wgmma_swizzled_layout(tile)})
            for i, j in T.Parallel(16, 16):
                tile[i, j] = i * 16 + j
            T.atomic_add(out, tile, use_tma=True)
    return main


def test_a_wgmma_annotated_64_bit_tile_is_one_tma_reduction():
    """make_wgmma_swizzled_layout of 64-bit elements is a swizzle the TMA unit reads here (the
    reference's is a GEMM arrangement no tensor map encodes, an error there)."""
    src = tilelang.lower(_wgmma_annotated_add("uint64"), target=SM90)
    assert len(_adds(src)) >= 1 and "tl::atomic" not in src, src
    start = torch.arange(256, dtype=torch.int64).reshape(16, 16) * 1000
    out = start.clone().view(torch.uint64)
    tilelang.compile(_wgmma_annotated_add("uint64"), target="cpu")(out)
    assert torch.equal(out.view(torch.int64), start + torch.arange(256).reshape(16, 16))
