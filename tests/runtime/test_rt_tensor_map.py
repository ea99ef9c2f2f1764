"""TMA descriptor parameters: every rule of HARDWARE §7 is checked in Python with a message
that names the parameter (the driver would only say CUDA_ERROR_INVALID_VALUE)."""

from __future__ import annotations

import pytest

from tilelang.runtime import tensor_map as tm

BF16 = tm.data_type("bfloat16")
F32 = tm.data_type("float32")


def ok(**kw):
    args = dict(dtype=BF16, address=0x7F0000000000, dims=(4096, 1024), strides=(8192,),
                box=(64, 128), element_strides=(1, 1), interleave=0, swizzle=3)
    args.update(kw)
    tm.check_tiled(**args)


def test_valid_maps_pass():
    ok()
    ok(dims=(7,), strides=(), box=(8,), element_strides=(1,), swizzle=0)
    ok(dtype=F32, dims=(32, 3, 5, 7, 9), strides=(128, 384, 1920, 13440),
       box=(32, 1, 1, 1, 1), element_strides=(1, 1, 1, 1, 1), swizzle=3)
    ok(box=(16, 8), swizzle=1)  # 32 B inner box with 32B swizzle


@pytest.mark.parametrize("kw,match", [
    (dict(dims=(1,) * 6, strides=(16,) * 5, box=(8,) * 6, element_strides=(1,) * 6),
     "rank must be 1..5"),
    (dict(address=0x7F0000000008), "not 16-byte aligned"),
    (dict(strides=(8200,)), "multiple of 16"),
    (dict(strides=(1 << 40,)), "below 2\\^40"),
    (dict(dims=(0, 1024)), "outside \\[1, 2\\^32\\]"),
    (dict(box=(64, 257)), "box dim 1 = 257"),
    (dict(box=(4, 128), swizzle=0), "not a multiple of 16 B"),
    (dict(box=(128, 64)), "exceeds the 128B swizzle width; use box\\[0\\] = 64"),
    (dict(box=(64, 64), swizzle=2), "exceeds the 64B swizzle"),
    (dict(element_strides=(1, 9)), "element stride 1 = 9"),
    (dict(strides=()), "needs 1 global strides"),
    (dict(swizzle=4), "not supported on sm_90"),
    (dict(interleave=1), "need rank >= 3"),
])
def test_each_rule_is_named(kw, match):
    with pytest.raises(ValueError, match=match):
        ok(**kw)


def test_enum_spellings():
    assert tm._enum("128B", tm.SWIZZLE, "swizzle") == 3
    assert tm._enum("SWIZZLE_64B", tm.SWIZZLE, "swizzle") == 2
    assert tm._enum(1, tm.SWIZZLE, "swizzle") == 1
    assert tm.data_type("float8_e4m3fn") == 0 and tm.data_type("torch.float16") == 6
    with pytest.raises(ValueError, match="unknown swizzle"):
        tm._enum("96B", tm.SWIZZLE, "swizzle")
    with pytest.raises(ValueError, match="no TMA data type"):
        tm.data_type("complex64")


def test_rowmajor_rejects_strided_inner_dim():
    with pytest.raises(ValueError, match="contiguous innermost"):
        tm.encode_tiled_rowmajor("float16", 0x7F0000000000, (64, 64), (1, 64), (64, 64))


def test_repeated_encodes_are_cache_hits(monkeypatch):
    calls = []

    class FakeLib:
        @staticmethod
        def cuTensorMapEncodeTiled(out, *args):
            calls.append(args)
            import ctypes

            ctypes.memmove(out, bytes(range(128)), 128)
            return 0

    monkeypatch.setattr(tm.driver, "lib", lambda: FakeLib)
    monkeypatch.setattr(tm, "_CACHE", tm.OrderedDict())
    monkeypatch.setattr(tm, "_RAW", {})
    a = tm.encode_tiled_rowmajor("bfloat16", 0x7F0000000000, (1024, 4096), (4096, 1),
                                 (128, 64), swizzle=3)
    b = tm.encode_tiled_rowmajor("bfloat16", 0x7F0000000000, (1024, 4096), (4096, 1),
                                 (128, 64), swizzle=3)
    c = tm.encode_tiled(tm.data_type("bfloat16"), 0x7F0000000000, [4096, 1024], [8192],
                        [64, 128], None, 0, 3)  # same map, spelled innermost-first with lists
    assert a == b == c == bytes(range(128)) and len(calls) == 1
    (dt, rank, addr, *_rest) = calls[0]
    assert (dt, rank, addr) == (9, 2, 0x7F0000000000)
    tm.encode_tiled_rowmajor("bfloat16", 0x7F0000000000, (1024, 4096), (4096, 1), (64, 64),
                             swizzle=3)
    assert len(calls) == 2  # a different box is a different map
