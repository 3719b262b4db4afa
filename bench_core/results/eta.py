"""A running job's time left, computed here once: each remaining stage's own estimate, refined by measured steps.

A stage with timed steps goes on at its own measured median. A stage not timed yet takes its estimate
(measure/estimate: model FLOPs over the rate of its own precision) scaled by the measured ÷ estimated ratio of the
timed stages of the same GEMM precision — or, when none has run yet, of the timed stages of every precision — so a
BF16 stage after an FP32 one is never given the FP32 step time. Without any estimate (no rate on this machine) an
untimed stage takes the measured median of a timed stage of its own precision, else the ETA is unknown.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from enum import Enum

from bench_core.measure.estimate import StepEstimate, process_overhead_s, step_estimate
from bench_core.results.records import RunResult, StageResult, Status
from bench_core.results.summary import summarize


class StepBasis(Enum):
    """Where a remaining stage's step time comes from."""
    MEASURED = "its own measured median"
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
          estimates: dict[int, StepEstimate]) -> tuple[float | None, StepBasis | None]:
    if stage.index in measured:
        return measured[stage.index], StepBasis.MEASURED
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
    per_process = [max(s.wall_s - sum(s.times_ms) / 1e3, 0.0) / max(len(s.rounds), 1) for s in run.stages
                   if s.finished and s.status != Status.UNAVAILABLE and s.wall_s]
    return statistics.fmean(per_process) if per_process else None


def eta(run: RunResult) -> Eta:
    """Time left for every unfinished stage: its remaining steps, and its processes not started yet."""
    cfg = run.config
    estimates = {s.index: step_estimate(cfg, run.machine, run.device, s.stage.precision) for s in run.stages}
    measured = _measured_step_s(run)
    overhead = _measured_overhead_s(run)
    rows, total = [], 0.0
    for s in run.stages:
        if s.finished:
            continue
        step, basis = _step(s, estimates[s.index], measured, estimates)
        if step is None:
            rows.append(StageEta(s.index, estimates[s.index], None, None, 0.0))
            continue
        # processes still to start: the rounds not finished, less the one running now
        processes = cfg.repeats - len(s.rounds) - (1 if s.status == Status.RUNNING else 0)
        per_process = overhead if overhead is not None else process_overhead_s(cfg, step)
        left = (s.iters_total * cfg.repeats - len(s.times_ms)) * step + max(processes, 0) * per_process
        rows.append(StageEta(s.index, estimates[s.index], step, basis, left))
        total += left
    unknown = any(r.basis is None for r in rows)
    return Eta(None if unknown else total, tuple(rows))
