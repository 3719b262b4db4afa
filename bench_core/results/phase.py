"""Where a running stage's current process is, read from its timeline events: the live views' one source for it.

A compiled stage's first warm-up step is its compile (torch.compile traces and builds kernels there), shown as a
phase of its own with its estimate, never as "iteration 0/N".
"""
from __future__ import annotations

from enum import Enum

from bench_core.machine.stage_costs import StageCosts, compiles
from bench_core.results.records import StageResult, Status


class Phase(Enum):
    WAITING = "waiting"             # not started, or between two processes
    STARTING = "starting"           # `go` sent: building the model
    COMPILING = "compiling"         # a compiled stage's first step
    WARMING_UP = "warming up"
    TIMING = "timing"
    PROFILING = "profiling"
    DONE = "done"


def phase(stage: StageResult) -> Phase:
    if stage.finished:
        return Phase.DONE
    if stage.status != Status.RUNNING or not stage.timelines:
        return Phase.WAITING
    events = stage.timelines[-1]
    if "finished" in events or "started" not in events:
        return Phase.WAITING
    if "first_step" not in events:
        return Phase.COMPILING if compiles(stage) else Phase.WARMING_UP
    if "warmup" not in events:
        return Phase.WARMING_UP
    return Phase.TIMING if "memory" not in events else Phase.PROFILING


def compile_elapsed_s(stage: StageResult, now: float) -> float:
    """Seconds the current process has been compiling (0 outside the compile phase)."""
    return max(now - stage.timelines[-1]["started"], 0.0) if phase(stage) is Phase.COMPILING else 0.0


def compile_text(stage: StageResult, costs: StageCosts, now: float) -> str:
    """The compile phase in words: how long so far, against its estimate and where that estimate comes from."""
    elapsed = compile_elapsed_s(stage, now)
    how = "as measured on this machine" if costs.measured_compile else "assumed: not measured on this machine yet"
    over = " (longer than its estimate)" if elapsed > costs.compile_s else ""
    return f"compiling (torch.compile, first step): {elapsed:.0f} s of about {costs.compile_s:.0f} s, {how}{over}"
