"""The reference's ways of naming a target and pass configs: target dicts, `tvm.target.Target`
(also as a `with` context), `sm_90` meaning Hopper's `sm_90a`, `PassContext(config=...)`, and
`tilelang.lower` / `tilelang.engine.lower.lower` returning source with `.kernel_source`."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.jit.target import parse_target


def _exp_kernel():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            B[tx] = T.exp(A[tx])
    return k


def test_target_dicts_and_tvm_targets():
    import tvm

    assert str(parse_target({"kind": "cuda", "arch": "sm_80"})) == "cuda -arch=sm_80"
    assert str(parse_target(tvm.target.Target({"kind": "cuda", "arch": "sm_89"}))) == \
        "cuda -arch=sm_89"
    assert str(parse_target(tvm.target.Target("cuda -arch=sm_80"))) == "cuda -arch=sm_80"
    with pytest.raises(ValueError, match="needs a 'kind'"):
        parse_target({"arch": "sm_80"})
    with pytest.raises(ValueError, match="unknown keys: \\['bogus'\\]"):
        parse_target({"kind": "cuda", "bogus": 1})


def test_sm90_means_sm90a():
    assert str(parse_target("cuda -arch=sm_90")) == "cuda -arch=sm_90a"
    assert str(parse_target({"kind": "cuda", "arch": "sm_90"})) == "cuda -arch=sm_90a"
    src = tilelang.lower(_exp_kernel(), target={"kind": "cuda", "arch": "sm_90"})
    assert "for sm_90a" in src


def test_scoped_target_is_the_auto_target():
    import tvm

    with tvm.target.Target({"kind": "cuda", "arch": "sm_80"}) as t:
        assert tvm.target.Target.current() is t
        assert str(parse_target("auto")) == "cuda -arch=sm_80"
        src = tilelang.lower(_exp_kernel())
    assert "for sm_80" in src
    assert tvm.target.Target.current() is None


def test_lower_result_is_source_with_kernel_source():
    from tilelang.engine.lower import lower

    src = tilelang.lower(_exp_kernel(), target="cuda -arch=sm_90a")
    assert isinstance(src, str) and src.kernel_source == src and "__global__" in src
    art = lower(_exp_kernel(), target={"kind": "cuda", "arch": "sm_80"},
                enable_device_compile=False)
    assert "__global__" in art.kernel_source
    with pytest.raises(AttributeError, match="no host_mod"):
        art.host_mod  # noqa: B018


def test_pass_context_configs_apply_inside_the_block():
    import tvm

    plain = tilelang.lower(_exp_kernel(), target="cuda -arch=sm_90a")
    with tvm.transform.PassContext(config={"tl.enable_fast_math": True}):
        fast = tilelang.lower(_exp_kernel(), target="cuda -arch=sm_90a")
        # the call's own configs override the context's
        overridden = tilelang.lower(_exp_kernel(), target="cuda -arch=sm_90a",
                                    pass_configs={"tl.enable_fast_math": False})
    after = tilelang.lower(_exp_kernel(), target="cuda -arch=sm_90a")
    assert "tl::fast_exp(" not in plain and "tl::fast_exp(" in fast
    assert "tl::fast_exp(" not in overridden and "tl::fast_exp(" not in after
    assert tilelang.transform.PassContext is tvm.transform.PassContext


def test_tvm_errors_name_the_compilers_rejections():
    import tvm
    from tilelang.errors import KernelError

    assert tvm.error.InternalError is KernelError and tvm.error.TVMError is KernelError
    with pytest.raises(tvm.error.InternalError):
        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=1):
                A[0, 0] = 1.0
