"""plot_layout writes PNG/SVG for fragments and shared layouts (matplotlib is optional)."""

import pytest

import tilelang.layout as L
import tilelang.tools

matplotlib = pytest.importorskip("matplotlib")


@pytest.mark.parametrize("obj", [L.mma_accumulator(16, 16, 1, 1), L.swizzled((8, 64), 16),
                                 L.elementwise_fragment((6, 3), 128),  # guarded + replicated
                                 L.mma_accumulator(64, 64, 2, 2).project([0])])
@pytest.mark.parametrize("ext", ["png", "svg"])
def test_plot_writes_file(tmp_path, obj, ext):
    path = tmp_path / f"layout.{ext}"
    assert tilelang.tools.plot_layout(obj, path, dpi=40) == path
    data = path.read_bytes()
    assert len(data) > 1000
    assert data.startswith(b"\x89PNG") if ext == "png" else b"<svg" in data[:2000]


def test_plot_rejects_other_objects(tmp_path):
    with pytest.raises(TypeError, match="Fragment or a Layout"):
        L.plot_layout(object(), tmp_path / "x.png")
