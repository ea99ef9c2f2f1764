"""docs/language.md is generated from the T namespace and must stay in step with it; every
public operation documents itself."""

from pathlib import Path

from tilelang.tools import language_reference

DOC = Path(__file__).resolve().parents[2] / "docs" / "language.md"


def test_every_public_operation_has_a_docstring():
    assert language_reference.undocumented() == []


def test_docs_language_md_is_current():
    assert DOC.read_text() == language_reference.render(), (
        "docs/language.md is stale: python -m tilelang.tools.language_reference > docs/language.md")


def test_reference_lists_core_operations_with_signatures():
    text = language_reference.render()
    for needle in ("T.copy(src, dst", "T.gemm(A, B, C", "T.Pipelined(", "T.alloc_shared(",
                   "T.reduce_max(src, dst", "T.ws(", "T.serial`** — alias of `T.Serial`"):
        assert needle in text, needle
