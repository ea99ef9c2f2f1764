"""The reference's MFMA emitters: absent here (see tilelang/rocm/__init__.py)."""

from .. import _ABSENT

raise ImportError(_ABSENT)
