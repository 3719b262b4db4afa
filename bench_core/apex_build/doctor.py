"""The Apex build doctor: each thing Apex's from-source build needs, checked, with a one-line fix for each failure.

Torch-free: torch's facts and Apex's state come from a Probe (collected in a fresh process); the toolchain facts
(nvcc, host compiler, ninja, disk) are read here with a few `--version` calls.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum

from bench_core.machine.probe import APEX_EXTENSIONS, Probe
from bench_core.machine.probe_collect import GENUINE_SUMMARY, nvcc_version

GIB = 1024 ** 3
# The narrowed build writes a copy of the Apex tree (tens of MB) and three extensions' objects (hundreds of MB);
# the full build's 11 extensions plus pip's wheel and copies peak at a few GB. Below FAIL a build is likely to die
# half-way with a confusing compiler error; below WARN a full build may.
DISK_FAIL_BYTES = 2 * GIB
DISK_WARN_BYTES = 5 * GIB

# Newest GCC major each CUDA release's nvcc accepts, as (cuda major, cuda minor, newest gcc major), oldest first.
# Source: NVIDIA's CUDA Installation Guide for Linux, "System Requirements" (supported compilers) table,
# https://docs.nvidia.com/cuda/cuda-installation-guide-linux/ and its per-release copies under
# https://docs.nvidia.com/cuda/archive/<version>/cuda-installation-guide-linux/. nvcc enforces it in
# crt/host_config.h ("gcc versions later than N are not supported!"), as reported for 12.1 (N=12), 12.4 (N=13)
# and 13.3 (N=15) in NVlabs/instant-ngp#1562 and cms-patatrack/pixeltrack-standalone#432. The 12.8 (14) and
# 13.0 (15) rows are from the guide's table but were not re-read when this was written: check them on a new CUDA.
MAX_GCC_FOR_CUDA = ((11, 4, 11), (12, 0, 12), (12, 4, 13), (12, 8, 14), (13, 0, 15))
MIN_GCC = 9  # torch's extension headers need C++17, which GCC 9 is the first to support fully


class Verdict(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Check:
    name: str
    verdict: Verdict
    message: str
    fix: str = ""
    blocks_build: bool = False  # a failure here makes `apex build` refuse to start

    def to_dict(self) -> dict:
        return {**asdict(self), "verdict": self.verdict.value}


@dataclass(frozen=True)
class Tool:
    """A program the build runs: where it is and the version it reports (None: not found or not parsed)."""
    path: str | None = None
    version: str | None = None
    kind: str = ""  # compilers only: gcc or clang


@dataclass(frozen=True)
class HostFacts:
    """What the build finds on this host outside Python: toolchain, architecture list, disk."""
    nvcc: Tool = field(default_factory=Tool)
    compiler: Tool = field(default_factory=Tool)
    compiler_env: str | None = None   # $CXX as set (a name that may not resolve)
    arch_list: str | None = None      # $TORCH_CUDA_ARCH_LIST as set
    ninja: str | None = None
    build_dir: str = ""
    free_disk_bytes: int | None = None


@dataclass(frozen=True)
class BuildEnvironment:
    """Everything the doctor judges. Tests build one directly: no torch, no GPU, no nvcc needed."""
    torch: str | None                          # torch.__version__, None when torch did not import
    torch_cuda: str | None                     # torch.version.cuda, None for a CPU build
    gpu_name: str | None
    gpu_capability: tuple[int, int] | None     # None: no GPU visible
    host: HostFacts
    probe: Probe                               # Apex's state, judged by Probe.apex_reason
    probe_error: str | None = None

    @classmethod
    def of(cls, probe: Probe, host: HostFacts) -> BuildEnvironment:
        return cls(torch=probe.torch, torch_cuda=probe.cuda_runtime, gpu_name=probe.gpu_name,
                   gpu_capability=probe.cuda.capability if probe.cuda.available else None, host=host,
                   probe=probe, probe_error=probe.error)


def _version_of(argv: list[str], pattern: str) -> tuple[str | None, str]:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)  # noqa: S603 (a tool found on PATH)
    except (OSError, subprocess.SubprocessError):
        return None, ""
    text = out.stdout or out.stderr
    first = text.strip().splitlines()[0] if text.strip() else ""
    found = re.findall(pattern, first)
    return (found[-1] if found else None), first


def find_compiler(environ: Mapping[str, str]) -> Tool:
    """The host compiler torch's extension build uses: $CXX, else c++, else g++."""
    names = [environ["CXX"]] if environ.get("CXX") else ["c++", "g++"]
    for name in names:
        path = shutil.which(name, path=environ.get("PATH"))
        if path:
            version, first = _version_of([path, "--version"], r"\b(\d+\.\d+(?:\.\d+)?)\b")
            return Tool(path, version, "clang" if "clang" in first.lower() else "gcc")
    return Tool()


def _free_bytes(path: str) -> int | None:
    probe_dir = os.path.abspath(path)
    while not os.path.isdir(probe_dir) and os.path.dirname(probe_dir) != probe_dir:
        probe_dir = os.path.dirname(probe_dir)  # the build dir may not exist yet: ask its nearest parent
    try:
        return shutil.disk_usage(probe_dir).free
    except OSError:
        return None


def host_facts(build_dir: str, environ: Mapping[str, str] | None = None) -> HostFacts:
    environ = os.environ if environ is None else environ
    nvcc = nvcc_version()  # the probe's lookup: PATH, then $CUDA_HOME/bin
    return HostFacts(nvcc=Tool(nvcc.get("path"), nvcc.get("version")), compiler=find_compiler(environ),
                     compiler_env=environ.get("CXX") or None, arch_list=environ.get("TORCH_CUDA_ARCH_LIST") or None,
                     ninja=shutil.which("ninja", path=environ.get("PATH")), build_dir=build_dir,
                     free_disk_bytes=_free_bytes(build_dir))


# ------------------------------------------------------------------------------------------------ the checks
def _major_minor(version: str | None) -> tuple[int, int] | None:
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def max_gcc_for(cuda: tuple[int, int]) -> int | None:
    """The newest GCC major this CUDA's nvcc accepts; None for a CUDA older than the table."""
    found = None
    for major, minor, gcc in MAX_GCC_FOR_CUDA:
        if (major, minor) <= cuda:
            found = gcc
    return found


def check_torch(env: BuildEnvironment) -> Check:
    if env.torch is None:
        return Check("torch", Verdict.FAIL, f"torch did not import: {env.probe_error or 'unknown error'}",
                     "install torch into this environment (make deps-app)", blocks_build=True)
    if not env.torch_cuda:
        return Check("torch", Verdict.FAIL, f"torch {env.torch} is a CPU build: Apex's CUDA extensions need a CUDA "
                     "build", "install a CUDA build of torch (pip install torch --index-url "
                     "https://download.pytorch.org/whl/cu130)", blocks_build=True)
    return Check("torch", Verdict.OK, f"torch {env.torch}, built with CUDA {env.torch_cuda}")


def check_gpu(env: BuildEnvironment) -> Check:
    if env.gpu_capability is not None:
        cap = ".".join(map(str, env.gpu_capability))
        return Check("GPU", Verdict.OK, f"{env.gpu_name} (compute capability {cap})")
    if env.host.arch_list:
        return Check("GPU", Verdict.WARN, f"no GPU visible: building for TORCH_CUDA_ARCH_LIST={env.host.arch_list}; "
                     "the smoke tests cannot run here", "run `python -m bench_core apex doctor` on the GPU machine")
    return Check("GPU", Verdict.FAIL, "no GPU visible and TORCH_CUDA_ARCH_LIST unset: the build cannot target an "
                 "architecture", "set TORCH_CUDA_ARCH_LIST to the target GPU's capability, e.g. "
                 "TORCH_CUDA_ARCH_LIST=9.0 for H100/H200", blocks_build=True)


def check_nvcc(env: BuildEnvironment) -> Check:
    nvcc, want = env.host.nvcc, env.torch_cuda
    if not nvcc.path:
        return Check("nvcc", Verdict.FAIL, "nvcc not found on PATH or in $CUDA_HOME/bin",
                     f"install the CUDA {want or 'matching'} toolkit and put its bin/ on PATH (or set CUDA_HOME)",
                     blocks_build=True)
    if not nvcc.version:
        return Check("nvcc", Verdict.WARN, f"{nvcc.path} reports no 'release X.Y' version",
                     "check `nvcc --version` by hand")
    if want and _major_minor(nvcc.version) != _major_minor(want):
        return Check("nvcc", Verdict.FAIL, f"nvcc {nvcc.version} ({nvcc.path}) != torch's CUDA {want}: Apex's "
                     "setup.py refuses to build", f"put the CUDA {want} toolkit's nvcc first on PATH (or set "
                     f"CUDA_HOME to it), or install a torch built for CUDA {nvcc.version}", blocks_build=True)
    if not want:
        return Check("nvcc", Verdict.OK, f"nvcc {nvcc.version} ({nvcc.path}); torch has no CUDA version to match")
    return Check("nvcc", Verdict.OK, f"nvcc {nvcc.version} ({nvcc.path}) matches torch's CUDA {want}")


def check_compiler(env: BuildEnvironment) -> Check:
    cc = env.host.compiler
    if not cc.path:
        named = f"$CXX={env.host.compiler_env} not found" if env.host.compiler_env else "no c++ or g++ on PATH"
        return Check("host compiler", Verdict.FAIL, f"no C++ compiler: {named}",
                     "install g++ (apt-get install g++) or set CXX to a C++ compiler", blocks_build=True)
    cuda = _major_minor(env.host.nvcc.version) or _major_minor(env.torch_cuda)
    version = _major_minor(cc.version)
    label = f"{cc.kind} {cc.version or '?'} ({cc.path})"
    if cc.kind != "gcc" or version is None:
        return Check("host compiler", Verdict.WARN, f"{label}: only GCC versions are checked against CUDA's table",
                     "if nvcc rejects it, install a supported g++ and set CXX and CC to it")
    if version[0] < MIN_GCC:
        return Check("host compiler", Verdict.FAIL, f"{label} is older than GCC {MIN_GCC}, the first with the C++17 "
                     "torch's headers need", f"install g++-{MIN_GCC} or newer and set CXX=g++-N CC=gcc-N",
                     blocks_build=True)
    if cuda is None:
        return Check("host compiler", Verdict.OK, f"{label} (no CUDA version to check it against)")
    newest = max_gcc_for(cuda)
    if newest is None:
        return Check("host compiler", Verdict.WARN, f"{label}: CUDA {cuda[0]}.{cuda[1]} is older than this "
                     "doctor's table", "use CUDA 11.4 or newer")
    if version[0] > newest:
        return Check("host compiler", Verdict.FAIL, f"{label} is newer than CUDA {cuda[0]}.{cuda[1]} supports "
                     f"(GCC <= {newest})", f"install g++-{newest} and set CXX=g++-{newest} CC=gcc-{newest}",
                     blocks_build=True)
    within = f" (CUDA {cuda[0]}.{cuda[1]} allows GCC <= {newest})"
    return Check("host compiler", Verdict.OK, f"{label}{within}")


def arch_entries(arch_list: str) -> list[str]:
    """TORCH_CUDA_ARCH_LIST's entries ('8.0;9.0+PTX', '8.0 9.0', '9.0a'), as written."""
    return [e for e in re.split(r"[;,\s]+", arch_list.strip()) if e]


def check_arch_list(env: BuildEnvironment) -> Check:
    cap = env.gpu_capability
    if not env.host.arch_list:
        if cap is None:  # check_gpu says what to do
            return Check("TORCH_CUDA_ARCH_LIST", Verdict.WARN, "unset, and no GPU to take it from",
                         "set TORCH_CUDA_ARCH_LIST, e.g. 9.0")
        return Check("TORCH_CUDA_ARCH_LIST", Verdict.OK, f"unset: the build targets this GPU's {cap[0]}.{cap[1]}")
    if cap is None:
        return Check("TORCH_CUDA_ARCH_LIST", Verdict.OK, f"{env.host.arch_list} (no GPU here to compare with)")
    wanted = f"{cap[0]}.{cap[1]}"
    bases = [re.sub(r"[a-z]$", "", e.split("+")[0]) for e in arch_entries(env.host.arch_list)]
    if wanted in bases:
        return Check("TORCH_CUDA_ARCH_LIST", Verdict.OK, f"{env.host.arch_list} covers this GPU's {wanted}")
    return Check("TORCH_CUDA_ARCH_LIST", Verdict.FAIL, f"{env.host.arch_list} does not include this GPU's {wanted}: "
                 "the kernels would fail with 'no kernel image'",
                 f"unset TORCH_CUDA_ARCH_LIST, or set it to {wanted}", blocks_build=True)


def check_ninja(env: BuildEnvironment) -> Check:
    if env.host.ninja:
        return Check("ninja", Verdict.OK, f"found ({env.host.ninja}): parallel compilation")
    return Check("ninja", Verdict.WARN, "not found: torch falls back to compiling one file at a time (much slower)",
                 "pip install ninja")


def check_disk(env: BuildEnvironment) -> Check:
    free = env.host.free_disk_bytes
    where = env.host.build_dir
    if free is None:
        return Check("disk", Verdict.WARN, f"could not read the free space at {where}", "check `df -h` by hand")
    text = f"{free / GIB:.1f} GiB free at {where}"
    if free < DISK_FAIL_BYTES:
        return Check("disk", Verdict.FAIL, f"{text}; the build needs at least {DISK_FAIL_BYTES / GIB:.0f} GiB",
                     "free disk space, or pass --build-dir on a larger disk", blocks_build=True)
    if free < DISK_WARN_BYTES:
        return Check("disk", Verdict.WARN, f"{text}; a full build may need {DISK_WARN_BYTES / GIB:.0f} GiB",
                     "free disk space, or pass --build-dir on a larger disk")
    return Check("disk", Verdict.OK, text)


def check_distribution(env: BuildEnvironment, after_build: bool = False) -> Check:
    apex = env.probe.apex
    dist = apex.distribution or {}
    if apex.status == "impostor":
        return Check("apex distribution", Verdict.FAIL, f"'{dist.get('name')}' {dist.get('version')} is not NVIDIA "
                     f"Apex (summary \"{dist.get('summary')}\")", "pip uninstall -y apex", blocks_build=True)
    if apex.status == "missing":
        return Check("apex distribution", Verdict.FAIL if after_build else Verdict.WARN,
                     "NVIDIA Apex is not installed", "make apex")
    return Check("apex distribution", Verdict.OK,
                 f"NVIDIA Apex {dist.get('version', '(no metadata)')} (\"{dist.get('summary', GENUINE_SUMMARY)}\")")


def check_extensions(env: BuildEnvironment) -> list[Check]:
    """After a build: which extensions import and pass the probe's smoke call (Probe.apex_reason judges)."""
    if env.probe.apex.status != "genuine":
        return []
    checks = []
    for ext in APEX_EXTENSIONS:
        reason = env.probe.apex_reason(ext)
        state = env.probe.apex.extensions.get(ext)
        if reason is not None:
            fix = ("rebuild against this torch: make apex" if "undefined symbol" in reason
                   else "rebuild for this GPU: make apex" if "smoke test" in reason else "make apex")
            checks.append(Check(ext, Verdict.FAIL, reason, fix))
        elif state is not None and state.smoke_ok:
            checks.append(Check(ext, Verdict.OK, "imports and passed its smoke test on this GPU"))
        else:
            checks.append(Check(ext, Verdict.WARN, "imports; no GPU here to smoke-test it",
                                "run `python -m bench_core apex doctor` on the GPU machine"))
    return checks


def target_arch(env: BuildEnvironment) -> str | None:
    """What the build compiles for: TORCH_CUDA_ARCH_LIST as the user set it, else this GPU's capability."""
    cap = env.gpu_capability
    return env.host.arch_list or (f"{cap[0]}.{cap[1]}" if cap else None)


def diagnose(env: BuildEnvironment, after_build: bool = False) -> list[Check]:
    checks = [check_torch(env), check_gpu(env), check_nvcc(env), check_compiler(env), check_arch_list(env),
              check_ninja(env), check_disk(env), check_distribution(env, after_build)]
    return checks + check_extensions(env)


def blocking(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.verdict is Verdict.FAIL and c.blocks_build]


ICON = {Verdict.OK: "ok", Verdict.WARN: "WARN", Verdict.FAIL: "FAIL"}


def render(checks: list[Check]) -> str:
    """The doctor as text: one line per check, its fix indented under each warning or failure."""
    width = max((len(c.name) for c in checks), default=0)
    lines = []
    for c in checks:
        lines.append(f"[{ICON[c.verdict]:>4}] {c.name:<{width}}  {c.message}")
        if c.verdict is not Verdict.OK and c.fix:
            lines.append(f"       {'':<{width}}  fix: {c.fix}")
    return "\n".join(lines)
