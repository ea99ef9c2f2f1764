"""T.Pipelined(order=, stage=, group=) on sm_90a (transform/overlap_schedule.py, the overlapped
consumer of warp_specialize/__init__.py) and the wgmma wait placement (transform/wgmma_wait.py): checked
on the generated CUDA (no GPU needed) and on the CPU interpreter."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.ir import nodes as ir
from tilelang.transform.analysis.overlap_schedule import schedule

from overlap_kernels import GROUP, ORDER, STAGE, gemm_chain, gemm_chain_ref
from transform_helpers import SM90, requires_compiler, run_passes

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "examples"))
from example_helpers import load_example  # noqa: E402


def _example():
    return load_example(ROOT / "examples" / "flash_attention" / "example_mha_fwd_pipelined.py")


def _consumer(src):
    return src[src.index("setmaxnreg_inc") if "setmaxnreg_inc" in src else
               src.index("'consumer'"):]


def _steady_loop(src):
    """The body of the consumer's main loop (from `for (int k` to its closing brace)."""
    c = _consumer(src)
    start = c.index("for (int k")
    depth, i = 0, c.index("{", start)
    for j in range(i, len(c)):
        depth += {"{": 1, "}": -1}.get(c[j], 0)
        if depth == 0:
            return c[start:j + 1]
    raise AssertionError("unbalanced loop")


@pytest.mark.parametrize("causal", [False, True])
def test_flash_example_fa3_schedule(causal):
    """Pass k: S(k) = Q K^T issued, then P(k-1) V(k-1) issued, the softmax of S(k) after
    waiting for S(k) only (wait<1>), and P(k) written after waiting for P V (wait<0>)."""
    name, func = _example().programs("bench")[int(causal)]
    src = tilelang.lower(func, target=SM90)
    loop = _steady_loop(src)
    order = [m.group(0) for m in re.finditer(
        r"wgmma_gemm_ss<[^>]*-1(?:, true)?>|wgmma_gemm_rs<[^>]*-1(?:, true)?>|wgmma_wait_in_place<\d>|"
        r"acc_s_cast\[[^]]*\] = |store_pair\(\(&acc_s_cast|exp2\(acc_s|mbarrier_arrive\(\(&[KV]_shared_empty|"
        r"acc_o\[[^]]*\] = acc_o\[[^]]*\] \* rescale", loop)]
    squeezed = [o for i, o in enumerate(order) if i == 0 or o != order[i - 1]]
    kinds = [("ss" if "gemm_ss" in s else "rs" if "gemm_rs" in s else
              "wait" + s[-2] if "wait" in s else "relK" if "K_shared_empty" in s else
              "relV" if "V_shared_empty" in s else "exp" if "exp2" in s else
              "cast" if "acc_s_cast" in s else "rescale") for s in squeezed]
    assert kinds == ["ss", "rescale", "rs", "wait1", "relK", "exp", "wait0", "relV", "cast"]
    # one ring per tile, each waited for once per pass
    assert loop.count("mbarrier_wait((&K_shared_full") == 1
    assert loop.count("mbarrier_wait((&V_shared_full") == 1
    # no wait inside the gemm templates, none left for ptxas to hoist
    assert "tl::wgmma_wait<" not in _consumer(src)
    # prologue (softmax of the first tile) and epilogue (P V of the last one)
    consumer = _consumer(src)
    before, after = consumer.split(loop)
    assert before.count("wgmma_gemm_ss<") == 1 and after.count("wgmma_gemm_rs<") == 1
    assert after.count("wgmma_wait_in_place<0>") >= 1


def test_plain_flash_loop_is_unchanged():
    """Without the annotation nothing waits outside the gemm templates."""
    src = tilelang.lower(_example().flash_attention_fwd_pipelined.get_tir(
        1, 2, 256, 64, False, block_M=64, block_N=64, threads=128), target=SM90)
    assert "wgmma_wait_in_place" in src

    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    from kernels import flash_fwd

    # (8 iterations: a loop of at most 4 gets a full barrier per tile, waited for between
    # the gemms, warp_specialize._first_reads)
    plain = tilelang.lower(flash_fwd(1, 2, 512, 64, False, 64, 64, 2, 128), target=SM90)
    assert "wgmma_wait_in_place" not in plain and "_full[" not in plain
    assert re.findall(r"wgmma_gemm_(?:ss|rs)<[^>]*, 0>", plain)


@requires_compiler
@pytest.mark.parametrize("causal", [False, True])
def test_flash_example_compiles_without_spills_or_serialisation(causal):
    from tilelang.runtime.compiler import compile_cuda

    name, func = _example().programs("bench")[int(causal)]
    log = compile_cuda(tilelang.lower(func, target=SM90), "sm_90a", verbose=True,
                       use_cache=False).log
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", log)]
    assert spills and max(spills) == 0, log
    assert "C7512" not in log and "serialized" not in log, log


def test_chain_zero_and_one_iteration_guards():
    """The prologue and the epilogue run only when the loop has an iteration; the steady loop
    starts one pass late (blocks with 0, 1, 2, ... iterations share the code)."""
    src = tilelang.lower(gemm_chain(200, 300, 64), target=SM90)
    c = _consumer(src)
    loop = _steady_loop(src)
    pro, epi = c.split(loop)
    assert "if (bx > 0)" in pro or "if (0 < bx)" in pro
    assert "for (int k = 1; k < bx" in loop
    assert re.search(r"if \((?:bx > 0|1 <= bx|bx >= 1)\)", epi)
    # the epilogue issues the last P V and waits for it before the results are stored
    tail = epi[:epi.index("Out[")]
    assert tail.count("wgmma_gemm_rs<") == 1 and "wgmma_wait_in_place<0>" in tail


@pytest.mark.parametrize("M,N", [(64, 64), (200, 300), (256, 100)])
def test_chain_cpu_matches_reference(M, N):
    torch.manual_seed(M + N)
    q, k, v = (torch.randn(n, 64).half() for n in (M, N, N))
    kern = tilelang.compile(gemm_chain(M, N, 64), target="cpu")
    out = torch.full((M, 64), float("nan"))
    kern(q, k, v, out)
    ref = gemm_chain_ref(q, k, v)
    assert not out.isnan().any()
    assert (out.double() - ref).abs().max().item() < 1e-2 * (1 + ref.abs().max().item())


def _notes(func):
    _, ctx = run_passes(func, "wgmma_waits", target=SM90)
    return ctx.notes


def test_illegal_order_is_ignored_with_a_note():
    """P(k-1) cast after S(k) overwrote S: reordering would change the result, so the plain
    loop runs (and says why)."""
    f = gemm_chain(128, 256, 64, stage=[-1, 0, 1, -1, 1], order=[-1, 0, 2, -1, 1])
    notes = _notes(f)
    assert any("annotation ignored" in n and "out of order" in n for n in notes), notes
    # (per-tile full barriers, which a loop this short gets by default, off: the plain ring)
    src = tilelang.lower(f, target=SM90, pass_configs={"tl.ws_tile_barriers": False})
    assert "_full[" not in src and "wgmma_wait_in_place" not in src


@pytest.mark.parametrize("kw,why", [
    (dict(group=[[0], [1], [2], [3], [4]]), "group must list each"),
    (dict(order=[-1, 0, 2, -1]), "entries for"),
    (dict(stage=[-1, 0, -1, -1, 1]), "stage -1 but is not a copy"),
    (dict(stage=[-1, 1, 1, -1, 2], num_stages=2), "needs num_stages > 2"),
])
def test_malformed_annotations_are_ignored(kw, why):
    notes = _notes(gemm_chain(128, 256, 64, **kw))
    assert any(why in n for n in notes), notes


def test_deeper_stage_with_three_buffers():
    """Everything one pass later and P V two passes later: stage 2 needs three buffers; the
    prologue covers two passes, the epilogue two."""
    f = gemm_chain(256, 512, 64, stage=[-1, 1, 1, -1, 2], num_stages=3)
    src = tilelang.lower(f, target=SM90)
    loop = _steady_loop(src)
    assert "for (int k = 2;" in loop
    assert _consumer(src).count("wgmma_gemm_rs<") == 3  # epilogue 2 + steady 1


def test_schedule_orders_slots_and_rejects_conflicts():
    f = gemm_chain(128, 256, 64)
    kernel, _ = run_passes(f, "infer_layouts", target=SM90)
    loop = next(n for n in __import__("tilelang.ir.visitor", fromlist=["collect"]).collect(
        kernel.body, lambda n: isinstance(n, ir.For) and n.kind == "pipelined"))
    stmts = list(loop.body.stmts)
    producers = {id(s) for s in stmts if isinstance(s, ir.Copy)}
    slots, why = schedule(loop, stmts, producers)
    assert why is None
    assert [(s.pos, s.stage) for s in slots] == [(1, 0), (2, 0), (3, 0), (5, 1)]
    assert [s.pos for s in sorted(slots, key=lambda s: s.key)] == [1, 2, 5, 3]
    # P V of an iteration before its P is written
    bad = ir.with_fields(loop, annotations=tuple(
        (k, {"order": (-1, 1, 2, -1, 0), "stage": (-1, 0, 0, -1, 0)}.get(k, v))
        for k, v in loop.annotations))
    slots, why = schedule(bad, stmts, producers)
    assert slots is None and "out of order" in why


def _wait_kernel(use_explicit_wait, loop_carried=False):
    @T.prim_func
    def main(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 64), "float16"),
             C: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((128, 64), "float")
            other = T.alloc_fragment((128, 64), "float")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(acc)
            T.clear(other)
            if loop_carried:
                for i in T.serial(3):
                    for r, c in T.Parallel(128, 64):
                        acc[r, c] = acc[r, c] * 0.5
                    T.gemm(A_s, B_s, acc, wg_wait=-1)
                    for r, c in T.Parallel(128, 64):
                        other[r, c] = other[r, c] + 1.0
            else:
                T.gemm(A_s, B_s, acc, wg_wait=-1)
                for r, c in T.Parallel(128, 64):
                    other[r, c] = other[r, c] + 1.0  # independent: overlaps the gemm
                if use_explicit_wait:
                    T.wait_wgmma(0)
                for r, c in T.Parallel(128, 64):
                    acc[r, c] = acc[r, c] + other[r, c]
            T.copy(acc, C)

    return main


def test_wait_goes_where_the_accumulator_is_next_touched():
    src = tilelang.lower(_wait_kernel(False), target=SM90)
    body = src[src.index("wgmma_gemm_ss"):]
    assert "wgmma_gemm_ss<128, 64, 64, 2, 1, false, false, 128, 64, 128, 64, 64, 128, -1>" in src \
        or re.search(r"wgmma_gemm_ss<[^>]*-1(?:, true)?>", src)
    i_other = body.index("other[")
    i_wait = body.index("wgmma_wait_in_place<0>")
    i_use = body.index("acc[v")
    assert i_other < i_wait < i_use
    assert "wgmma_fence_operands(acc" in body[i_wait:i_use]


def test_explicit_wait_is_respected():
    src = tilelang.lower(_wait_kernel(True), target=SM90)
    assert "tl::wgmma_wait<0>();" in src and "wgmma_wait_in_place" not in src


def test_loop_carried_wait():
    """A gemm left in flight at the end of one iteration is waited for at the start of the
    next (before its accumulator is scaled) and after the loop."""
    src = tilelang.lower(_wait_kernel(False, loop_carried=True), target=SM90)
    loop = src[src.index("for (int i"):]
    assert loop.index("wgmma_wait_in_place<0>") < loop.index("acc[v") < \
        loop.index("wgmma_gemm_ss")
    after = loop[loop.index("wgmma_gemm_ss"):]
    assert "wgmma_wait_in_place<0>" in after  # drained before C is stored


def _cuobjdump():
    import shutil

    return shutil.which("cuobjdump") if shutil.which("nvdisasm") else None


def _example_sass() -> str:
    """SASS of the example's non-causal kernel at its bench size, compiled for sm_90a."""
    import os
    import subprocess
    import tempfile

    from tilelang.runtime.compiler import compile_cuda

    name, func = _example().programs("bench")[0]
    cubin = compile_cuda(tilelang.lower(func, target=SM90), "sm_90a", use_cache=False).cubin
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        return subprocess.run([_cuobjdump(), "--dump-sass", path], capture_output=True,
                              text=True, check=True).stdout


@requires_compiler
@pytest.mark.skipif(_cuobjdump() is None, reason="cuobjdump/nvdisasm not on PATH")
def test_sass_keeps_the_softmax_between_the_waits():
    """ptxas schedules within basic blocks; a plain wgmma.wait_group 0 was hoisted above the
    softmax (every exp2 after the wait for P V). In the steady loop the 64 + 2 exp2 of the
    softmax must sit between the wait for S (DEPBAR 1) and the wait for P V (DEPBAR 0)."""
    sass = _example_sass()
    ops = re.findall(r"(HGMMA|WARPGROUP\.DEPBAR\.LE gsb0, 0x[01]|MUFU\.EX2)", sass)
    # HGMMA runs: the prologue's S, the steady loop's S and P V (adjacent), the epilogue's P V
    runs = [i for i, o in enumerate(ops) if o == "HGMMA" and (i == 0 or ops[i - 1] != "HGMMA")]
    assert len(runs) == 3, ops
    loop = ops[runs[1]:runs[2]]
    d1, d0 = loop.index("WARPGROUP.DEPBAR.LE gsb0, 0x1"), loop.index(
        "WARPGROUP.DEPBAR.LE gsb0, 0x0")
    assert d1 < d0 and loop[d1:d0].count("MUFU.EX2") >= 64, loop


def _macro_style_flash(causal, block=64, dim=64, seq=256):
    """The reference's idiom: the loop body built from macros (QK^T, softmax of 8 statements,
    rescale, PV) and the annotation counting 14 top-level statements."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    shape = [1, 2, seq, dim]

    @T.macro
    def qk(K, Q_s, K_s, S, k, bx, by, bz):
        T.copy(K[bz, by, k * block:(k + 1) * block, :], K_s)
        if causal:
            for i, j in T.Parallel(block, block):
                S[i, j] = T.if_then_else(bx * block + i >= k * block + j, 0, -T.infinity("float"))
        else:
            T.clear(S)
        T.gemm(Q_s, K_s, S, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)

    @T.macro
    def softmax(S, P, m, m_prev, r, s, l):
        T.copy(m, m_prev)
        T.fill(m, -T.infinity("float"))
        T.reduce_max(S, m, dim=1, clear=False)
        for i in T.Parallel(block):
            r[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
        for i, j in T.Parallel(block, block):
            S[i, j] = T.exp2(S[i, j] * scale - m[i] * scale)
        T.reduce_sum(S, s, dim=1)
        for i in T.Parallel(block):
            l[i] = l[i] * r[i] + s[i]
        T.copy(S, P)

    @T.prim_func
    def main(Q: T.Tensor(shape, "float16"), K: T.Tensor(shape, "float16"),
             V: T.Tensor(shape, "float16"), O: T.Tensor(shape, "float16")):
        with T.Kernel(T.ceildiv(seq, block), 2, 1, threads=128) as (bx, by, bz):
            Q_s = T.alloc_shared([block, dim], "float16")
            K_s = T.alloc_shared([block, dim], "float16")
            V_s = T.alloc_shared([block, dim], "float16")
            S = T.alloc_fragment([block, block], "float")
            P = T.alloc_fragment([block, block], "float16")
            acc = T.alloc_fragment([block, dim], "float")
            m = T.alloc_fragment([block], "float")
            m_prev = T.alloc_fragment([block], "float")
            r = T.alloc_fragment([block], "float")
            s = T.alloc_fragment([block], "float")
            l = T.alloc_fragment([block], "float")
            T.copy(Q[bz, by, bx * block:(bx + 1) * block, :], Q_s)
            T.fill(acc, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float"))
            n = T.ceildiv((bx + 1) * block, block) if causal else T.ceildiv(seq, block)
            for k in T.Pipelined(n, num_stages=2, order=[-1, 0, 3, 1, -1, 2],
                                 stage=[-1, 0, 0, 1, -1, 1],
                                 group=[[0], [1, 2], [3, 4, 5, 6, 7, 8, 9, 10], [11], [12],
                                        [13]]):
                qk(K, Q_s, K_s, S, k, bx, by, bz)
                softmax(S, P, m, m_prev, r, s, l)
                for i, j in T.Parallel(block, dim):
                    acc[i, j] *= r[i]
                T.copy(V[bz, by, k * block:(k + 1) * block, :], V_s)
                T.gemm(P, V_s, acc, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block, dim):
                acc[i, j] /= l[i]
            T.copy(acc, O[bz, by, bx * block:(bx + 1) * block, :])

    return main


@pytest.mark.parametrize("causal", [False, True])
def test_reference_macro_idiom_gets_the_overlap(causal):
    """Without wg_wait=-1 in the source: the annotated loop's gemms become asynchronous, and
    the interpreter (the plain loop) matches a float64 reference."""
    f = _macro_style_flash(causal)
    notes = _notes(f)
    assert any("overlapped pipeline" in n for n in notes), notes
    loop = _steady_loop(tilelang.lower(f, target=SM90))
    assert re.search(r"wgmma_gemm_ss<[^>]*-1(?:, true)?>[\s\S]*wgmma_gemm_rs<[^>]*-1>[\s\S]*"
                     r"wgmma_wait_in_place<1>[\s\S]*exp2[\s\S]*wgmma_wait_in_place<0>", loop)
    torch.manual_seed(int(causal))
    q, k, v = (torch.randn(1, 2, 256, 64).half() for _ in range(3))
    out = torch.full_like(q, float("nan"))
    tilelang.compile(f, target="cpu")(q, k, v, out)
    s = q.double() @ k.double().transpose(-1, -2) / 8.0
    if causal:
        s = s.masked_fill(torch.ones(256, 256, dtype=torch.bool).triu(1), float("-inf"))
    ref = torch.softmax(s, -1) @ v.double()
    assert ((out.double() - ref).norm() / ref.norm()).item() < 5e-3


def test_gemms_take_the_warpgroup_computed_once():
    """Every wgmma gemm gets the warpgroup index bound at the kernel's top (a lane-0 broadcast,
    so that ptxas keeps the descriptors in uniform registers), none computes its own."""
    name, func = _example().programs("bench")[0]
    src = tilelang.lower(func, target=SM90)
    assert src.count("tl::warpgroup_index(") == 1
    assert src.index("tl::warpgroup_index(") < src.index("thread_group: ('consumer'")
    calls = re.findall(r"tl::wgmma_gemm_(?:ss|rs)<[^;]*;", src)
    assert calls and all(c.endswith(", warpgroup);") for c in calls)


@requires_compiler
@pytest.mark.skipif(_cuobjdump() is None, reason="cuobjdump/nvdisasm not on PATH")
def test_sass_builds_wgmma_descriptors_in_uniform_registers():
    """The descriptors of the attention loop's wgmmas are computed on the uniform datapath:
    no vector-to-uniform moves (R2UR) between the first and the last HGMMA of the loop."""
    ops = re.findall(r"\b(HGMMA|R2UR)\b", _example_sass())
    first, last = ops.index("HGMMA"), len(ops) - 1 - ops[::-1].index("HGMMA")
    assert "R2UR" not in ops[first:last], ops[first:last].count("R2UR")


# ---- the schedule derived for attention loops written without an annotation --------------

def _reference_style_flash(threads, causal=False, **configs):
    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    from kernels import flash_fwd

    return tilelang.compile(flash_fwd(1, 2, 1024, 128, causal, 128, 128, 2, threads),
                            target=SM90, pass_configs=configs)


def test_reference_style_flash_gets_the_derived_schedule():
    kern = _reference_style_flash(256)
    notes = kern.get_host_source()
    assert "FlashAttention-3's schedule, derived" in notes
    assert "warpgroup ping-pong" in notes
    loop = _steady_loop(kern.get_kernel_source())
    # S(k) issued, then the late rescale and P(k-1) V(k-1), then the softmax of S(k)
    ss, rs, ex = loop.index("wgmma_gemm_ss<"), loop.index("wgmma_gemm_rs<"), loop.index("exp2")
    assert ss < rs < ex


def test_derived_schedule_needs_two_consumer_warpgroups_and_can_be_turned_off():
    assert "derived" not in _reference_style_flash(128).get_host_source()
    off = _reference_style_flash(256, **{"tl.disable_wgmma_overlap": True}).get_host_source()
    assert "derived" not in off and "ping-pong" not in off


def test_auto_schedule_leaves_other_bodies_alone():
    from tilelang.transform.analysis.overlap_schedule import auto_schedule

    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    from kernels import gemm

    kern = tilelang.compile(gemm(512, 512, 512, 128, 256, 64, out_dtype="float16",
                                 num_stages=3, threads=256), target=SM90)
    assert "derived" not in kern.get_host_source()
    assert auto_schedule([], set(), lambda g: True) is None


def test_no_derived_schedule_for_masks_on_every_tile_or_three_warpgroups():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import as_written as W

    # the causal mask before the gemm, computed on every tile (unswitch_masks turned off)
    causal = tilelang.compile(W.flash_fwd(1, 2, 1024, 128, True, 128, 128, 2, 256), target=SM90,
                              pass_configs={"tl.disable_mask_unswitching": True})
    assert "derived" not in causal.get_host_source()
    three = tilelang.compile(_example().flash_attention_fwd_pipelined.get_tir(
        1, 2, 1024, 128, False, block_M=192, block_N=128, threads=384, overlap=False),
        target=SM90).get_host_source()
    assert "derived" not in three
