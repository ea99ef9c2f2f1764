"""Progress bars (par_compile, the autotuner) in a Jupyter kernel without ipywidgets: the text
bar, without tqdm.auto's "IProgress not found" warning. Run in a fresh process that looks like
a Jupyter kernel to tqdm and cannot import ipywidgets."""

from __future__ import annotations

import subprocess
import sys

NOTEBOOK_WITHOUT_WIDGETS = """
import sys, types
# what tqdm looks at to tell a Jupyter kernel (IPython 8 / ipykernel 6 and older tqdm alike)
class ZMQInteractiveShell:
    config = {"IPKernelApp": {}}
ipython = types.ModuleType("IPython")
ipython.get_ipython = ZMQInteractiveShell
sys.modules["IPython"] = ipython
sys.modules["ipykernel.zmqshell"] = types.ModuleType("ipykernel.zmqshell")
sys.modules["ipywidgets"] = None  # not installed
"""


def _run(code):
    return subprocess.run([sys.executable, "-c", NOTEBOOK_WITHOUT_WIDGETS + code],
                          capture_output=True, text=True)


def test_tqdm_auto_alone_warns_there():
    """The situation is real: tqdm.auto itself warns in such a kernel."""
    proc = _run("import tqdm.auto\n")
    assert proc.returncode == 0 and "IProgress not found" in proc.stderr, proc.stderr


def test_progress_bars_use_the_text_bar_there():
    proc = _run("""
from tqdm.std import tqdm
from tilelang.jit.parallel import _progress, progress_bar_class
assert progress_bar_class() is tqdm
assert list(_progress(range(3), "Compiling", 3)) == [0, 1, 2]
from tilelang.autotuner import tuner
tuner._write("[autotune] done")
print("ok")
""")
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
    assert "IProgress" not in proc.stderr and "[autotune] done" in proc.stdout
