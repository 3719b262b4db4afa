"""What a sweep found: each point's prediction and (where it ran end to end) its measurement, the whole sweep, and
every figure derived from them, computed once here (the CLI, the figures, the report, the store and the page read
these). JSON round trip; the rows of the CSV and the shown table are in sweep.views.rows.
"""
from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from functools import cached_property

from bench_core.measure.stats import IntervalScope
from bench_core.results.near_one import speedup_decimals
from bench_core.results.records import Status
from bench_core.sweep.core import plan
from bench_core.sweep.core.crossover import Crossover, Estimate, crossover
from bench_core.sweep.core.measured import PointMeasurement, peak_change
from bench_core.sweep.core.spec import SweepSpec
from bench_core.sweep.timing.timings import PointTimings

TALLY_WORDS = "measured end to end"   # how the tally, and so a file's stored tally, reads
FORMAT = "bench_core.sweep/1"   # a sweep JSON's first key says what it is (import tells it from a run's file)


class Source(StrEnum):
    """Where a point's shown speedup comes from."""
    PREDICTED = "predicted"
    MEASURED = "measured"


@dataclass(frozen=True)
class PointPrediction:
    speedup: float
    low: float
    high: float
    a_ms: float
    b_ms: float
    bound: str                      # B's predicted bound (gpu-bound | launch-bound)
    timings: PointTimings
    a_gpu_ms: float | None = None   # the GPU's share of each step: the kernel time predicted (None: older files)
    b_gpu_ms: float | None = None
    a_host_ms: float | None = None  # the host's: its time to issue a step (None: older files)
    b_host_ms: float | None = None
    a_peak_mib: float | None = None  # each step's peak memory allocated (None: not measured: a CPU, older files)
    b_peak_mib: float | None = None

    @property
    def peak_change(self) -> float | None:
        return peak_change(self.a_peak_mib, self.b_peak_mib)

    def to_dict(self) -> dict:
        return {**{k: v for k, v in self.__dict__.items() if k != "timings"}, "timings": self.timings.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> PointPrediction:
        return cls(**{**data, "timings": PointTimings.from_dict(data["timings"])})


@dataclass(frozen=True)
class Paired:
    """One point with both a prediction (its speedup and own interval) and a measured speedup."""
    measured: float
    predicted: float
    low: float
    high: float

    @property
    def has_interval(self) -> bool:
        """False for a prediction kept without spread (older files' launch-bound ones): nothing to hold a
        measurement, so no coverage count judges it."""
        return self.low != self.high

    @property
    def inside(self) -> bool:
        """The measurement inside the prediction's own interval (not the one widened by the sweep's errors, which
        is fitted to these very points)."""
        return self.low <= self.measured <= self.high



@dataclass(frozen=True)
class PointResult:
    index: int
    values: tuple[tuple[str, int], ...]
    prediction: PointPrediction | None = None
    prediction_note: str | None = None     # why there is no prediction (a part could not be timed here)
    measurement: PointMeasurement | None = None

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.values)

    def value(self, axis: str) -> int:
        return dict(self.values)[axis]

    @property
    def measured_speedup(self) -> float | None:
        """The end-to-end speedup, where the point ran and both stages finished ok."""
        m = self.measurement
        return m.speedup if m is not None and m.status == Status.OK else None

    @property
    def measured(self) -> bool:
        return self.measured_speedup is not None

    @property
    def failure(self) -> str | None:
        """Why the point's end-to-end run gave no figure (it ran out of memory, failed...); None where it gave one
        or did not run."""
        return self.measurement.failure if self.measurement is not None else None

    @property
    def source(self) -> Source | None:
        """Where its shown figure comes from; None where it has none. A point whose end-to-end run failed shows
        none: its prediction is of a step that did not run (shown, an out-of-memory point read as a
        predicted ×1.01 and was named the map's best point)."""
        if self.failure:
            return None
        return Source.MEASURED if self.measured else Source.PREDICTED if self.prediction else None

    @property
    def estimate(self) -> tuple[float, float, float] | None:
        """(speedup, low, high): measured where measured, else predicted; None where the run failed."""
        m, speedup = self.measurement, self.measured_speedup
        if m is not None and speedup is not None:
            return speedup, m.low if m.low is not None else speedup, m.high if m.high is not None else speedup
        p = self.prediction
        return (p.speedup, p.low, p.high) if p and not self.failure else None

    @property
    def prediction_error(self) -> float | None:
        """measured / predicted - 1, where both exist."""
        measured = self.measured_speedup
        if measured is None or self.prediction is None:
            return None
        return measured / self.prediction.speedup - 1

    @property
    def paired(self) -> Paired | None:
        """The measured speedup beside the predicted one and its own interval; None without both."""
        measured = self.measured_speedup
        if measured is None or self.prediction is None:
            return None
        return Paired(measured, self.prediction.speedup, self.prediction.low, self.prediction.high)

    def _paired_errors(self, predicted: str, measured: str) -> tuple[float, float] | None:
        """predicted / measured - 1 for stage A then B, from the prediction's and the measurement's `a_`/`b_`
        fields of those names, where the point ran end to end and all four figures exist."""
        m, p = self.measurement, self.prediction
        if not self.measured or m is None or p is None:
            return None
        pa, pb, ma, mb = (getattr(o, f"{s}_{n}") for o, n in ((p, predicted), (m, measured)) for s in "ab")
        return (pa / ma - 1, pb / mb - 1) if pa and pb and ma and mb else None

    @property
    def step_errors(self) -> tuple[float, float] | None:
        """Each stage's predicted step time against its measured one, A then B: what the predictor is judged on,
        beside the ratio both errors share."""
        return self._paired_errors("ms", "ms")

    @property
    def kernel_errors(self) -> tuple[float, float] | None:
        """Each stage's predicted GPU time against the kernel time its profiled steps measured, A then B: the part
        of a step-time error that is kernels the prediction misses, apart from the GPU's idle time in the step."""
        return self._paired_errors("gpu_ms", "kernel_ms")

    @property
    def host_errors(self) -> tuple[float, float] | None:
        """Each stage's predicted host time against the host time its timed steps measured, A then B: the other
        part of a step-time error, and the one that names a launch-bound point. Read it where the stage is
        launch-bound: where the GPU sets the pace, the measured host also waits for room in the launch queue."""
        return self._paired_errors("host_ms", "host_ms")

    @property
    def peak_errors(self) -> tuple[float, float] | None:
        """Each stage's predicted peak memory against its measured one, A then B."""
        return self._paired_errors("peak_mib", "peak_mib")

    @property
    def memory(self) -> tuple[float, Source] | None:
        """B's peak memory change against A's and where it comes from: measured where the point ran end to end,
        else predicted from the shallow steps' peaks; None where neither has it."""
        measured = self.measurement.peak_change if self.measured and self.measurement else None
        if measured is not None:
            return measured, Source.MEASURED
        predicted = self.prediction.peak_change if self.prediction and not self.failure else None
        return (predicted, Source.PREDICTED) if predicted is not None else None

    @property
    def bound(self) -> str | None:
        if self.measured:
            return self.measurement.bound if self.measurement else None
        return self.prediction.bound if self.prediction and not self.failure else None

    def to_dict(self) -> dict:
        return {"index": self.index, "values": [list(v) for v in self.values],
                "prediction": self.prediction.to_dict() if self.prediction else None,
                "prediction_note": self.prediction_note,
                "measurement": self.measurement.to_dict() if self.measurement else None}

    @classmethod
    def from_dict(cls, data: dict) -> PointResult:
        return cls(int(data["index"]), tuple((str(k), int(v)) for k, v in data["values"]),
                   PointPrediction.from_dict(data["prediction"]) if data.get("prediction") else None,
                   # files saved before the note was the reason alone read "not predicted: not predicted: ..."
                   (data.get("prediction_note") or "").removeprefix("not predicted: ") or None,
                   PointMeasurement.from_dict(data["measurement"]) if data.get("measurement") else None)


class NotRun(StrEnum):
    """Why a point has no end-to-end measurement, read from the sweep's own status: it ended before the point's
    turn."""
    CANCELLED = "cancelled"
    INTERRUPTED = "the server stopped"
    BUDGET = "the budget ran out"

    @property
    def text(self) -> str:
        """As a row says it: a cancelled sweep's unrun rows read "–" with no reason (a new user's pass)."""
        return f"not run: {self.value}"


class Phase(StrEnum):
    PREDICTING = "predicting"       # every point's kernels timed, in one process
    MEASURING = "measuring"         # points run end to end, most in doubt first
    DONE = "done"


@dataclass(frozen=True)
class Progress:
    phase: Phase
    done: int
    total: int
    eta_s: float | None             # None until a point's cost is known


@dataclass(frozen=True)
class SweepResult:
    spec: SweepSpec
    device: str
    gpu: str | None
    points: tuple[PointResult, ...]
    status: Status = Status.RUNNING
    sweep_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    created_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    notes: tuple[str, ...] = ()
    imported: bool = False
    progress: Progress | None = None
    predict_s: float | None = None   # what predicting every point took (None: unfinished, older files)

    def with_point(self, point: PointResult) -> SweepResult:
        return replace(self, points=tuple(point if p.index == point.index else p for p in self.points))

    @cached_property
    def calibration(self) -> float | None:
        """The rms of log(measured / predicted) over the points with both (plan.calibrated_error): what the
        planner and the shown intervals calibrate on; None until enough points have both."""
        return plan.calibrated_error([math.log1p(e) for e in (p.prediction_error for p in self.points)
                                      if e is not None])

    def best_estimate(self, point: PointResult) -> tuple[float, float, float] | None:
        """(speedup, low, high) as every view shows a point: measured where measured; predicted, its interval
        widened by the error this sweep's measured points showed (plan.widened), once enough points have both
        (until then its own). A prediction's own interval holds only its timings' spread: beside a crossing it read
        as tight as a measurement."""
        est = point.estimate
        if est is None or point.measured or point.prediction is None:
            return est
        wider = plan.widened(plan.Candidate(point.index, *est), self.calibration)
        return (est[0], *wider) if wider else est

    def not_run(self, point: PointResult) -> NotRun | None:
        """Why the point did not run end to end (None: it ran, or the sweep has not ended). The point measuring when
        the sweep was cancelled keeps no measurement: it did not run either."""
        if point.measurement is not None:
            return None
        if self.status == Status.CANCELLED:
            return NotRun.CANCELLED
        if self.status == Status.INTERRUPTED:
            return NotRun.INTERRUPTED
        return NotRun.BUDGET if self.status == Status.DONE and self.spec.budget_s else None

    @property
    def shown_notes(self) -> tuple[str, ...]:
        """The notes as every view lists them: once the sweep has ended, the tally as the points read now, then the
        rest. A file keeps the tally it was written with as its first note, which may be stale (an older file's counted
        its out-of-memory points as predicted)."""
        rest = tuple(n for n in self.notes if TALLY_WORDS not in n) + self.interval_scope_note
        return rest if self.status in (Status.RUNNING, Status.QUEUED) else (self.tally, *rest)

    @property
    def interval_scope_note(self) -> tuple[str, ...]:
        """Where measured intervals hold only one process's steps, once: "×1.02 (1.02–1.02)" read as a certainty
        it is not (a new user's pass over the FLCE maps, one process a stage); processes differ more than steps."""
        within = [p for p in self.points if p.measured and p.measurement
                  and p.measurement.interval_text == IntervalScope.WITHIN_ONE_PROCESS.value]
        if not within:
            return ()
        return (f"{len(within)} of {sum(p.measured for p in self.points)} measured intervals are within one process "
                "(one process a stage): they leave out how much processes differ (2 or more processes a stage, "
                "on the page or with --repeats, give intervals across processes)",)

    @property
    def tally(self) -> str:
        """How many points ran end to end, kept their prediction alone, or have no figure and why: "0 of 5 points
        measured end to end, 3 predicted only, 2 not run (cancelled)"."""
        counts: dict[str, int] = {}
        for p in self.points:
            if p.source is None:
                why = self.not_run(p)
                said = f"not run ({why.value})" if why else p.failure or "without a figure"
                counts[said] = counts.get(said, 0) + 1
        return ", ".join([f"{sum(p.measured for p in self.points)} of {len(self.points)} points {TALLY_WORDS}",
                          f"{sum(p.source == Source.PREDICTED for p in self.points)} predicted only",
                          *(f"{k} {said}" for said, k in counts.items())])

    def decimals(self, point: PointResult) -> int:
        """One count of decimals for every speedup a view says of the point (results.near_one): its shown
        interval's, a third where its predicted or measured speedup, outside it, would print inside it."""
        est = self.best_estimate(point)
        beside = (point.prediction.speedup if point.prediction else None, point.measured_speedup)
        return 2 if est is None else speedup_decimals(est[1], est[2], *(v for v in beside if v is not None))

    @property
    def estimated(self) -> int:
        """How many points have a speedup (measured or predicted) so far: the map needs two."""
        return sum(1 for p in self.points if p.estimate)

    @property
    def title(self) -> str:
        return f"B {self.spec.comparison.b.key} vs A {self.spec.comparison.a.key}"

    def to_dict(self) -> dict:
        return {"format": FORMAT, "sweep_id": self.sweep_id, "created_at": self.created_at,
                "status": self.status.value, "device": self.device, "gpu": self.gpu, "spec": self.spec.to_dict(),
                "points": [p.to_dict() for p in self.points], "notes": list(self.notes),
                "crossovers": [c.to_dict() for c in crossovers(self)], "prediction_error": prediction_error(self),
                "imported": self.imported, "predict_s": self.predict_s}

    @classmethod
    def from_dict(cls, data: dict) -> SweepResult:
        return cls(SweepSpec.from_dict(data["spec"]), str(data["device"]), data.get("gpu"),
                   tuple(PointResult.from_dict(p) for p in data["points"]), Status(data["status"]),
                   str(data["sweep_id"]), str(data["created_at"]), tuple(data.get("notes") or ()),
                   bool(data.get("imported", False)), predict_s=data.get("predict_s"))


def is_sweep_json(data: bytes | str | dict) -> bool:
    if isinstance(data, (bytes, str)):
        try:
            data = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            return False
    return isinstance(data, dict) and data.get("format") == FORMAT


def to_json(result: SweepResult) -> str:
    return json.dumps(result.to_dict(), indent=1)


def from_json(text: str | bytes) -> SweepResult:
    return SweepResult.from_dict(json.loads(text))


def crossovers(result: SweepResult) -> list[Crossover]:
    """Along the first axis: one line, or one per value of the second axis; from each point's best estimate."""
    axes = result.spec.axes
    if not axes or len(axes[0].values) < 2:
        return []
    rows = [()] if len(axes) == 1 else [((axes[1].name, v),) for v in axes[1].values]
    out = []
    for fixed in rows:
        pts = [p for p in result.points if all(p.value(k) == v for k, v in fixed)]
        line = [Estimate(p.value(axes[0].name), *est, p.measured) for p in pts if (est := result.best_estimate(p))]
        found = crossover(axes[0].name, line) if len(line) >= 2 else None
        if found:
            # the swept values with no figure: an interval open towards them does not claim them
            unrun = tuple(p.value(axes[0].name) for p in pts if result.best_estimate(p) is None)
            out.append(replace(found, fixed=" ".join(f"{k}={v}" for k, v in fixed),
                               predicted_only=not any(p.measured for p in pts), unrun=unrun))
    return out


def rms_ratio(errors: list[float]) -> float | None:
    """The root-mean-square of log(1 + error), as a ratio (0.08: typically 8% off); None without an error."""
    logs = [math.log1p(e) for e in errors]
    return math.expm1(math.sqrt(sum(x * x for x in logs) / len(logs))) if logs else None


def prediction_error(result: SweepResult) -> float | None:
    """The speedup's error (measured / predicted) over the points that have both, as `rms_ratio`."""
    return rms_ratio([e for e in (p.prediction_error for p in result.points) if e is not None])
