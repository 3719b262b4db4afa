"""A candidate measured end to end by the engine: `processes` fresh worker processes of its stage at its batch size
(run.runner, as `run` does), read into a planner Measurement; and the stages measured for one batch size gathered
into one run, so the results code (summary, contributions, History) reads them as it reads any run."""
from __future__ import annotations

import time
from dataclasses import replace

from bench_core.config.bench_config import BenchConfig
from bench_core.machine.probe import Probe
from bench_core.recommend.planner import Measure, Measurement
from bench_core.recommend.predict import at_batch
from bench_core.recommend.space import Candidate
from bench_core.results.records import RunResult, StageResult, Status
from bench_core.results.summary import summarize
from bench_core.run.runner import RunHooks, new_run, run_all

PRESET = "recommend"
VERIFIED = "verified"


def engine_measure(cfg: BenchConfig, probe: Probe, timeout_s: float, hooks: RunHooks | None = None) -> Measure:
    """`hooks`: the server's cancel, worker environment and threads (its time limit is `timeout_s`)."""
    def measure(candidate: Candidate, processes: int) -> Measurement:
        run = new_run(replace(at_batch(cfg, candidate.batch_size), repeats=processes), [candidate.stage], probe,
                      PRESET)
        started = time.monotonic()
        run = run_all(run, probe, replace(hooks, timeout_s=timeout_s) if hooks else RunHooks(timeout_s=timeout_s))
        stage = run.stages[0]
        summary = summarize(run).stage(0)
        ok = stage.status == Status.OK
        return Measurement(tuple(tuple(r) for r in stage.round_series if r) if ok else (),
                           verified=stage.verdict == VERIFIED, verdict=stage.verdict, peak_mib=stage.peak_mem_mib,
                           energy_j_per_token=summary.energy_j_per_token,
                           failed="" if ok else f"{stage.status.value}: {stage.reason}",
                           seconds=time.monotonic() - started, results=(run,))
    return measure


def merged_stage(index: int, results: list[StageResult]) -> StageResult:
    """One stage's processes from several runs as one StageResult: its steps and rounds in the order they ran."""
    first = results[0]
    energy = [r.energy_j for r in results]
    return replace(first, index=index, times_ms=sum((r.times_ms for r in results), ()),
                   losses=sum((r.losses for r in results), ()), host_ms=sum((r.host_ms for r in results), ()),
                   rounds=sum((r.rounds for r in results), ()),
                   energy_j=sum(e for e in energy if e is not None) if all(e is not None for e in energy) else None,
                   peak_allocated_mib=max((r.peak_allocated_mib for r in results if r.peak_allocated_mib is not None),
                                          default=None))


def gathered_run(runs_by_stage: list[list[RunResult]], cfg: BenchConfig) -> RunResult | None:
    """The stages measured at one batch size as one run (the first is the baseline its speedups are over)."""
    stages = [merged_stage(i, [r.stages[0] for r in runs]) for i, runs in enumerate(runs_by_stage) if runs]
    if not stages:
        return None
    first = runs_by_stage[0][0]
    repeats = max(len(s.rounds) for s in stages)
    return replace(first, config=replace(cfg, repeats=repeats), stages=tuple(stages), status=Status.OK)
