"""`tilelang.contrib.nvcc`: CUDA toolkit and compute-capability queries, as the reference
offers them to programs (`nvcc.get_target_compute_version()`, `parse_compute_version("9.0")`,
`have_tensorcore(...)`, `get_cuda_version()`, `compile_cuda(code, "cubin", arch=...)`, which
stops nvcc after TILELANG_COMPILE_TIMEOUT_SECONDS when that is set).

Compute versions are strings "major.minor" ("9.0"); a target is anything `tilelang.compile`
accepts (`"cuda -arch=sm_90a"`, a `Target`) or an object with an `arch` attribute / `.attrs`
dict. Without a target, the current GPU answers; without a GPU, a clear error.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import warnings

from ..env import env
from ..runtime import toolkit

__all__ = ["compile_cuda", "find_cuda_path", "get_cuda_version", "get_target_compute_version",
           "parse_compute_version", "get_target_arch", "have_fp16", "have_int8",
           "have_tensorcore", "have_cudagraph", "have_bf16", "have_fp8", "have_tma",
           "is_hopper", "have_pdl", "have_mbarrier", "get_nvcc_compiler",
           "get_nvcc_subprocess_env"]


def find_cuda_path() -> str:
    """The CUDA toolkit's root directory (CUDA_HOME, else where nvcc lives)."""
    nvcc = toolkit.nvcc_path()
    if nvcc is not None:
        return os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        return home
    raise RuntimeError("the CUDA toolkit was not found: set CUDA_HOME (e.g. "
                       "export CUDA_HOME=/usr/local/cuda)")


def get_nvcc_compiler() -> str:
    """The nvcc executable."""
    path = toolkit.nvcc_path()
    if path is None:
        raise RuntimeError("nvcc was not found: set CUDA_HOME or add it to PATH")
    return path


def get_cuda_version(cuda_path=None) -> tuple:
    """The toolkit's version as a tuple of ints, e.g. (13, 0, 88)."""
    nvcc = os.path.join(cuda_path, "bin", "nvcc") if cuda_path else get_nvcc_compiler()
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeError(f"cannot run {nvcc} --version: {exc}") from None
    m = re.search(r"\bV(\d+(?:\.\d+)+)", out)
    if m is None:
        raise RuntimeError(f"cannot read the CUDA version from `{nvcc} --version`")
    return tuple(int(f) for f in m.group(1).split("."))


def _arch_of(target) -> str | None:
    """"sm_90a"-style arch of a target given in any of the accepted forms, or None."""
    if target is None:
        return None
    arch = getattr(target, "arch", None)
    attrs = getattr(target, "attrs", None)
    if arch is None and isinstance(attrs, dict):
        arch = attrs.get("arch")
    if arch is None:
        m = re.search(r"sm_\d+[af]?", str(target))
        arch = m.group(0) if m else None
    return str(arch) if arch else None


def get_target_compute_version(target=None) -> str:
    """"major.minor" of the target's architecture, else of the current GPU."""
    arch = _arch_of(target)
    if arch is not None:
        digits = arch.split("_", 1)[1].rstrip("af")
        if len(digits) not in (2, 3) or not digits.isdigit():
            raise ValueError(f"unsupported arch {arch!r}")
        return f"{digits[:-1]}.{digits[-1]}"
    from ..jit.target import gpu_available

    if gpu_available():
        import torch

        major, minor = torch.cuda.get_device_capability()
        return f"{major}.{minor}"
    raise ValueError("no CUDA architecture was given and no GPU is visible; pass a target such "
                     "as 'cuda -arch=sm_90a'")


def parse_compute_version(compute_version) -> tuple[int, int]:
    """("9.0" -> (9, 0))."""
    parts = str(compute_version).split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError) as err:
        raise RuntimeError(f"cannot parse the compute version {compute_version!r} (expected "
                           "'major.minor')") from err


def get_target_arch(compute_version) -> str:
    """The arch suffix nvcc takes: "90a" for (9, 0), "80" for "8.0" (`a` from Hopper on)."""
    if isinstance(compute_version, str):
        major, minor = parse_compute_version(compute_version)
    else:
        major, minor = compute_version
    return f"{major * 10 + minor}" + ("a" if major >= 9 else "")


def have_fp16(compute_version) -> bool:
    major, minor = parse_compute_version(compute_version)
    return (major == 5 and minor >= 3) or major >= 6


def have_int8(compute_version) -> bool:
    return parse_compute_version(compute_version)[0] >= 6


def have_tensorcore(compute_version=None, target=None) -> bool:
    """Tensor cores (sm_70+) on the given compute version, else the target's, else the GPU's."""
    if compute_version is None:
        try:
            compute_version = get_target_compute_version(target)
        except ValueError:
            warnings.warn("tensor cores are reported absent: no CUDA architecture was given "
                          "and no GPU is visible", stacklevel=2)
            return False
    return parse_compute_version(compute_version)[0] >= 7


def have_cudagraph() -> bool:
    try:
        return get_cuda_version() >= (10, 0)
    except RuntimeError:
        return False


def have_bf16(compute_version) -> bool:
    return parse_compute_version(compute_version)[0] >= 8


def have_fp8(compute_version) -> bool:
    major, minor = parse_compute_version(compute_version)
    return (major == 8 and minor >= 9) or major >= 9


def _target_version(target):
    if target is not None and not str(target).lower().startswith(("cuda", "nvidia", "sm_")) \
            and _arch_of(target) is None:
        return None
    return parse_compute_version(get_target_compute_version(target))


def have_tma(target) -> bool:
    v = _target_version(target)
    return v is not None and v[0] >= 9


def is_hopper(target) -> bool:
    return _target_version(target) == (9, 0)


def have_pdl(target) -> bool:
    v = _target_version(target)
    return v is not None and v[0] >= 9


def have_mbarrier(target) -> bool:
    v = _target_version(target)
    return v is not None and v[0] >= 9


def compile_cuda(code: str, target_format: str = "ptx", arch=None, options=None,
                 path_target=None, verbose: bool = False) -> bytes:
    """Compile CUDA source with nvcc to `target_format` ("ptx", "cubin" or "fatbin") for
    `arch` ("sm_90a", or "90a"; default: the current GPU); returns the bytes (also written to
    `path_target` when given). Includes this package's headers (`tl.cuh`)."""
    if target_format not in ("ptx", "cubin", "fatbin"):
        raise ValueError(f"target_format must be ptx, cubin or fatbin, got {target_format!r}")
    if arch is None:
        arch = "sm_" + get_target_arch(get_target_compute_version())
    arch = str(arch) if str(arch).startswith(("sm_", "compute_")) else f"sm_{arch}"
    opts = [f"--{target_format}", f"-arch={arch}", "-std=c++17", "-O3"]
    opts += [f"-I{d}" for d in toolkit.include_dirs()]
    if isinstance(options, str):
        opts.append(options)
    elif options:
        opts += list(options)
    with tempfile.TemporaryDirectory(prefix="tilelang-contrib-nvcc-") as d:
        src = os.path.join(d, "code.cu")
        out = path_target or os.path.join(d, f"code.{target_format}")
        with open(src, "w") as f:
            f.write(code)
        cmd = [get_nvcc_compiler(), *opts, "-o", out, src]
        if verbose:
            print(" ".join(cmd))
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=get_nvcc_subprocess_env())
        timeout = _get_compile_timeout_seconds()
        try:
            log, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            try:
                log, _ = proc.communicate()  # reap it
            except Exception:  # noqa: BLE001 - what it printed is best effort
                log = exc.output
            raise RuntimeError(
                f"NVCC compilation timed out after {timeout:g} seconds "
                f"(TILELANG_COMPILE_TIMEOUT_SECONDS).\nCommand: {' '.join(cmd)}\n"
                f"Source:\n{code}\nOutput:\n{_text(log)}") from exc
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc failed ({' '.join(cmd)}):\n{_text(log)}")
        with open(out, "rb") as f:
            return f.read()


def get_nvcc_subprocess_env() -> dict | None:
    """The environment of nvcc's process (None: this process's)."""
    return None


def _get_compile_timeout_seconds() -> float | None:
    return env.get_compile_timeout_seconds()


def _text(output) -> str:
    if output is None:
        return ""
    return output.decode(errors="replace") if isinstance(output, bytes) else str(output)
