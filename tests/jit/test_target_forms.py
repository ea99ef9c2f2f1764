"""The forms of `target=` a program may give: strings and the reference's dictionaries."""

import pytest

from tilelang.jit.target import Target, parse_target


@pytest.mark.parametrize("spec,want", [
    ({"kind": "cuda", "arch": "sm_75"}, Target("cuda", "sm_75")),
    ({"kind": "cuda", "arch": "sm_90a"}, Target("cuda", "sm_90a")),
    ({"kind": "cuda", "arch": "SM_120"}, Target("cuda", "sm_120")),
    ({"kind": "cpu"}, Target("cpu")),
    ({"kind": "c"}, Target("cpu")),
    ("cuda -arch=sm_80", Target("cuda", "sm_80")),
])
def test_accepted_forms(spec, want):
    assert parse_target(spec) == want


@pytest.mark.parametrize("spec,match", [
    ({"arch": "sm_80"}, "needs a 'kind'"),
    ({"kind": "cuda", "arch": "80"}, "'arch' must look like"),
    ({"kind": "hip"}, "not supported"),
    ({"kind": "cutedsl", "arch": "sm_90"}, "unknown target"),
])
def test_rejected_forms(spec, match):
    with pytest.raises(ValueError, match=match):
        parse_target(spec)
