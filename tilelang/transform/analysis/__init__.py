"""What the passes know about the IR, shared: pass modules (tilelang/transform/*.py) import
from here and from tilelang/ir, never from each other (tests/test_import_graph.py)."""
