"""Where a running stage's current process is, read from its timeline events (the live views' one source for it),
and what a finished run's processes spent on their one-off costs (machine/stage_costs keeps them for the next
estimate).

A compiled stage's first warm-up step is its compile (torch.compile traces and builds kernels there), shown as a
phase of its own with its estimate, never as "iteration 0/N".
"""
from __future__ import annotations

import statistics
from enum import Enum

from bench_core.config.bench_config import MODEL_FIELDS, WARMUP_MIN_S, BenchConfig
from bench_core.machine import stage_costs
from bench_core.machine.stage_costs import StageCosts
from bench_core.measure.estimate import PROFILE_STEPS
from bench_core.results.records import RunResult, StageResult, Status


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


def cold_compile_s(run: RunResult) -> float | None:
    """The longest first step of a compiled stage's first process in this run so far: that process compiled what no
    process of the run had compiled (on an H100, HF Qwen3-0.6B's first compiled BF16 process took 93.5 s, its FP8
    one 186.0 s, against the 60 s assumed: BENCHMARKS). None before any has compiled."""
    firsts = [first_step_s(s)[0] for s in run.stages if compiles(s) and first_step_s(s)]
    return max(firsts) if firsts else None


def compile_expected_s(stage: StageResult, costs: StageCosts, cold_s: float | None) -> float:
    """A compiled stage's next compile: the machine's figure (measured or assumed), or, for a stage whose first
    process has not compiled yet, at least this run's longest first compile (`cold_compile_s`): the run's own
    measurement of this model, where the machine's figure may come from another model or be assumed."""
    if cold_s is not None and not first_step_s(stage):
        return max(costs.compile_s, cold_s)
    return costs.compile_s


def compile_text(stage: StageResult, costs: StageCosts, now: float, *, cold_s: float | None) -> str:
    """The compile phase in words: how long so far, against its estimate and where that estimate comes from."""
    elapsed = compile_elapsed_s(stage, now)
    expected = compile_expected_s(stage, costs, cold_s)
    if expected > costs.compile_s:
        how = "as long as this run's longest first compile so far"
    else:
        how = "as measured on this machine" if costs.measured_compile else "assumed: not measured on this machine yet"
    over = " (longer than its estimate)" if elapsed > expected else ""
    return f"compiling (torch.compile, first step): {elapsed:.0f} s of about {expected:.0f} s, {how}{over}"


def compiles(stage: StageResult) -> bool:
    return stage.stage.compile_lever.traces_model


def first_step_s(stage: StageResult) -> list[float]:
    """Each finished process's first warm-up step, in seconds (from its `started` and `first_step` events)."""
    return [t["first_step"] - t["started"] for t in stage.timelines if "first_step" in t and "started" in t]


def _step_s(stage: StageResult) -> float | None:
    return statistics.median(stage.times_ms) / 1e3 if stage.times_ms else None


def step_key(stage_key: str, cfg: BenchConfig) -> str:
    """What a stage's cached step time is filed under: the stage and every model field (the step's work)."""
    shape = ",".join(f"{name}={getattr(cfg, name)}" for name in MODEL_FIELDS)
    source = f",source={cfg.source.label}" if cfg.source else ""
    return f"{stage_key}|{shape}{source}"


def _warmup_s(stage: StageResult, step: float, cfg: BenchConfig) -> float:
    """A process's warm-up seconds as recorded (mean over its processes), else as the rule sets it: at least
    `warmup` steps and WARMUP_MIN_S seconds."""
    recorded = [w.seconds for w in stage.warmups if w.seconds]
    return sum(recorded) / len(recorded) if recorded else max(cfg.warmup * step, WARMUP_MIN_S)


def measured(run: RunResult) -> tuple[float | None, float | None]:
    """(fixed, compile) seconds of a process of this run, each a median over its processes; None where none ran.
    Fixed is what the estimate (measure/estimate.process_overhead_s) does not count apart: a process's wall time
    less its timed steps, its warm-up, its share of the profiled steps and its compile."""
    fixed, compile_ = [], []
    for s in run.stages:
        step = _step_s(s)
        if s.status != Status.OK or step is None or not s.wall_s or not s.rounds:
            continue
        firsts = first_step_s(s)
        extra = sum(max(f - step, 0.0) for f in firsts) / max(len(firsts), 1) if compiles(s) else 0.0
        if compiles(s) and firsts:
            compile_.append(extra)
        per_process = ((s.wall_s - sum(s.times_ms) / 1e3) / len(s.rounds) - extra - _warmup_s(s, step, run.config)
                       - PROFILE_STEPS * step / max(run.config.repeats, 1))
        fixed.append(max(per_process, 0.0))
    return (statistics.median(fixed) if fixed else None, statistics.median(compile_) if compile_ else None)


def measured_steps(run: RunResult) -> dict[str, float]:
    """Each finished stage's median step seconds, under its step_key."""
    return {step_key(s.key, run.config): step for s in run.stages
            if s.status == Status.OK and (step := _step_s(s)) is not None}


def save_costs(run: RunResult) -> None:
    """What this finished run measured, kept for the next estimate on this machine."""
    stage_costs.save(run.device, *measured(run), steps=measured_steps(run))
