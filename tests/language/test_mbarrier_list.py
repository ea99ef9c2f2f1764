"""The reference's barrier list (examples/warp_specialize): T.create_list_of_mbarrier(c0, c1,
...) allocates one mbarrier per arrive count, and the mbarrier operations name them by index.
Lowered for sm_90a (generation only) and compiled where a CUDA compiler exists."""

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError
from tilelang.runtime import toolkit


def copy_then_gemm(M, N, K, bm, bn, bk, counts=(128, 128), wait_index=None):
    dtype, accum = "float16", "float"

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_l = T.alloc_fragment((bm, bn), accum)
            T.create_list_of_mbarrier(*counts)
            with T.ws(1):
                T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=0):
                with T.ws(0):
                    T.mbarrier_wait_parity(1 if wait_index is None else wait_index, (ko & 1) ^ 1)
                    T.copy(A[by * bm, ko * bk], A_s)
                    T.copy(B[ko * bk, bx * bn], B_s)
                    T.mbarrier_arrive(0)
                with T.ws(1):
                    T.mbarrier_wait_parity(T.get_mbarrier(0), ko & 1)
                    T.gemm(A_s, B_s, C_l)
                    T.mbarrier_arrive(T.get_mbarrier(1))
            with T.ws(1):
                T.copy(C_l, C[by * bm, bx * bn])

    return main


def test_barrier_list_lowers_with_counts_and_indices():
    src = tilelang.lower(copy_then_gemm(256, 256, 256, 128, 128, 64, counts=(128, 96)),
                         target="cuda -arch=sm_90a")
    inits = re.findall(r"tl::mbarrier_init\(\(&(\w+)\[(\d)\]\), (\d+)\)", src)
    assert sorted((i, c) for _, i, c in inits) == [("0", "128"), ("1", "96")]
    waits = re.findall(r"tl::mbarrier_wait\(\(&\w+\[(\d)\]\)", src)
    arrives = re.findall(r"tl::mbarrier_arrive\(\(&\w+\[(\d)\]\)", src)
    assert sorted(set(waits)) == ["0", "1"] and sorted(set(arrives)) == ["0", "1"]


@pytest.mark.skipif(toolkit.nvrtc_backend() is None and toolkit.nvcc_path() is None,
                    reason="no CUDA compiler (NVRTC or nvcc) installed")
def test_barrier_list_compiles_for_sm90a():
    k = tilelang.compile(copy_then_gemm(256, 256, 256, 128, 128, 64), out_idx=[2],
                         target="cuda -arch=sm_90a")
    assert "mbarrier" in k.get_kernel_source()


def test_index_past_the_list_is_a_located_error():
    with pytest.raises(KernelError, match="mbarrier 2 does not exist") as e:
        copy_then_gemm(256, 256, 256, 128, 128, 64, wait_index=2)
    assert "test_mbarrier_list.py" in str(e.value)


def test_index_without_a_list_is_rejected():
    with pytest.raises(KernelError, match="create_list_of_mbarrier"):
        @T.prim_func
        def f(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                T.mbarrier_arrive(0)
