"""Torch's CUDA facts and Apex's state (the probe's own checks and smoke calls), in a fresh process.

`python -m bench_core.apex_build.facts` prints them as JSON in the probe's format; the parent reads them as a Probe.
Lighter than the full probe (no ceilings, no dtype checks), so the doctor answers in seconds before and after a build.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from bench_core.config.environment import child_env
from bench_core.machine.probe import FAILED_PROBE, Probe
from bench_core.machine.probe_collect import print_collected

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def collect() -> dict:
    try:
        import torch
    except Exception as exc:  # the doctor reports it as its first check
        return {**FAILED_PROBE, "error": f"{type(exc).__name__}: {exc}"}
    from bench_core.machine.probe_collect import _cuda, _guard, nvcc_version, probe_apex
    cuda = _guard(_cuda, torch)
    return {"torch": torch.__version__, "cuda_runtime": torch.version.cuda, "cuda": cuda, "nvcc": nvcc_version(),
            "apex": _guard(probe_apex, torch, bool(cuda.get("available")))}


def probe_in_fresh_process(python: str = sys.executable, extra_path: str | None = None,
                           timeout: float = 300.0) -> Probe:
    """The facts of `python`'s environment (plus `extra_path`, e.g. a --target dir, first on sys.path)."""
    paths = [p for p in (extra_path, PROJECT_ROOT, os.environ.get("PYTHONPATH")) if p]
    try:
        proc = subprocess.run([python, "-m", "bench_core.apex_build.facts"], capture_output=True,  # noqa: S603
                              text=True, timeout=timeout, env=child_env(None, PYTHONPATH=os.pathsep.join(paths)))
        lines = proc.stdout.strip().splitlines()
        if not lines:
            raise RuntimeError(f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
        return Probe.from_dict(json.loads(lines[-1]))
    except Exception as exc:  # reported by the doctor's torch check, never a crash
        return Probe.from_dict({**FAILED_PROBE, "error": f"facts probe failed: {type(exc).__name__}: {exc}"})


def main() -> int:
    return print_collected(collect)


if __name__ == "__main__":
    sys.exit(main())
