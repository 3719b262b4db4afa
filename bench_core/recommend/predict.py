"""Each candidate's step time and peak memory before it runs. A predictor is injected (the planner and tests take
any); two are here. `EstimatePredictor`: the engine's own run estimate (model FLOPs over the rate of the stage's
precision, measure.estimate), which orders candidates but bounds nothing: its interval is left open, so every
candidate it predicts could still win and is measured. `TimedPredictor`: the sweep's predictor over timings of each
stage's own one- and two-block steps (sweep.predict), with the interval the sweep gives (kernels at p10/p90, the
host at its fastest and slowest round) and, on a GPU, the extrapolated peak memory."""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol

from bench_core.config.bench_config import BenchConfig
from bench_core.machine.probe import Probe
from bench_core.measure.estimate import step_estimate
from bench_core.recommend.from_sweep import MissingTiming, PointTimings, predict_stage
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
            est = step_estimate(at_batch(self.cfg, c.batch_size), self.probe, self.device, c.stage.precision)
            out[c] = Predicted(est.seconds * 1e3 if est.seconds else None, source=PredictionSource.ESTIMATE,
                               note=est.label if est.seconds else est.why)
        return out


@dataclass(frozen=True)
class TimedPredictor:
    """The sweep's predictor over timings taken per batch size: `time_batch(batch_size, stages)` returns the
    point's timings (sweep.kernels.time_point in its own process); a stage it could not time falls back to
    `fallback`'s open-ended estimate, said so."""
    time_batch: Callable[[int, tuple], PointTimings]
    fallback: EstimatePredictor

    def __call__(self, candidates: Iterable[Candidate]) -> dict[Candidate, Predicted]:
        wanted = list(candidates)
        out = self.fallback(wanted)
        for batch in dict.fromkeys(c.batch_size for c in wanted):
            these = [c for c in wanted if c.batch_size == batch]
            timings = self.time_batch(batch, tuple(c.stage for c in these))
            for c in these:
                try:
                    p = predict_stage(timings, c.stage)
                except MissingTiming as exc:
                    out[c] = replace(out[c], note=f"{exc}; {out[c].note}")
                    continue
                out[c] = Predicted(p.step_ms, p.fastest_ms, p.slowest_ms, p.peak_mib, PredictionSource.TIMED,
                                   p.bound.value)
        return out
