"""Plain T.copy performed by TMA (transform/lower_copy/copy_tma.py): `prefer_instruction="tma"`
loads (1-D bulk copy or tensor-map boxes, an mbarrier of their own, a phase register inside
loops), TMA stores of shared -> global copies (by default on sm_90a; not with disable_tma or
prefer_instruction="sync"), built for sm_90a; the interpreter's values; GPU runs against torch."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.errors import KernelError
from tilelang.layout import Layout

from transform_helpers import run_passes

SM90 = "cuda -arch=sm_90a"


def _src(func):
    return tilelang.compile(func, target=SM90).get_kernel_source()


def _load_store(M, N, bm, bn, dtype="float32", load="tma", store=None):
    @T.prim_func
    def f(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            S = T.alloc_shared((bm, bn), dtype)
            R = T.alloc_shared((bm, bn), dtype)
            T.copy(A[by * bm, bx * bn], S, prefer_instruction=load)
            for i, j in T.Parallel(bm, bn):
                R[i, j] = S[i, j] * 2
            T.copy(R, C[by * bm, bx * bn], prefer_instruction=store)
    return f


def _looped(M, N, bm, dtype="float32"):
    """Each block sums its row tiles of A over a loop of TMA loads into the same tile."""
    @T.prim_func
    def f(A: T.Tensor((M, N), dtype), C: T.Tensor((bm, N), dtype)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((bm, N), dtype)
            acc = T.alloc_fragment((bm, N), dtype)
            T.clear(acc)
            for k in T.serial(T.ceildiv(M, bm)):
                T.copy(A[k * bm, 0], S, prefer_instruction="tma")
                for i, j in T.Parallel(bm, N):
                    acc[i, j] += S[i, j]
            T.copy(acc, C)
    return f


def test_contiguous_load_is_one_bulk_copy_and_store_is_1d():
    src = _src(_load_store(256, 64, 64, 64))  # whole rows: one contiguous run per tile
    assert "tl::tma_load_1d(" in src and "CUtensorMap" not in src
    assert "tl::tma_store_1d(" in src
    assert re.search(r"tl::mbarrier_arrive_expect_tx\([^;]*16384\)", src)
    assert re.search(r"tl::mbarrier_wait\([^;]*, 0\)", src)
    assert "tl::tma_store_arrive();" in src and "tl::tma_store_wait<0>();" in src


def test_partial_rows_use_a_tensor_map():
    src = _src(_load_store(200, 136, 64, 32))  # ragged, partial rows: boxes that clip
    assert "CUtensorMap" in src
    assert "tl::tma_load(" in src and "tl::tma_store(" in src
    assert "tl::tma_load_1d" not in src and "tl::tma_store_1d" not in src


def test_plain_store_is_tma_by_default_but_not_when_disabled():
    assert "tl::tma_store" in _src(_load_store(256, 64, 64, 64, load=None))
    assert "tl::tma_store" not in _src(_load_store(256, 64, 64, 64, load=None, store="sync"))

    @T.prim_func
    def f(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 64), "float16")
            T.copy(A, S)
            T.copy(S, C, disable_tma=True)
    assert "tl::tma_store" not in _src(f)
    configs = {"tl.disable_tma_lower": True}
    kernel = tilelang.compile(_load_store(256, 64, 64, 64, load=None), target=SM90,
                              pass_configs=configs)
    assert "tl::tma_store" not in kernel.get_kernel_source()


def test_load_inside_a_loop_flips_its_phase():
    src = _src(_looped(256, 64, 64))
    m = re.search(r"tl::mbarrier_wait\(\(&(\w+)\[0\]\), (\w+)\)", src)
    assert m and m.group(2) != "0"
    assert re.search(rf"{m.group(2)} = \(?{m.group(2)} \^ 1\)?;", src)


def test_interpreter_values_ragged():
    M, N = 200, 136
    a = torch.randn(M, N)
    c = torch.full((M, N), float("nan"))
    tilelang.compile(_load_store(M, N, 64, 32, store="tma"), target="cpu")(a, c)
    torch.testing.assert_close(c, a * 2)
    a = torch.randn(256, 64)
    c = torch.full((64, 64), float("nan"))
    tilelang.compile(_looped(256, 64, 64), target="cpu")(a, c)
    torch.testing.assert_close(c, a.view(4, 64, 64).sum(0), rtol=1e-5, atol=1e-5)


def test_bad_preference_and_conflicts_are_located_errors():
    with pytest.raises(KernelError, match="prefer_instruction must be one of"):
        _src(_load_store(64, 64, 64, 64, load="bulk"))

    @T.prim_func
    def conv(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 64), "float32")
            T.copy(A, S, prefer_instruction="tma")
            T.copy(S, C)
    with pytest.raises(KernelError, match="TMA does not convert") as e:
        _src(conv)
    assert "test_copy_tma.py" in str(e.value)


def test_hand_written_layout_is_copied_by_the_threads():
    from tilelang.layout import Layout

    @T.prim_func
    def f(A: T.Tensor((16, 64), "float16"), C: T.Tensor((16, 64), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((16, 64), "float16")
            T.annotate_layout({S: Layout((16, 64), lambda i, j: j * 16 + i)})
            T.copy(A, S, prefer_instruction="tma")
            T.copy(S, C, prefer_instruction="sync")
    assert "tma_load" not in _src(f)
    a = torch.randn(16, 64).half()
    c = torch.zeros(16, 64).half()
    tilelang.compile(f, target="cpu")(a, c)
    assert torch.equal(c, a)


def test_sm80_keeps_its_copies():
    kernel = tilelang.compile(_load_store(256, 64, 64, 64, load=None), target="cuda -arch=sm_80")
    assert "tma_" not in kernel.get_kernel_source()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("shape,tile,load,store", [
    ((256, 64), (64, 64), "tma", None),      # 1-D bulk load and store
    ((200, 136), (64, 32), "tma", "tma"),    # tensor maps, ragged edges clipped
    ((200, 136), (64, 32), None, None),      # cp.async load, default TMA store
])
def test_copies_on_gpu(shape, tile, load, store):
    M, N = shape
    kernel = tilelang.compile(_load_store(M, N, *tile, load=load, store=store), target="cuda")
    a = torch.randn(M, N, device="cuda")
    c = torch.full_like(a, float("nan"))
    kernel(a, c)
    torch.testing.assert_close(c, a * 2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_looped_load_on_gpu():
    kernel = tilelang.compile(_looped(512, 64, 64), target="cuda")
    a = torch.randn(512, 64, device="cuda")
    c = torch.full((64, 64), float("nan"), device="cuda")
    kernel(a, c)
    torch.testing.assert_close(c, a.view(8, 64, 64).sum(0), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_strided_tensor_store_leaves_padding_on_gpu():
    rows, cols, stride = 4, 32, 40

    @T.prim_func
    def f(A: T.Tensor((rows, cols), "float32"),
          B: T.StridedTensor((rows, cols), (stride, 1), "float32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((rows, cols), "float32")
            T.copy(A, S, prefer_instruction="tma")
            T.copy(S, B, prefer_instruction="tma")
    kernel = tilelang.compile(f, target="cuda")
    assert "CUtensorMap" in kernel.get_kernel_source()
    a = torch.randn(rows, cols, device="cuda")
    padded = torch.full((rows, stride), float("nan"), device="cuda")
    kernel(a, padded[:, :cols])
    torch.testing.assert_close(padded[:, :cols], a)
    assert torch.isnan(padded[:, cols:]).all()


# ---- hand-written index maps equal to a TMA swizzle (layout/swizzle.py recognised_swizzle) --


def hand_swizzle(rows, cols, esize, mode, almost=False):
    """The map a user writes for the `mode`-byte TMA swizzle of a rows x cols tile: the tile
    stored in P-byte column blocks (block-major), PTX's XOR on the byte address. `almost`
    swaps elements (0, 0) and (0, 1): a permutation, but no swizzle."""
    nblk = cols * esize // mode
    mask = {32: 1, 64: 3, 128: 7}[mode]

    def fwd(i, j):
        byte = j * esize
        dense = ((byte // mode) * rows + i) * mode + byte % mode
        off = (dense ^ (((dense >> 7) & mask) << 4)) // esize
        if almost:
            off = off + (i == 0) * ((j == 0) * 1 - (j == 1) * 1)
        return off
    assert nblk >= 1
    return fwd


def _hand_swizzled_copy(M, N, bm, bn, dtype, mode, almost=False, store="tma"):
    """Each block loads its bm x bn tile of A into a tile laid out by a hand-written swizzle
    map, by TMA, and writes 2 * A back (through a second such tile stored by TMA)."""
    esize = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    fwd = hand_swizzle(bm, bn, esize, mode, almost)

    @T.prim_func
    def f(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            S = T.alloc_shared((bm, bn), dtype)
            R = T.alloc_shared((bm, bn), dtype)
            T.annotate_layout({S: Layout((bm, bn), fwd), R: Layout((bm, bn), fwd)})
            T.copy(A[by * bm, bx * bn], S, prefer_instruction="tma")
            for i, j in T.Parallel(bm, bn):
                R[i, j] = S[i, j] * 2
            T.copy(R, C[by * bm, bx * bn], prefer_instruction=store)
    return f


def test_hand_written_128B_swizzle_is_a_loop_of_swizzled_tma_boxes():
    func = _hand_swizzled_copy(64, 512, 64, 512, "float16", 128)
    src = _src(func)
    # one 64-column (128-byte) box per iteration, into 64 x 64 panels 4096 elements apart
    assert re.search(r"for \(int (\w+) = 0; \1 < 8; \+\+\1\) \{\n\s*tl::tma_load\([^;]*"
                     r"\(&S\[\1 \* 4096\]\), bx \* 512 \+ \1 \* 64, by \* 64\);", src), src
    assert re.search(r"for \(int (\w+) = 0; \1 < 8; \+\+\1\) \{\n\s*tl::tma_store\([^;]*"
                     r"\(&R\[\1 \* 4096\]\), bx \* 512 \+ \1 \* 64, by \* 64\);", src), src
    _, ctx = run_passes(func, "lower_copies", SM90)
    assert sorted((d.box, d.swizzle) for d in ctx.tma_descriptors) == [((64, 64), 128)] * 2
    (S,) = [b for b in ctx.layouts if b.name == "S"]
    assert ctx.layouts[S].swizzle_bytes == 128


def test_hand_written_64B_swizzle_of_a_ragged_tensor():
    # rows of 256 bytes laid out by the 64-byte swizzle (not the default 128): 4 boxes of 32
    func = _hand_swizzled_copy(200, 200, 32, 128, "float16", 64)
    src = _src(func)
    assert re.search(r"for \(int (\w+) = 0; \1 < 4; \+\+\1\) \{\n\s*tl::tma_load\(", src), src
    _, ctx = run_passes(func, "lower_copies", SM90)
    assert {(d.box, d.swizzle) for d in ctx.tma_descriptors} == {((32, 32), 64)}


def test_almost_a_swizzle_is_copied_by_the_threads():
    src = _src(_hand_swizzled_copy(64, 128, 64, 128, "float16", 128, almost=True))
    assert "tma_load" not in src and "CUtensorMap" not in src


@pytest.mark.parametrize("args", [(64, 512, 64, 512, "float16", 128),
                                  (200, 200, 32, 128, "float16", 64),
                                  (72, 100, 16, 64, "float32", 32),
                                  (64, 128, 64, 128, "float16", 128, True)])
def test_hand_written_swizzle_interpreter_values(args):
    M, N = args[:2]
    a = torch.randn(M, N).to(getattr(torch, args[4]))
    c = torch.full((M, N), float("nan"), dtype=a.dtype)
    tilelang.compile(_hand_swizzled_copy(*args), target="cpu")(a, c)
    torch.testing.assert_close(c, a * 2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("args", [(64, 512, 64, 512, "float16", 128),
                                  (200, 200, 32, 128, "float16", 64),
                                  (72, 100, 16, 64, "float32", 32),
                                  (136, 520, 64, 256, "bfloat16", 128, False, None),
                                  (64, 128, 64, 128, "float16", 128, True)])
def test_hand_written_swizzle_on_gpu(args):
    M, N = args[:2]
    kernel = tilelang.compile(_hand_swizzled_copy(*args), target="cuda")
    a = torch.randn(M, N, device="cuda").to(getattr(torch, args[4]))
    c = torch.full_like(a, float("nan"))
    kernel(a, c)
    torch.testing.assert_close(c, a * 2)
