"""`T.rng_init` / `T.rng_rand` / `T.rng_rand_float`: per-thread Philox4x32-10 streams (GPU
only), checked against a numpy Philox (itself checked against the published known-answer
vectors), and the checks at trace time."""

import numpy as np
import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.runtime import toolkit

HAS_COMPILER = toolkit.nvrtc_backend() is not None or toolkit.nvcc_path() is not None
gpu = [pytest.mark.gpu,
       pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
GENERATORS = ["curandStatePhilox4_32_10_t", "curandStateMRG32k3a_t", "curandStateXORWOW_t"]


def philox4x32_10(counter, key):
    """numpy Philox4x32-10 of uint32 arrays counter (..., 4) and key (..., 2)."""
    c = np.array(counter, dtype=np.uint64)
    k = np.array(key, dtype=np.uint64)
    mask = np.uint64(0xFFFFFFFF)
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c[..., 0]
        p1 = np.uint64(0xCD9E8D57) * c[..., 2]
        c = np.stack([(p1 >> np.uint64(32)) ^ c[..., 1] ^ k[..., 0], p1 & mask,
                      (p0 >> np.uint64(32)) ^ c[..., 3] ^ k[..., 1], p0 & mask], axis=-1)
        k = (k + np.array([0x9E3779B9, 0xBB67AE85], dtype=np.uint64)) & mask
    return c.astype(np.uint32)


def stream(seed, seq, off, n):
    """The first n words of the stream (seed, subsequence seq) from word `off` on."""
    words = []
    for i in range(off, off + n):
        block = i // 4
        ctr = [block & 0xFFFFFFFF, block >> 32, seq & 0xFFFFFFFF, seq >> 32]
        words.append(philox4x32_10(ctr, [seed & 0xFFFFFFFF, seed >> 32])[i % 4])
    return np.array(words, dtype=np.uint32)


def test_numpy_philox_matches_known_answers():
    # Random123's known-answer vectors for philox4x32_10
    assert philox4x32_10([0, 0, 0, 0], [0, 0]).tolist() == [
        0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert philox4x32_10([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2).tolist() == [
        0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
    assert philox4x32_10([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
                         [0xA4093822, 0x299F31D0]).tolist() == [
        0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


def _words_kernel(blocks, threads, draws, seed, off, generator, explicit_seq):
    @T.prim_func
    def main(out: T.Tensor((blocks * threads, draws), "uint32")):
        with T.Kernel(blocks, threads=threads) as bx:
            tx = T.get_thread_binding()
            if explicit_seq:
                T.rng_init(seed, 1000 + bx * threads + tx, off, generator=generator)
            else:
                T.rng_init(seed, off=off, generator=generator)
            for d in T.serial(draws):
                out[bx * threads + tx, d] = T.rng_rand()
    return main


def _float_kernel(n_threads, draws, bit, dist):
    @T.prim_func
    def main(out: T.Tensor((n_threads, draws), f"float{bit}")):
        with T.Kernel(n_threads // 128, threads=128) as bx:
            tx = T.get_thread_binding()
            T.rng_init(7)
            for d in T.serial(draws):
                out[bx * 128 + tx, d] = T.rng_rand_float(bit=bit, dist=dist)
    return main


@pytest.mark.parametrize("generator", GENERATORS)
@pytest.mark.parametrize("explicit_seq", [False, True])
@pytest.mark.parametrize("seed,off", [(0, 0), (0x1234_5678_9ABC, 5)])
@pytest.mark.parametrize("_", [pytest.param(None, marks=gpu)])
def test_words_follow_the_thread_stream(generator, explicit_seq, seed, off, _):
    blocks, threads, draws = 3, 40, 9
    kernel = tilelang.compile(_words_kernel(blocks, threads, draws, seed, off, generator,
                                            explicit_seq), target="cuda")
    out = torch.full((blocks * threads, draws), 0xDEAD, dtype=torch.int64).to(
        torch.uint32).cuda()
    kernel(out)
    got = out.cpu().numpy()
    for t in range(blocks * threads):
        seq = 1000 + t if explicit_seq else t
        assert np.array_equal(got[t], stream(seed, seq, off, draws)), t


@pytest.mark.parametrize("bit", [32, 64])
@pytest.mark.parametrize("dist", ["uniform", "normal"])
@pytest.mark.parametrize("_", [pytest.param(None, marks=gpu)])
def test_float_distributions(bit, dist, _):
    n_threads, draws = 1024, 64
    kernel = tilelang.compile(_float_kernel(n_threads, draws, bit, dist), target="cuda")
    out = torch.full((n_threads, draws), float("nan"),
                     dtype=getattr(torch, f"float{bit}")).cuda()
    kernel(out)
    x = out.double().cpu()
    assert torch.isfinite(x).all()
    n = x.numel()
    if dist == "uniform":
        assert (x > 0).all() and (x <= 1).all()
        assert abs(x.mean().item() - 0.5) < 5 * (1 / 12) ** 0.5 / n ** 0.5
        assert abs(x.var().item() - 1 / 12) < 0.005
    else:
        assert abs(x.mean().item()) < 5 / n ** 0.5
        assert abs(x.var().item() - 1) < 0.03
    # threads draw different numbers
    assert len(torch.unique(x[:, 0])) > n_threads * 0.99


@pytest.mark.skipif(not HAS_COMPILER, reason="no CUDA compiler installed")
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_builds_with_the_state_at_kernel_scope(arch):
    @T.prim_func
    def main(out: T.Tensor((64,), "float32"), n: T.int32):
        with T.Kernel(64, threads=32) as bx:
            tx = T.get_thread_binding()
            if bx < n:
                T.rng_init(42, 0, bx)
            if tx == 0:
                out[bx] = T.rng_rand_float() + T.rng_rand_float(bit=64, dist="normal")

    src = tilelang.compile(main, target=f"cuda -arch={arch}").get_kernel_source()
    # declared once, before the branch that initialises it
    assert src.count("rng_state[6]") == 1
    assert src.index("rng_state[6]") < src.index("if (bx < n)")
    assert "tl::rng_init(" in src and "tl::rng_normal_f64(" in src


def test_interpreter_rejects_random_streams():
    kernel_fn = _words_kernel(1, 32, 2, 0, 0, GENERATORS[0], False)
    with pytest.raises(NotImplementedError, match="run on the GPU only"):
        tilelang.compile(kernel_fn, target="cpu")


def test_checks():
    with pytest.raises(ValueError, match="generator must be one of") as info:
        @T.prim_func
        def bad_generator(out: T.Tensor((32,), "uint32")):
            with T.Kernel(1, threads=32):
                T.rng_init(0, generator="curandStateSobol32_t")
    assert "test_random.py" in str(info.value)
    with pytest.raises(RuntimeError, match="call T.rng_init"):
        @T.prim_func
        def no_init(out: T.Tensor((32,), "uint32")):
            with T.Kernel(1, threads=32) as bx:
                out[bx] = T.rng_rand()
    with pytest.raises(ValueError, match="bit must be 32 or 64"):
        @T.prim_func
        def bad_bits(out: T.Tensor((32,), "float16")):
            with T.Kernel(1, threads=32) as bx:
                T.rng_init(0)
                out[bx] = T.rng_rand_float(bit=16)
    with pytest.raises(TypeError, match="seed must be an integer"):
        @T.prim_func
        def float_seed(out: T.Tensor((32,), "uint32")):
            with T.Kernel(1, threads=32):
                T.rng_init(1.5)
