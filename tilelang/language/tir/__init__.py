"""`tilelang.language.tir`: the reference's module path of its TIR-level operators; what
programs import from it (`tilelang.language.tir.ir`) is provided here."""
