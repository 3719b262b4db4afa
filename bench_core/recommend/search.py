"""One recommendation from start to end: the space predicted, filtered by memory, planned and measured, the user's
current setup (--from) measured beside the leader with as many processes, and the answer built from what ran."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from bench_core.config.bench_config import BenchConfig, describe_shape
from bench_core.levers.stage import Stage
from bench_core.machine.stage_costs import StageCosts
from bench_core.measure.breakdown import Bound
from bench_core.measure.stats import SpeedupInterval, time_interval
from bench_core.models.families import parts_family
from bench_core.recommend.answer import (
    LAUNCH_BOUND_LIMIT,
    Ranked,
    Recommendation,
    leader_and_runner_up,
    savings_of,
)
from bench_core.recommend.check import DECLARED, NEXT_BEST, RECOMMENDED, Checked, measure_check_set
from bench_core.recommend.measure import gathered_run
from bench_core.recommend.memory import MemoryBudget, memory_fit
from bench_core.recommend.planner import Label, Measure, Planner, Progress, Searched, versus
from bench_core.recommend.predict import Predicted, Predictor, TimedPredictor, at_batch
from bench_core.recommend.prune import PREDICTED_NOT_MEASURED, process_seconds
from bench_core.recommend.space import Candidate, SearchSpace
from bench_core.results.contributions import contribution_lines
from bench_core.results.records import RunResult
from bench_core.results.summary import summarize

FROM_MEASURED = "not in the race: measured after the search as --from, the speedup's base"


@dataclass(frozen=True)
class Ask:
    """What the user asked for, checked (recommend.cli)."""
    cfg: BenchConfig
    device: str
    gpu: str | None
    space: SearchSpace
    from_stage: Stage
    budget_s: float | None
    memory: MemoryBudget | None
    tokens: int | None
    gpu_price: float | None
    tokens_per_step: str

    @property
    def family(self) -> str:
        """The family whose parts the stages name: a Hugging Face model's by the norm it has (models.families)."""
        return parts_family(self.cfg)


def recommend(ask: Ask, predictor: Predictor, measure: Measure,
              on_progress: Callable[[Progress], None] | None = None, costs: StageCosts | None = None,
              clock: Callable[[], float] = time.monotonic, check_stages: tuple[Stage, ...] = (),
              ) -> tuple[Recommendation, RunResult | None]:
    """With `costs` (machine.stage_costs), the end-to-end phase is capped at what its budget affords (prune);
    with `check_stages`, the check set is measured after the search, out of its budget (recommend.check)."""
    candidates = ask.space.candidates
    started = clock()
    predicted = predictor(candidates)   # predicting is part of the budget: the planner gets what it left
    left = None if ask.budget_s is None else max(ask.budget_s - (clock() - started), 0.0)
    fits = {f.candidate: f for f in memory_fit(ask.cfg, candidates, predicted, ask.memory)}
    searched = [Searched(c, predicted[c], fits[c], ask.cfg.seq_len * c.batch_size) for c in candidates]
    cost = (lambda c: process_seconds(at_batch(ask.cfg, c.batch_size), c, predicted[c], costs)) if costs else None
    planner = Planner(measure, left, on_progress=on_progress, process_cost=cost)
    states = planner.run(searched)
    lead, second, either, separation = leader_and_runner_up(states)
    base = _measured_from(ask, states, lead, measure, on_progress)
    following = _next_best(states, lead)
    check = _check(ask, states + [base], lead, following, check_stages, measure, on_progress) \
        if check_stages else ()
    run = _gathered(ask, states, base, lead)
    ranked = {s.candidate: Ranked.of(s, ask.cfg.seq_len, ask.gpu, _at(ask, s)) for s in states + [base]}
    interval = versus(lead, base) if lead is not None and base.measurement and base.measurement.rounds_ms else None
    summary = summarize(run) if run is not None else None
    limits = [f"{len([s for s in states if s.label is Label.DOES_NOT_FIT])} candidate(s) did not fit the memory "
              f"budget", *_prediction_lines(predicted)]
    if isinstance(predictor, TimedPredictor) and predictor.stopped:
        limits.append(f"predicting stopped early: {predictor.stopped}")
    unbounded = unmeasured_limit(states, _per_token(ranked[lead.candidate], lead.tokens) if lead else None)
    if unbounded:
        limits.insert(0, unbounded)
    if planner.cap is not None:
        limits.append(f"end-to-end cap: {planner.cap.why}")
    if summary is not None and lead is not None:
        lead_summary = next((s for s in summary.stages if s.key == lead.candidate.stage.key), None)
        if lead_summary is not None and lead_summary.bottleneck.verdict is Bound.LAUNCH:
            limits.append(LAUNCH_BOUND_LIMIT)
    rec = Recommendation(
        model=describe_shape(ask.cfg), device=ask.device, gpu=ask.gpu, from_key=ask.from_stage.key,
        recommended=ranked[lead.candidate] if lead else None, either=either,
        runner_up=ranked[second.candidate] if second else None, separation=separation,
        speedup=_point(interval, lead, base), speedup_low=interval.low if interval else None,
        speedup_high=interval.high if interval else None, speedup_scope=interval.text if interval else "",
        contributions=contribution_lines(summary) if summary is not None else (),
        savings=savings_of(ask.tokens, ranked[lead.candidate], ranked[base.candidate],
                           (_energy(lead), _energy(base)), ask.gpu_price) if lead else None,
        recipe=lead.candidate.stage.snippet() if lead else "", limits=tuple(limits),
        tokens_per_step=ask.tokens_per_step, memory=ask.memory, stop=(planner.stop.value if planner.stop else ""),
        candidates=tuple(sorted((ranked[s.candidate] for s in states), key=_order)), excluded=ask.space.excluded,
        history_run=run.run_id if run is not None else None,
        next_best=following.key if following else "", check=check)
    return rec, run


def _check(ask: Ask, states: list[Searched], lead: Searched | None, following: Candidate | None,
           stages: tuple[Stage, ...], measure: Measure, on_progress: Callable[[Progress], None] | None
           ) -> tuple[Checked, ...]:
    """The declared stages at the leader's batch size (the base one without a leader), the leader and the next
    best."""
    batch = lead.candidate.batch_size if lead else ask.cfg.batch_size
    members = [(Candidate(stage, batch), DECLARED) for stage in stages]
    members += [(lead.candidate, RECOMMENDED)] if lead else []
    members += [(following, NEXT_BEST)] if following else []

    def say(text: str) -> None:
        if on_progress:
            on_progress(Progress(text, 0, None))
    return measure_check_set(members, {s.candidate: s for s in states}, measure, ask.cfg, ask.gpu, say)


def unmeasured_limit(states: list[Searched], leader_per_token: float | None) -> str:
    """What the answer could not rule out: candidates that fit and were not measured, whose predicted fastest (none
    where an estimate bounds nothing) is below the leader's measured step per token, so any of them could be
    faster than the recommendation ("" if none)."""
    fits = [s for s in states if s.fit.fits]
    measured = [s for s in fits if s.measurement is not None and s.measurement.rounds_ms]
    best = leader_per_token if leader_per_token is not None else float("inf")
    open_ = [s for s in fits if s not in measured and s.predicted.per_token(s.tokens)[0] < best]
    if not open_:
        return ""
    return (f"the best of {len(measured)} measured, not of the space: {len(open_)} of the {len(fits)} candidates that "
            f"fit were not measured and could be faster (their predicted fastest is below the recommendation's "
            f"measured step, or an estimate bounds nothing); a longer --budget measures more")


def _per_token(r: Ranked, tokens: int) -> float | None:
    """The step per token the answer shows for `r` (its measured median across processes)."""
    return r.step_ms / tokens if r.step_ms else None


def _prediction_lines(predicted: dict[Candidate, Predicted]) -> list[str]:
    counts: dict[str, int] = {}
    for p in predicted.values():
        counts[p.source.value] = counts.get(p.source.value, 0) + 1
    return [f"predictions ({n} candidate(s)): {source}" for source, n in counts.items()] or ["no candidates"]


def _next_best(states: list[Searched], lead: Searched | None) -> Candidate | None:
    """The predictor's best candidate that fits, other than the leader: the check set measures it."""
    others = [s for s in states if s.fit.fits and (lead is None or s.candidate != lead.candidate)]
    best = min(others, key=lambda s: s.predicted.per_token(s.tokens)[1], default=None)
    return best.candidate if best else None


def _point(interval: SpeedupInterval | None, lead: Searched | None, base: Searched) -> float | None:
    """The speedup's point: the interval's own where it has one (across processes), else the medians' ratio."""
    if interval is None or lead is None:
        return None
    if interval.estimate is not None:
        return interval.estimate
    return time_interval(base.per_token_rounds())[1] / time_interval(lead.per_token_rounds())[1]


def _order(r: Ranked) -> tuple[int, float]:
    return (0 if r.label == Label.MEASURED.value else 1, r.step_ms / (r.batch_size or 1) if r.step_ms else 1e30)


def _at(ask: Ask, s: Searched) -> BenchConfig:
    return replace(ask.cfg, batch_size=s.candidate.batch_size)


def _energy(s: Searched) -> float | None:
    return s.measurement.energy_j_per_token if s.measurement else None


def _measured_from(ask: Ask, states: list[Searched], lead: Searched | None, measure: Measure,
                   on_progress: Callable[[Progress], None] | None) -> Searched:
    """--from at the base batch size, topped up to the leader's processes: the speedup's interval needs both."""
    c = Candidate(ask.from_stage, ask.cfg.batch_size)
    found = next((s for s in states if s.candidate == c), None)
    base = found or Searched(c, Predicted(None), memory_fit(ask.cfg, (c,), {}, None)[0],
                             ask.cfg.seq_len * c.batch_size)
    want = lead.measurement.processes if lead is not None and lead.measurement else 0
    have = base.measurement.processes if base.measurement else 0
    if want > have:
        if on_progress:
            on_progress(Progress(f"{c.key} (--from): {want - have} process(es)", 0, None))
        more = measure(c, want - have)
        # measured now, so a reason it was not measured (the cap, its prediction) no longer holds
        dropped = FROM_MEASURED if base.dropped.startswith(PREDICTED_NOT_MEASURED) else base.dropped
        base = replace(base, measurement=base.measurement.merged(more) if base.measurement else more,
                       dropped=dropped)
    return base


def _gathered(ask: Ask, states: list[Searched], base: Searched, lead: Searched | None) -> RunResult | None:
    """The stages measured at the leader's batch size as one run, --from first (when at that batch)."""
    if lead is None:
        return None
    batch = lead.candidate.batch_size
    order = [base] + [s for s in states if s.candidate != base.candidate]
    runs = [list(s.measurement.results) for s in order
            if s.candidate.batch_size == batch and s.measurement and s.measurement.rounds_ms]
    return gathered_run(runs, replace(ask.cfg, batch_size=batch))
