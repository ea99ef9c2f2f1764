"""Type checkers on a user's code, as a user gets them: after `pip install -e .`, pyright
(Pylance's engine) and mypy resolve `import tilelang`, and report on the seed documents'
annotation styles exactly what docs/lazy_jit.md ("Type checkers") says.

The package is reached the way an editable install reaches it: the wheel that setuptools builds
for `pip install -e .` from this checkout's pyproject.toml must hold a plain path entry (a .pth
naming the project directory), not an import hook, which no type checker follows. The checkers
run with a Python (a venv over the system's site-packages, for torch and numpy) whose only way
to `tilelang` is that path entry. pyright and mypy come with `pip install -e ".[test]"`
(pyright runs on the machine's Node.js); a test skips, saying which, only where one is
missing."""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
STYLES = HERE / "typing_seed_styles.py"
SAMPLE = HERE / "typing_sample.py"
# the file-level comments docs/lazy_jit.md gives for code in the reference's call style
QUIET = ('# pyright: reportInvalidTypeForm=false, reportRedeclaration=false\n'
         '# mypy: disable-error-code="valid-type"\n')


def _env():
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the checkers must find tilelang through the install alone
    env.pop("MYPYPATH", None)
    return env


def _editable_wheel(project: Path, out: Path) -> Path:
    """The wheel `pip install -e .` installs, built by setuptools (PEP 660) without network."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, project / name)
    (project / "tilelang").symlink_to(REPO / "tilelang", target_is_directory=True)
    code = ("import sys, setuptools.build_meta as b; "
            "print(b.build_editable(sys.argv[1]))")
    proc = subprocess.run([sys.executable, "-c", code, str(out)], cwd=project,
                          capture_output=True, text=True, env=_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out / proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python, project dir, the .pth lines, the wheel's file names)."""
    pytest.importorskip("setuptools.build_meta", reason="building the editable wheel needs "
                        "setuptools (pip install setuptools)")
    base = tmp_path_factory.mktemp("editable")
    project = base / "project"
    project.mkdir()
    (base / "wheel").mkdir()
    wheel = _editable_wheel(project, base / "wheel")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        pth = [n for n in names if n.endswith(".pth")]
        assert len(pth) == 1, names
        pth_text = z.read(pth[0]).decode()
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages",
                    str(venv)], check=True, env=_env())
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; "
                           "print(sysconfig.get_paths()['purelib'])"], capture_output=True,
                          text=True, check=True, env=_env()).stdout.strip()
    (Path(site) / pth[0]).write_text(pth_text)
    return python, project, pth_text.splitlines(), names


def test_editable_install_is_a_path_entry(installed):
    python, project, pth_lines, names = installed
    assert pth_lines == [str(project)], pth_lines  # a directory, not `import <hook>`
    assert not [n for n in names if "finder" in n], names
    where = subprocess.run([str(python), "-c", "import tilelang; print(tilelang.__file__)"],
                           capture_output=True, text=True, env=_env(), cwd=project.parent)
    assert where.returncode == 0, where.stderr
    assert where.stdout.strip() == str(project / "tilelang" / "__init__.py")


def _expected(text: str):
    """Counter of (line, checker, rule) from the `# expect:` comments."""
    out = collections.Counter()
    for n, line in enumerate(text.splitlines(), 1):
        m = re.search(r"# expect: (.*)$", line)
        if m:
            for item in m.group(1).split():
                checker, rule = item.split("=")
                out[(n, checker, rule)] += 1
    return out


def _pyright(python, folder: Path):
    """{file name: Counter of (line, "pyright", rule)} and {file name: messages} for the .py
    files of `folder`, from one run (pyright's start-up is most of its time)."""
    pytest.importorskip("pyright", reason="pyright is not installed (pip install -e '.[test]' "
                        "installs it)")
    if shutil.which("node") is None:
        pytest.skip("pyright needs Node.js: no `node` on PATH")
    proc = subprocess.run([sys.executable, "-m", "pyright", "--outputjson", "--pythonpath",
                           str(python), *sorted(map(str, folder.glob("*.py")))],
                          capture_output=True, text=True, cwd=folder, env=_env())
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"pyright did not report: {proc.stdout[-2000:]}"
                             f"{proc.stderr[-2000:]}") from None
    found = collections.defaultdict(collections.Counter)
    text = collections.defaultdict(str)
    for d in report["generalDiagnostics"]:
        if d["severity"] == "information":
            continue
        name, line = Path(d["file"]).name, d["range"]["start"]["line"] + 1
        found[name][(line, "pyright", d.get("rule", "?"))] += 1
        text[name] += f"{line}: {d['message']}\n"
    return found, text


def _mypy(python, folder: Path):
    """The same from one mypy run."""
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]' "
                        "installs it)")
    config = folder.parent / "mypy.ini"
    # torch's own sources are skipped only to keep the run short; tilelang is analysed
    config.write_text("[mypy]\nfollow_imports = silent\n\n[mypy-torch.*]\n"
                      "follow_imports = skip\n")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(config),
                           "--python-executable", str(python), "--show-error-codes",
                           "--no-error-summary", "--cache-dir", str(folder.parent / ".mypy"),
                           *sorted(map(str, folder.glob("*.py")))],
                          capture_output=True, text=True, cwd=folder, env=_env())
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    found = collections.defaultdict(collections.Counter)
    text = collections.defaultdict(str)
    for line in proc.stdout.splitlines():
        m = re.match(r"(.*?):(\d+): error: .*\[([\w-]+)\]$", line)
        if m:
            name = Path(m.group(1)).name
            found[name][(int(m.group(2)), "mypy", m.group(3))] += 1
            text[name] += line + "\n"
    return found, text


@pytest.fixture(scope="module")
def user_files(tmp_path_factory):
    """The seed styles as they are (styles.py), the same with the file-level comments of
    docs/lazy_jit.md (quiet.py), the subscript sample (sample.py) and a real error (bad.py)."""
    folder = tmp_path_factory.mktemp("user") / "src"
    folder.mkdir()
    (folder / "styles.py").write_text(STYLES.read_text())
    (folder / "quiet.py").write_text(QUIET + STYLES.read_text())
    (folder / "sample.py").write_text(SAMPLE.read_text())
    (folder / "bad.py").write_text("import tilelang.language as T\n\n"
                                   "def f(A: T.Tensor[[int], T.float16]) -> int:\n"
                                   "    return 'not an int'\n")
    return folder


@pytest.fixture(scope="module")
def pyright_report(installed, user_files):
    return _pyright(installed[0], user_files)


@pytest.fixture(scope="module")
def mypy_report(installed, user_files):
    return _mypy(installed[0], user_files)


@pytest.fixture(params=["pyright", "mypy"])
def report(request):
    """(checker, found, messages) of one checker over the user files."""
    found, text = request.getfixturevalue(request.param + "_report")
    return request.param, found, text


def test_seed_styles_get_the_documented_diagnostics(report):
    checker, found, text = report
    expected = collections.Counter({k: v for k, v in _expected(STYLES.read_text()).items()
                                    if k[1] == checker})
    assert expected, "the sample expects nothing of this checker"
    every = "".join(text.values())
    unresolved = [line for line in every.splitlines() if "tilelang" in line and
                  ("resolved" in line or "Cannot find" in line)]
    assert not unresolved, unresolved
    assert found["styles.py"] == expected, f"reported:\n{text['styles.py']}"


def test_file_level_comments_quiet_the_call_style(report):
    """With the two comments docs/lazy_jit.md gives, a file in the reference's style checks
    clean of the call-form and redeclaration reports, and of nothing else."""
    checker, found, text = report
    quieted = {"reportInvalidTypeForm", "reportRedeclaration", "valid-type"}
    expected = collections.Counter()
    for (line, who, rule), n in _expected(STYLES.read_text()).items():
        if who == checker and rule not in quieted:
            expected[(line + QUIET.count("\n"), who, rule)] += n
    assert found["quiet.py"] == expected, f"reported:\n{text['quiet.py']}"


def test_subscript_sample_checks_clean(report):
    """The type-checker-friendly spellings (typing_sample.py) draw no report at all."""
    checker, found, text = report
    assert not found["sample.py"], f"reported:\n{text['sample.py']}"


def test_real_errors_are_still_reported(report):
    checker, found, text = report
    rule = {"pyright": "reportReturnType", "mypy": "return-value"}[checker]
    assert found["bad.py"] == {(4, checker, rule): 1}, text["bad.py"]
