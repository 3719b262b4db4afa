"""Build NVIDIA Apex from source into this interpreter's environment: only the extensions the benchmark loads.

The user's checkout is never edited: it is copied to a staging folder, where upstream's setup.py is renamed
setup_upstream.py and a small shim setup.py runs it with `setuptools.setup` wrapped to keep only the named
ext_modules. A wrapper, not a patch of upstream's text, so it survives edits to setup.py that keep its
`setup(ext_modules=...)` call; where that call or the extension names are not found, the full upstream build runs.
"""
from __future__ import annotations

import os
import queue
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from bench_core.config.bench_config import ConfigError

APEX_REPO = "https://github.com/NVIDIA/apex"
PINNED_COMMIT = "6424da3b"  # the revision docs/APEX.md and the team notes describe
BENCH_EXTENSIONS = ("apex_C", "amp_C", "fused_layer_norm_cuda")  # FusedAdam, Fused{Layer,RMS}Norm, flatten
NVCC_THREADS = "2"       # nvcc --threads per compile job; jobs already run in parallel (APEX_PARALLEL_BUILD)
HEARTBEAT_S = 15.0       # a line at least this often while the compiler is silent
UPSTREAM_NAME = "setup_upstream.py"
NARROW_MARK = "bench_core apex narrowing:"


class ApexBuildError(Exception):
    """A build step failed for a reason outside the user's input (network, compiler): exit 1, one clear message."""


@dataclass(frozen=True)
class BuildPlan:
    source: str                               # the user's checkout: read, never written
    stage_dir: str                            # the copy pip builds
    extensions: tuple[str, ...] | None        # None: every extension (upstream's full build)
    env: Mapping[str, str]                    # what the build adds to the environment
    argv: tuple[str, ...]
    target: str | None = None
    fallback_reason: str | None = None        # why the narrowing was not applied

    def command_line(self) -> str:
        assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return f"(cd {shlex.quote(self.stage_dir)} && {assigns} {shlex.join(self.argv)})"


@dataclass(frozen=True)
class BuildOutcome:
    returncode: int
    elapsed_s: float
    log_path: str
    tail: tuple[str, ...] = field(default_factory=tuple)  # the log's last lines, for a failure


def default_build_dir(environ: Mapping[str, str]) -> str:
    from bench_core.machine.cache import cache_dir
    return environ.get("APEX_BUILD_DIR") or os.path.join(cache_dir(), "apex-build")


# ------------------------------------------------------------------------------------------------ source
def check_source(path: str, field_name: str = "src") -> str:
    full = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(os.path.join(full, "setup.py")):
        raise ConfigError(field_name, path, "must be an NVIDIA/apex checkout (a folder with setup.py)")
    return full


def clone_hint() -> str:
    return (f"without network access, provide a checkout: on a machine with access run `git clone {APEX_REPO} apex "
            f"&& git -C apex checkout {PINNED_COMMIT}`, copy the folder here, then `APEX_SRC=/path/to/apex make "
            "apex` (or `python -m bench_core apex build --src /path/to/apex`)")


def clone_pinned(dest: str, run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> str:
    """NVIDIA/apex at PINNED_COMMIT into `dest` (kept, so a second build reuses it)."""
    if os.path.isfile(os.path.join(dest, "setup.py")):
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    steps = (["git", "clone", "--filter=blob:none", APEX_REPO, dest], ["git", "-C", dest, "checkout", PINNED_COMMIT])
    for argv in steps:
        try:
            done = run(argv, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as exc:
            raise ApexBuildError(f"could not clone {APEX_REPO} ({type(exc).__name__}: {exc}); {clone_hint()}") from None
        if done.returncode != 0:
            last = (done.stderr or done.stdout or "").strip().splitlines()[-1:] or ["no output"]
            shutil.rmtree(dest, ignore_errors=True)
            raise ApexBuildError(f"could not clone {APEX_REPO} at {PINNED_COMMIT} (`{' '.join(argv[:3])}` exited "
                                 f"{done.returncode}: {last[0]}); {clone_hint()}")
    return dest


def resolve_source(src: str | None, environ: Mapping[str, str], build_dir: str,
                   run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> str:
    """--src, else $APEX_SRC, else a clone of the pinned commit."""
    if src:
        return check_source(src, "src")
    if environ.get("APEX_SRC"):
        return check_source(environ["APEX_SRC"], "APEX_SRC")
    return clone_pinned(os.path.join(build_dir, "apex-src"), run)


# ------------------------------------------------------------------------------------------------ narrowing
def narrowing_problem(setup_text: str, names: tuple[str, ...] = BENCH_EXTENSIONS) -> str | None:
    """None when the shim can filter this setup.py's ext_modules by name; else why not."""
    missing = [n for n in names if not re.search(rf"""['"]{re.escape(n)}['"]""", setup_text)]
    if missing:
        return f"upstream setup.py defines no extension named {', '.join(missing)}"
    if not re.search(r"from\s+setuptools\s+import\s[^\n]*\bsetup\b|\bsetuptools\.setup\s*\(", setup_text):
        return "upstream setup.py does not call setuptools.setup (structure not recognised)"
    if not re.search(r"\bext_modules\s*=", setup_text):
        return "upstream setup.py passes no ext_modules= to setup (structure not recognised)"
    return None


SHIM = '''\
# Written by bench_core.apex_build (a staging copy; the checkout is untouched): runs upstream's setup.py with
# setuptools.setup wrapped to keep only the extensions the benchmark loads.
import os
import sys

import setuptools

KEEP = {keep!r}
_upstream_setup = setuptools.setup


def _narrowed_setup(*args, **kwargs):
    found = [e.name for e in kwargs.get("ext_modules") or []]
    missing = [name for name in KEEP if name not in found]
    if missing:
        sys.exit("{mark} upstream setup.py built no " + ", ".join(missing) + " (found: " + ", ".join(found)
                 + "); run `python -m bench_core apex build --full`")
    kwargs["ext_modules"] = [e for e in kwargs["ext_modules"] if e.name in KEEP]
    print("{mark} building " + ", ".join(KEEP) + " of " + str(len(found)) + " extensions", file=sys.stderr)
    return _upstream_setup(*args, **kwargs)


setuptools.setup = _narrowed_setup
_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "{upstream}")
with open(_path) as _fh:
    _code = compile(_fh.read(), _path, "exec")
exec(_code, {{"__name__": "__main__", "__file__": _path, "__builtins__": __builtins__}})
'''


def shim_text(names: tuple[str, ...]) -> str:
    return SHIM.format(keep=list(names), mark=NARROW_MARK, upstream=UPSTREAM_NAME)


def plan_build(source: str, build_dir: str, arch_list: str, full: bool = False, target: str | None = None,
               environ: Mapping[str, str] | None = None, python: str = sys.executable,
               cpus: int | None = None) -> BuildPlan:
    """What to build and how, for a checkout and this GPU's architecture list (nothing is run)."""
    environ = os.environ if environ is None else environ
    with open(os.path.join(source, "setup.py")) as fh:
        setup_text = fh.read()
    fallback = None if full else narrowing_problem(setup_text)
    extensions = None if full or fallback else BENCH_EXTENSIONS
    env = {"APEX_CPP_EXT": "1", "APEX_CUDA_EXT": "1", "TORCH_CUDA_ARCH_LIST": arch_list,
           "APEX_PARALLEL_BUILD": environ.get("APEX_PARALLEL_BUILD") or str(cpus or os.cpu_count() or 1),
           "NVCC_APPEND_FLAGS": environ.get("NVCC_APPEND_FLAGS") or f"--threads {NVCC_THREADS}"}
    argv = [python, "-m", "pip", "install", "-v", "--no-build-isolation", "--no-deps"]
    if "APEX_CUDA_EXT" not in setup_text and "--cuda_ext" in setup_text:  # an Apex older than the env variables
        argv += ["--config-settings", "--build-option=--cpp_ext", "--config-settings", "--build-option=--cuda_ext"]
    if target:
        argv += ["--target", os.path.abspath(target), "--upgrade"]  # --upgrade: replace an earlier build there
    stage = os.path.join(build_dir, "stage")
    return BuildPlan(source=source, stage_dir=stage, extensions=extensions, env=env, argv=(*argv, stage),
                     target=target, fallback_reason=fallback)


def stage_source(plan: BuildPlan) -> None:
    """Copy the checkout to the staging folder (keeping its build/ between runs, for ninja) and write the shim."""
    os.makedirs(plan.stage_dir, exist_ok=True)
    for name in os.listdir(plan.stage_dir):
        if name != "build":
            path = os.path.join(plan.stage_dir, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
    shutil.copytree(plan.source, plan.stage_dir, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__"))
    if os.path.isdir(os.path.join(plan.source, ".git")):  # version helpers may ask git; never copied, only linked
        os.symlink(os.path.join(plan.source, ".git"), os.path.join(plan.stage_dir, ".git"))
    if plan.extensions is not None:
        os.replace(os.path.join(plan.stage_dir, "setup.py"), os.path.join(plan.stage_dir, UPSTREAM_NAME))
        with open(os.path.join(plan.stage_dir, "setup.py"), "w") as fh:
            fh.write(shim_text(plan.extensions))


# ------------------------------------------------------------------------------------------------ running
_BUILDING = re.compile(r"building '([\w.]+)' extension")
_NINJA = re.compile(r"^\s*\[(\d+)/(\d+)\]\s")
_SOURCE = re.compile(r"\s-c\s+'?([^\s']+\.(?:cu|cpp|c))\b")  # the file a compile command compiles


def stage_line(line: str) -> str | None:
    """The build's progress in one short line, for the lines that mark a stage; None for the rest."""
    if match := _BUILDING.search(line):
        return f"compiling {match.group(1)}"
    if match := _NINJA.search(line):
        source = _SOURCE.search(line)
        return f"[{match.group(1)}/{match.group(2)}] {os.path.basename(source.group(1)) if source else 'compiling'}"
    stripped = line.strip()
    if stripped.startswith(NARROW_MARK) or stripped.startswith("Successfully installed"):
        return stripped
    if len(stripped) < 400 and re.search(r"(^|: )(fatal )?error\b", stripped, re.IGNORECASE):  # not a command line
        return stripped[:200]
    return None


def run_build(plan: BuildPlan, log_path: str, say: Callable[[str], None] = print,
              environ: Mapping[str, str] | None = None, heartbeat_s: float = HEARTBEAT_S) -> BuildOutcome:
    """Run the plan's pip command, echoing stage lines and a heartbeat; the full output goes to `log_path`."""
    env = {**(os.environ if environ is None else environ), **plan.env}
    start = time.monotonic()
    lines: queue.Queue[str | None] = queue.Queue()
    tail: list[str] = []
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(list(plan.argv), cwd=plan.stage_dir, env=env, stdout=subprocess.PIPE,  # noqa: S603
                                stderr=subprocess.STDOUT, text=True, bufsize=1)
        assert proc.stdout is not None  # noqa: S101 (stdout=PIPE)

        def pump() -> None:
            for raw in proc.stdout:  # type: ignore[union-attr]
                lines.put(raw)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        last_said, last_stage = time.monotonic(), "starting pip"
        while True:
            try:
                raw = lines.get(timeout=heartbeat_s / 3)
            except queue.Empty:
                raw = ""
            if raw is None:
                break
            elapsed = time.monotonic() - start
            if raw:
                log.write(raw)
                tail = (tail + [raw.rstrip()])[-20:]
                if (stage := stage_line(raw)) is not None and stage != last_stage:  # pip runs setup.py twice
                    last_stage = stage
                    say(f"[{elapsed:5.0f} s] {stage}")
                    last_said = time.monotonic()
                    continue
            if time.monotonic() - last_said >= heartbeat_s:
                say(f"[{elapsed:5.0f} s] still building (last: {last_stage})")
                last_said = time.monotonic()
        returncode = proc.wait()
    return BuildOutcome(returncode, time.monotonic() - start, log_path, tuple(tail))
