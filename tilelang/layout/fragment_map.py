"""Fragments given by functions that this compiler cannot lay out.

The reference's `Fragment(shape, forward_thread_fn=..., forward_index_fn=...)` (or
`forward_fn=`) is any map element -> (thread, local index). This compiler's `Fragment` holds
the maps that are a thread part plus a value part in mixed radix (layout/fragment.py), which
are the ones a register tile can have. A map outside that family (two elements in one slot,
slots left empty, a thread part that depends on the local index, ...) is still a well-defined
function: `FragmentMap` keeps it, enumerated, so that programs can compare such fragments
(`is_equal`) and ask for their sizes and the thread of an element, as the reference's programs
and tests do. It cannot be the layout of a buffer: `T.annotate_layout` rejects it, naming why.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FragmentMap"]


class FragmentMap:
    """An enumerated fragment map: for every copy `rep` and logical element, its thread and
    local index (`threads`, `indices`: int64 arrays of shape (replicate, *shape))."""

    def __init__(self, shape, threads, indices, reason: str, name=None):
        self.shape = tuple(shape)
        self.threads = np.asarray(threads).reshape((-1,) + self.shape)
        self.indices = np.asarray(indices).reshape((-1,) + self.shape)
        self.reason = reason
        self.name = name

    # ---- the reference's queries -------------------------------------------------------------
    @property
    def replication(self) -> int:
        """The number of copies of each element (the `replicate` it was built with)."""
        return self.threads.shape[0]

    def get_thread_size(self) -> int:
        return int(self.threads.max()) + 1 if self.threads.size else 1

    def get_input_shape(self):
        return list(self.shape)

    def map_forward_thread(self, indices, rep: int = 0) -> int:
        """The thread that holds logical element `indices` (copy `rep`)."""
        return int(self.threads[(rep,) + tuple(int(i) for i in indices)])

    def is_equal(self, other) -> bool:
        """The same map: same shape, copies, and thread and local index for every element."""
        return (isinstance(other, FragmentMap) and other.shape == self.shape
                and np.array_equal(other.threads, self.threads)
                and np.array_equal(other.indices, self.indices))

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise AttributeError(
            f"Fragment.{attr} is not available for this fragment ({self.reason}): this "
            "compiler keeps it only as a function (is_equal, get_thread_size, "
            "get_input_shape, map_forward_thread, replication); no buffer can take it "
            "as its layout")

    def __repr__(self):
        return (f"FragmentMap(shape={list(self.shape)}, threads={self.get_thread_size()}, "
                f"replicate={self.replication})")
