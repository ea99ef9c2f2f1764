"""Fragments given by functions whose map is not expressible as modes (a FragmentMap): they
compare, answer their sizes and threads, and are rejected as a buffer's layout with the reason."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.layout import Fragment
from tilelang.layout.fragment_map import FragmentMap


def test_maps_outside_the_mode_family_compare():
    # one element per thread at local index i: slots left empty, not a register tile
    a = Fragment([32, 4], forward_thread_fn=lambda i, j: i * 4 + j, forward_index_fn=lambda i, j: i)
    b = Fragment([32, 4], forward_thread_fn=lambda i, j: i * 4 + j, forward_index_fn=lambda i, j: i)
    c = Fragment([32, 4], forward_thread_fn=lambda i, j: i * 4 + j, forward_index_fn=lambda i, j: j)
    assert isinstance(a, FragmentMap) and a.is_equal(b) and not a.is_equal(c)
    assert a.get_thread_size() == 128 and a.get_input_shape() == [32, 4]
    assert a.map_forward_thread([3, 2]) == 14 and a.indices[0, 3, 2] == 3
    swapped = Fragment([32, 4], forward_fn=lambda i, j: (j * 4 + i, i))
    assert not Fragment([32, 4], forward_fn=lambda i, j: (i * 4 + j, i)).is_equal(swapped)


def test_replicated_maps_compare_by_copies():
    four = Fragment([32, 4], forward_thread_fn=lambda i, j, rep: i * 4 + rep, replicate=4)
    two = Fragment([32, 4], forward_thread_fn=lambda i, j, rep: i * 4 + rep, replicate=2)
    assert not four.is_equal(two) and four.replication == 4
    again = Fragment([32, 4], forward_thread_fn=lambda i, j, rep: i * 4 + rep, replicate=4)
    assert four.is_equal(again)


def test_mode_fragments_stay_fragments():
    f = Fragment([32, 4], forward_thread_fn=lambda i, j: i * 4 + j)
    assert isinstance(f, Fragment) and f.is_equal(Fragment([32, 4],
                                                           forward_thread_fn=lambda x, y: x * 4 + y))
    assert not f.is_equal(Fragment([32, 4], forward_thread_fn=lambda i, j: j * 32 + i))
    with pytest.raises(ValueError, match="negative"):
        Fragment([4], forward_thread_fn=lambda i: i - 1)


def test_other_uses_name_the_reason():
    m = Fragment([8], forward_thread_fn=lambda i: i * 2, forward_index_fn=lambda i: 0)
    with pytest.raises(AttributeError, match="empty.*no buffer can take it"):
        m.coords(0, 0)


def test_annotate_layout_rejects_it_at_the_users_line():
    with pytest.raises(ValueError, match="cannot be a register layout here") as info:
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=32):
                frag = T.alloc_fragment((8,), "float32")
                T.annotate_layout({frag: T.Fragment(
                    [8], forward_thread_fn=lambda i: i * 2, forward_index_fn=lambda i: 0)})
                T.copy(A, frag)
                T.copy(frag, A)
        tilelang.compile(k, target="cpu")
    assert "test_fragment_map.py" in str(info.value)
