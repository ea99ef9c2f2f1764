"""transform/fold_accumulator_clear.py: `T.clear(C)` before a wgmma gemm into all of C becomes
the gemm's scale-d = 0 (FreshC), only where nothing in between touches C."""

import re

import tilelang
from tests.gpu.epilogue_kernels import cleared_tiles as _kernel

SM90 = "cuda -arch=sm_90a"


def _lower(func, **configs):
    kernel = tilelang.compile(func, target=SM90, pass_configs=configs)
    return kernel.get_kernel_source(), kernel.get_host_source()


def _zeroes_acc(src):
    return re.search(r"acc\[\w+\] = 0\.0f;", src) is not None


def test_clear_before_a_wgmma_becomes_its_scale_d():
    for between in ("", "other"):
        src, host = _lower(_kernel(between))
        assert "accumulator clear(s) folded" in host
        assert re.search(r"wgmma_gemm_ss<[^>]*, true>\([^;]*acc, true, 0\)", src)
        assert not _zeroes_acc(src)


def test_not_folded_when_the_accumulator_is_read_in_between_or_cleared_in_part():
    for func in (_kernel("read"), _kernel(region=True)):
        src, host = _lower(func)
        assert "folded" not in host
        assert _zeroes_acc(src) and not re.search(r"wgmma_gemm_ss<[^>]*, true>", src)


def test_pass_config_and_mma_sync_targets_keep_the_zeroing():
    src, host = _lower(_kernel(), **{"tl.disable_clear_fold": True})
    assert "folded" not in host and _zeroes_acc(src)
    assert _zeroes_acc(tilelang.lower(_kernel(), target="cuda -arch=sm_80"))
