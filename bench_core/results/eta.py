"""A running job's time left, computed here once: each remaining stage's own estimate, refined by measured steps.

A stage with timed steps goes on at its own measured median. A stage not timed yet takes its estimate
(measure/estimate: model FLOPs over the rate of its own precision) scaled by the measured ÷ estimated ratio of the
timed stages of the same GEMM precision — or, when none has run yet, of the timed stages of every precision — so a
BF16 stage after an FP32 one is never given the FP32 step time. Without any estimate (no rate on this machine) an
untimed stage takes the measured median of a timed stage of its own precision, else the ETA is unknown. A stage
that an earlier run measured on this machine at the same shape (machine/stage_costs) takes that median instead of
its estimate.
A compiled stage adds its compile for each process not past its first step (machine/stage_costs: measured on this
machine, else assumed); a stage's first process at least as long as this run's longest first compile so far
(results/phase.compile_expected_s); the fixed cost measured in this run leaves compiles out.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace
from enum import Enum

from bench_core.machine import stage_costs
from bench_core.machine.stage_costs import StageCosts
from bench_core.measure.estimate import StepEstimate, process_overhead_s, rate_sources, step_estimate
from bench_core.results.phase import (
    cold_compile_s,
    compile_elapsed_s,
    compile_expected_s,
    compiles,
    first_step_s,
    step_key,
)
from bench_core.results.records import RunResult, StageResult, Status
from bench_core.results.summary import summarize


class StepBasis(Enum):
    """Where a remaining stage's step time comes from."""
    MEASURED = "its own measured median"
    CACHED = "its median as an earlier run measured it on this machine (same stage and shape)"
    SAME_PRECISION = "its estimate × measured/estimated of finished stages of its precision"
    ANY_PRECISION = "its estimate × measured/estimated of finished stages of other precisions"
    ESTIMATE = "its estimate alone (nothing measured yet)"
    SAME_PRECISION_MEASURED = "the measured median of a stage of its precision (no estimate on this machine)"


@dataclass(frozen=True)
class StageEta:
    index: int
    estimate: StepEstimate
    step_s: float | None           # the step time the remaining steps are counted at
    basis: StepBasis | None        # None: unknown
    remaining_s: float
    compile_s: float = 0.0          # of remaining_s, the compiles left


@dataclass(frozen=True)
class Eta:
    seconds: float | None          # None: some remaining stage has no step time
    stages: tuple[StageEta, ...]


def _measured_step_s(run: RunResult) -> dict[int, float]:
    summary = summarize(run)
    out = {}
    for s in run.stages:
        median = summary.stage(s.index).timing.median_ms if s.times_ms else None
        if median:
            out[s.index] = median / 1e3
    return out


def _ratio(measured: dict[int, float], estimates: dict[int, StepEstimate], gemm: str | None) -> float | None:
    ratios = [measured[i] / est.seconds for i, est in estimates.items()
              if i in measured and est.seconds and (gemm is None or est.gemm == gemm)]
    return statistics.median(ratios) if ratios else None


def _step(stage: StageResult, estimate: StepEstimate, measured: dict[int, float],
          estimates: dict[int, StepEstimate], cached: float | None) -> tuple[float | None, StepBasis | None]:
    if stage.index in measured:
        return measured[stage.index], StepBasis.MEASURED
    if cached is not None:
        return cached, StepBasis.CACHED
    if estimate.seconds is None:
        steps = [measured[i] for i, est in estimates.items() if i in measured and est.gemm == estimate.gemm]
        return (statistics.median(steps), StepBasis.SAME_PRECISION_MEASURED) if steps else (None, None)
    same = _ratio(measured, estimates, estimate.gemm)
    if same is not None:
        return estimate.seconds * same, StepBasis.SAME_PRECISION
    anyp = _ratio(measured, estimates, None)
    if anyp is not None:
        return estimate.seconds * anyp, StepBasis.ANY_PRECISION
    return estimate.seconds, StepBasis.ESTIMATE


def _measured_overhead_s(run: RunResult) -> float | None:
    """A stage process's cost beyond its timed steps, as the finished stages measured it (mean per process)."""
    per_process = [max(s.wall_s - sum(s.times_ms) / 1e3 - _compiled_s(s), 0.0) / max(len(s.rounds), 1)
                   for s in run.stages if s.finished and s.status != Status.UNAVAILABLE and s.wall_s]
    return statistics.fmean(per_process) if per_process else None


def _compiled_s(stage: StageResult) -> float:
    """The seconds a compiled stage's processes spent in their first step (its compiles); 0 for an eager stage."""
    return sum(first_step_s(stage)) if compiles(stage) else 0.0


def _compile_left_s(stage: StageResult, processes_to_start: int, costs: StageCosts, now: float,
                    cold_s: float | None) -> float:
    """A compiled stage's compiles still to come: the current process's (the rest of it, once compiling), and one
    per process not started; its first process's at least this run's longest first compile so far
    (phase.compile_expected_s)."""
    last = stage.timelines[-1] if stage.timelines else {}
    pending = stage.status == Status.RUNNING and ("first_step" not in last or "finished" in last)
    first = compile_expected_s(stage, costs, cold_s)
    current = max(first - compile_elapsed_s(stage, now), 0.0) if pending else 0.0
    # not compiled yet and none running: the first of the processes to start pays `first`, the rest the machine's
    extra = first - costs.compile_s if processes_to_start and not pending else 0.0
    return current + processes_to_start * costs.compile_s + extra


def eta(run: RunResult, costs: StageCosts | None = None, now: float | None = None) -> Eta:
    """Time left for every unfinished stage: its remaining steps, its compiles, and its processes not started yet.
    `costs`: this machine's measured stage costs (loaded from the machine cache where a compiled stage remains)."""
    cfg = run.config
    now = time.time() if now is None else now
    costs = costs or stage_costs.load(run.device)
    estimates = {s.index: step_estimate(cfg, run.machine, run.device, s.stage.estimated_as) for s in run.stages}
    measured = _measured_step_s(run)
    overhead = _measured_overhead_s(run)
    cold = cold_compile_s(run)
    rows, total = [], 0.0
    for s in run.stages:
        if s.finished:
            continue
        step, basis = _step(s, estimates[s.index], measured, estimates, costs.steps.get(step_key(s.key, cfg)))
        if step is None:
            rows.append(StageEta(s.index, estimates[s.index], None, None, 0.0))
            continue
        # processes still to start: the rounds not finished, less the one running now
        processes = cfg.repeats - len(s.rounds) - (1 if s.status == Status.RUNNING else 0)
        per_process = overhead if overhead is not None else process_overhead_s(cfg, step, costs.fixed_s)
        left = (s.iters_total * cfg.repeats - len(s.times_ms)) * step + max(processes, 0) * per_process
        compile_left = _compile_left_s(s, max(processes, 0), costs, now, cold) if compiles(s) else 0.0
        rows.append(StageEta(s.index, estimates[s.index], step, basis, left + compile_left, compile_left))
        total += left + compile_left
    unknown = any(r.basis is None for r in rows)
    return Eta(None if unknown else total, tuple(rows))


@dataclass(frozen=True)
class RunEstimate:
    """A run's estimate before it starts (its ETA at zero), compiles counted and said apart."""
    seconds: float | None          # None without a rate for some stage
    compile_s: float               # of seconds, the compiles
    costs: StageCosts
    rates: str                     # which rate each precision's steps divide by
    cached_stages: int = 0         # stages whose step time an earlier run measured here
    stages: int = 0

    def text(self) -> str:
        if self.seconds is None:
            return "no estimate: " + self.rates
        compiling = f"; {self.compile_s:.0f} s of it compiling ({self.costs.compile_label})" if self.compile_s else ""
        fixed = "measured on this machine" if self.costs.measured_fixed else "assumed until a run here measures it"
        if self.cached_stages == self.stages:
            steps = "each stage's step time as measured on this machine by an earlier run"
        else:
            steps = "model FLOPs ÷ the rate of each stage's precision (" + self.rates + ")"
            if self.cached_stages:
                steps += f"; {self.cached_stages} of {self.stages} stages' step times measured here by an earlier run"
        per_process = f"{self.costs.fixed_s:.1f} s a process ({fixed})"
        return f"estimated {self.seconds:.0f} s{compiling} · {steps} plus {per_process}"


def run_estimate(run: RunResult, costs: StageCosts | None = None) -> RunEstimate:
    """The whole run's estimate before it starts: the ETA of its stages that can run here, none started."""
    costs = costs or stage_costs.load(run.device)
    runnable = tuple(s for s in run.stages if not s.stage.unavailable_reason(run.machine, run.device))
    left = eta(replace(run, stages=runnable), costs)
    rates = rate_sources(run.config, run.machine, run.device, [s.stage.estimated_as for s in runnable])
    cached = sum(1 for r in left.stages if r.basis is StepBasis.CACHED)
    return RunEstimate(left.seconds, sum(r.compile_s for r in left.stages), costs, rates, cached, len(left.stages))
