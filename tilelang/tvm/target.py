"""`tvm.target` for reference programs: `Target("cuda")`, `Target({"kind": "cuda", "arch":
"sm_90"})`, `with target:`. A Target here names what `tilelang.compile` / `tilelang.lower`
accept as `target=` (it converts to the string "cuda -arch=sm_90"); entering it makes it the
target of calls that pass none (`target="auto"`)."""

from __future__ import annotations

__all__ = ["Target"]


class _Kind:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


class Target:
    """A compilation target: `kind` ("cuda" or "c"/"llvm" for the host) and, for CUDA, `arch`.
    `host` is accepted (the host side is Python here)."""

    _stack: list = []

    def __init__(self, target, host=None):
        if isinstance(target, Target):
            self.kind, self.arch = target.kind, target.arch
        elif isinstance(target, dict):
            self.kind = _Kind(str(target.get("kind", "cuda")))
            self.arch = target.get("arch")
        else:
            words = str(target).split()
            self.kind = _Kind(words[0] if words else "cuda")
            self.arch = None
            for w in words[1:]:
                key, _, value = w.lstrip("-").partition("=")
                if key in ("arch", "mcpu"):
                    self.arch = value
        self.host = host
        self.attrs = {"arch": self.arch} if self.arch else {}
        self.keys = [self.kind.name, "gpu"] if self.kind.name == "cuda" else [self.kind.name]

    def __str__(self):
        if self.kind.name == "cuda" and self.arch:
            return f"cuda -arch={self.arch}"
        return self.kind.name

    def __repr__(self):
        return f"Target({str(self)!r})"

    def __enter__(self):
        Target._stack.append(self)
        return self

    def __exit__(self, *exc):
        Target._stack.remove(self)
        return False

    @staticmethod
    def current(allow_none=True):
        if Target._stack:
            return Target._stack[-1]
        if allow_none:
            return None
        raise ValueError("no target is set: use `with tvm.target.Target(...)`")
