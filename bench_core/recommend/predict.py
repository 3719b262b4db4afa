"""Each candidate's step time and peak memory before it runs. A predictor is injected (the planner and tests take
any); two are here. `EstimatePredictor`: the engine's own run estimate (model FLOPs over the rate of the stage's
precision, measure.estimate), which orders candidates but bounds nothing: its interval is left open, so every
candidate it predicts could still win and is measured. `TimedPredictor`: the sweep's predictor over timings of each
stage's own one- and two-block steps (sweep.predict), with the interval the sweep gives (kernels at p10/p90, the
host at its fastest and slowest round) and, on a GPU, the extrapolated peak memory."""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Protocol

from bench_core.config.bench_config import BenchConfig
from bench_core.machine.probe import Probe
from bench_core.measure.estimate import step_estimate
from bench_core.recommend.from_sweep import (
    MOST_PROCESSES,
    MissingTiming,
    PointTimings,
    predict_stage,
    time_in_process,
)
from bench_core.recommend.space import Candidate


class PredictionSource(StrEnum):
    TIMED = "the stage's one- and two-block steps, timed here and extrapolated in depth (the sweep's predictor)"
    ESTIMATE = "model FLOPs over the rate of the stage's precision (the run estimate): orders, bounds nothing"
    NONE = "no prediction"


@dataclass(frozen=True)
class Predicted:
    step_ms: float | None
    low_ms: float | None = None      # the step at its fastest; None: not bounded (it could be anything below)
    high_ms: float | None = None     # at its slowest; None: not bounded
    peak_mib: float | None = None    # predicted peak memory allocated; None: not predicted
    source: PredictionSource = PredictionSource.NONE
    note: str = ""

    def per_token(self, tokens: int) -> tuple[float, float, float]:
        """(fastest, point, slowest) in ms per token; an open end is 0 or infinity, so it could still win."""
        point = self.step_ms / tokens if self.step_ms else math.inf
        low = self.low_ms / tokens if self.low_ms else 0.0
        high = self.high_ms / tokens if self.high_ms else math.inf
        return low, point, high

    def to_dict(self) -> dict:
        return {**self.__dict__, "source": self.source.name}

    @classmethod
    def from_dict(cls, data: dict) -> Predicted:
        return cls(**{**data, "source": PredictionSource[data["source"]]})


class Predictor(Protocol):
    def __call__(self, candidates: Iterable[Candidate]) -> dict[Candidate, Predicted]: ...


def at_batch(cfg: BenchConfig, batch_size: int) -> BenchConfig:
    return replace(cfg, batch_size=batch_size)


@dataclass(frozen=True)
class EstimatePredictor:
    cfg: BenchConfig
    probe: Probe
    device: str

    def __call__(self, candidates: Iterable[Candidate]) -> dict[Candidate, Predicted]:
        out = {}
        for c in candidates:
            est = step_estimate(at_batch(self.cfg, c.batch_size), self.probe, self.device, c.stage.estimated_as)
            out[c] = Predicted(est.seconds * 1e3 if est.seconds else None, source=PredictionSource.ESTIMATE,
                               note=est.label if est.seconds else est.why)
        return out


# What the timing process yields: each candidate's position in the list it was given, its timings (None: not
# timed) and the parts it could not time.
Timed = tuple[int, PointTimings | None, tuple[str, ...]]
TimeCandidates = Callable[[list[Candidate], threading.Event], Iterator[Timed]]
# Predicting is part of the budget, and at most this share of it: without the end-to-end phase nothing is
# recommended, so it keeps the rest, and a candidate left untimed keeps its estimate (measured if the cap allows).
PREDICT_SHARE = 0.5
# Candidates handed to one timing process at a time: it compiles every compiled step it is given before timing
# any (sweep.timing.ahead, this many side by side), so given the whole space it can spend the share compiling and
# time none (608 candidates on an H100: 201 s, none timed). One wave of compiles a process, best estimated first.
TIMING_CHUNK = MOST_PROCESSES
# What measuring a candidate end to end would cost, one first process (prune.process_seconds at the estimate);
# None: not predictable.
ProcessCost = Callable[[Candidate, Predicted], float | None]


@dataclass
class TimedPredictor:
    """The sweep's predictor over each candidate's own one- and two-block steps at its batch size, timed by one
    timing process (`time_candidates`: sweep.core.runner.time_in_process in production), best estimated first, for
    at most `budget_s`; a candidate it could not time keeps `fallback`'s open-ended estimate, said so.

    A prediction is worth at most the end-to-end process it may spare, so with `process_cost` timing stops once the
    candidates timed after the first (whose seconds carry the timing process's start) have taken longer than
    measuring them end to end is predicted to take: from there on measuring is the cheaper way to know."""
    time_candidates: TimeCandidates
    fallback: Predictor
    budget_s: float | None = None
    clock: Callable[[], float] = time.monotonic
    process_cost: ProcessCost | None = None
    on_timed: Callable[[str], None] | None = None   # a line after each candidate timed, for progress
    spent_s: float = field(default=0.0, init=False)
    stopped: str = field(default="", init=False)    # why timing stopped before every candidate was timed

    def __call__(self, candidates: Iterable[Candidate]) -> dict[Candidate, Predicted]:
        started = self.clock()
        wanted = list(candidates)
        estimates = dict(self.fallback(wanted))
        out = dict(estimates)
        order = sorted(wanted, key=lambda c: (out[c].step_ms or math.inf) / c.batch_size)
        why_not = dict.fromkeys(order, "not timed")
        cancel = threading.Event()
        timer = threading.Timer(self.budget_s, cancel.set) if self.budget_s is not None else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        marginal = _MarginalCost(self.process_cost, self.clock)
        try:
            for done, (c, timings, missing) in enumerate(self._timed(order, cancel), 1):
                try:
                    if timings is None:
                        raise MissingTiming("; ".join(missing) or "not timed")
                    p = predict_stage(timings, c.stage)
                except MissingTiming as exc:
                    why_not[c] = str(exc)
                else:
                    out[c] = Predicted(p.step_ms, p.fastest_ms, p.slowest_ms, p.peak_mib, PredictionSource.TIMED,
                                       p.bound.value)
                    why_not.pop(c)
                if self.on_timed is not None:
                    self.on_timed(f"predicted {c.key} ({done} of {len(order)}; "
                                  f"{'timed' if c not in why_not else why_not[c]})")
                if self.budget_s is not None and self.clock() - started >= self.budget_s:
                    cancel.set()
                    break
                self.stopped = marginal.after(c, estimates[c])
                if self.stopped:
                    cancel.set()
                    break
        finally:
            cancel.set()
            if timer is not None:
                timer.cancel()
        spent = self.clock() - started
        self.spent_s = spent
        cut = f"predicting's {self.budget_s:.0f} s share of the budget ran out" if self.budget_s is not None and \
            spent >= self.budget_s else self.stopped
        for c, why in why_not.items():
            out[c] = replace(out[c], note=f"not timed ({cut or why}); the estimate kept: {out[c].note}")
        return out

    def _timed(self, order: list[Candidate], cancel: threading.Event) -> Iterator[tuple[Candidate, PointTimings |
                                                                                       None, tuple[str, ...]]]:
        """Each candidate's timings, TIMING_CHUNK candidates a timing process (closing this ends the one running)."""
        for at in range(0, len(order), TIMING_CHUNK):
            if cancel.is_set():
                return
            chunk = order[at:at + TIMING_CHUNK]
            for position, timings, missing in self.time_candidates(chunk, cancel):
                yield chunk[position], timings, missing


@dataclass
class _MarginalCost:
    """Seconds spent timing the candidates after the first, against what measuring them end to end would cost."""
    process_cost: ProcessCost | None
    clock: Callable[[], float]
    first_done: float | None = None
    timing_s: float = 0.0
    measuring_s: float = 0.0
    count: int = 0

    def after(self, c: Candidate, estimate: Predicted) -> str:
        """Why timing should stop after `c` ("" to go on)."""
        if self.process_cost is None:
            return ""
        now = self.clock()
        if self.first_done is None:
            self.first_done = now
            return ""
        seconds = self.process_cost(c, estimate)
        if seconds is None:
            return ""
        self.timing_s, self.measuring_s, self.count = now - self.first_done, self.measuring_s + seconds, self.count + 1
        if self.timing_s <= self.measuring_s:
            return ""
        return (f"timing {self.count} candidate(s) took {self.timing_s:.0f} s, more than measuring them end to end "
                f"is predicted to take ({self.measuring_s:.0f} s): measuring is the cheaper way to know")


def in_process_timer(cfg: BenchConfig, device: str, env: dict | None = None) -> TimeCandidates:
    """Candidates timed by the sweep's timing process, each at its own batch size, one stage a point."""
    def time_candidates(candidates: list[Candidate], cancel: threading.Event) -> Iterator[Timed]:
        yield from time_in_process([(at_batch(cfg, c.batch_size), [c.stage.key]) for c in candidates], device,
                                   cancel, env)
    return time_candidates
