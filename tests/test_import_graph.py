"""The compiler's layering, checked on the import statements (module-level and inside
functions) of the installed `tilelang` package (docs/architecture.md, "Layers"):

* a pass (a module or package directly under tilelang/transform/, other than analysis/,
  pass_config.py and simplify.py) imports no other pass: what passes share lives in transform/analysis/;
* transform/analysis/ imports no pass;
* tilelang/ir/ imports nothing but itself and tilelang/errors.py;
* no module of transform/ or ir/ imports a private (`_name`) name of another module;
* every pass is named in engine/pipeline.py: a PASSES step or BEFORE_KERNELS, and the
  modules of a pass package are exactly its STEP_PARTS.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tilelang
import tilelang.engine.pipeline as P

PACKAGE = Path(tilelang.__file__).resolve().parent
IR_MAY_IMPORT = ("tilelang.ir", "tilelang.errors")
PASS_LIBRARY = ("tilelang.transform.analysis", "tilelang.transform.pass_config",
                "tilelang.transform.simplify")


def _modules(root: Path) -> dict:
    """Dotted name -> path of every module of the package at `root`."""
    out = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict) -> list:
    """(imported module, names taken from it, line) of every import in the module."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, (), node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            for a in node.names:
                if f"{target}.{a.name}" in modules:  # `from . import module`
                    out.append((f"{target}.{a.name}", (), node.lineno))
                else:
                    out.append((target, (a.name,), node.lineno))
    return out


def _within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _pass_of(name: str):
    """`tilelang.transform.<pass>` for a module of a pass, else None."""
    parts = name.split(".")
    if len(parts) < 3 or parts[:2] != ["tilelang", "transform"] or _within(name, PASS_LIBRARY):
        return None
    return ".".join(parts[:3])


def violations(root: Path) -> dict:
    """The layering rules the package at `root` breaks, by rule: lists of readable lines."""
    modules = _modules(root)
    found = {"pass imports pass": [], "analysis imports pass": [], "ir imports upward": [],
             "private name imported": []}
    for name, path in sorted(modules.items()):
        where = f"{path.relative_to(root.parent)}"
        for target, names, line in _imports(name, path, modules):
            if not target.startswith("tilelang"):
                continue
            src_pass, dst_pass = _pass_of(name), _pass_of(target)
            if src_pass and dst_pass and src_pass != dst_pass:
                found["pass imports pass"].append(f"{where}:{line}: {target}")
            if _within(name, ("tilelang.transform.analysis",)) and dst_pass:
                found["analysis imports pass"].append(f"{where}:{line}: {target}")
            if _within(name, ("tilelang.ir",)) and not _within(target, IR_MAY_IMPORT):
                found["ir imports upward"].append(f"{where}:{line}: {target}")
            if _within(name, ("tilelang.transform", "tilelang.ir")) and target != name:
                private = [n for n in names if n.startswith("_") and not n.startswith("__")]
                found["private name imported"] += [f"{where}:{line}: {target}.{n}"
                                                   for n in private]
    return found


def test_layering_rules_hold():
    broken = {rule: lines for rule, lines in violations(PACKAGE).items() if lines}
    assert not broken, "\n".join(f"{rule}:\n  " + "\n  ".join(lines)
                                 for rule, lines in broken.items())


def test_the_checker_finds_each_kind_of_violation(tmp_path):
    files = {
        "tilelang/__init__.py": "",
        "tilelang/errors.py": "",
        "tilelang/ir/__init__.py": "",
        "tilelang/ir/nodes.py": "from ..errors import located\n",
        "tilelang/ir/printer.py": "def f():\n    from ..arith import simplify\n",
        "tilelang/arith/__init__.py": "",
        "tilelang/transform/__init__.py": "",
        "tilelang/transform/pass_config.py": "",
        "tilelang/transform/analysis/__init__.py": "",
        "tilelang/transform/analysis/facts.py": "from ..lower import helper\n",
        "tilelang/transform/lower.py": "from .pass_config import KEY\nfrom .analysis import facts\n",
        "tilelang/transform/fuse.py": "def run():\n    from .lower import _private\n",
        "tilelang/transform/big/__init__.py": "from .part import piece\n",
        "tilelang/transform/big/part.py": "from ...ir.nodes import Node\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = violations(tmp_path / "tilelang")
    assert found["pass imports pass"] == ["tilelang/transform/fuse.py:2: tilelang.transform.lower"]
    assert found["analysis imports pass"] == [
        "tilelang/transform/analysis/facts.py:1: tilelang.transform.lower"]
    assert found["ir imports upward"] == ["tilelang/ir/printer.py:2: tilelang.arith"]
    assert found["private name imported"] == [
        "tilelang/transform/fuse.py:2: tilelang.transform.lower._private"]


def _step_module(step) -> str:
    return getattr(step, "transformation", step).__module__


def test_every_pass_is_named_in_the_pipeline():
    modules = _modules(PACKAGE)
    passes = {p for p in map(_pass_of, modules) if p}
    steps = {name: _step_module(step) for name, step in P.PASSES}
    named = set(steps.values()) | {f"tilelang.transform.{n}" for n, _ in P.BEFORE_KERNELS}
    assert passes - named == set(), "passes engine/pipeline.py does not name"
    assert named - passes == set(), "names in engine/pipeline.py that are no pass"
    for pkg in passes:
        parts = {m.rpartition(".")[2] for m in modules if m.startswith(pkg + ".")}
        step = next((n for n, m in steps.items() if m == pkg), None)
        assert parts == set(P.STEP_PARTS.get(step, ())), f"{pkg}: its parts vs STEP_PARTS"
    assert set(P.STEP_PARTS) <= set(steps)
