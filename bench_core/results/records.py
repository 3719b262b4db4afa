"""What was measured, as it was measured: a run and its stages' raw series. Torch-free.

Derived figures (statistics, speedups, MFU, verdict cells) are not here: `summary.py` computes them once.
"""
from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from bench_core.config.bench_config import BenchConfig
from bench_core.levers.changes import SurgeryReport
from bench_core.levers.stage import Stage, saved_names
from bench_core.machine.conditions import Conditions
from bench_core.machine.probe import Probe
from bench_core.measure.breakdown import StageProfile
from bench_core.measure.gemms import GemmShare
from bench_core.measure.warmup import WarmupTrace, traces_from

SCHEMA = "bench_core.run/2"
OLD_SCHEMAS = ("bench_core.run/1",)


class Status(StrEnum):
    """Every status word, for stages and runs alike; the store's SQL, the figures and the pages use these."""
    QUEUED = "queued"
    PENDING = "pending"
    RUNNING = "running"
    OK = "ok"
    DONE = "done"
    UNAVAILABLE = "unavailable"
    OOM = "oom"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"

    def __str__(self) -> str:
        return self.value


STAGE_FINISHED = frozenset({Status.OK, Status.UNAVAILABLE, Status.OOM, Status.FAILED, Status.TIMEOUT,
                            Status.CANCELLED, Status.INTERRUPTED})
RUN_ACTIVE = frozenset({Status.QUEUED, Status.RUNNING})
_TUPLES = ("times_ms", "losses", "host_ms", "rounds", "warnings", "rank_peak_mib")


def _seconds(data: dict, name: str, optional: bool = True) -> float | None:
    value = data.get(name)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"quiet window field {name}: {value!r} is not a non-negative number")
    return float(value)


@dataclass(frozen=True)
class ThreadUse:
    """A thread of the timed process that used CPU in its quiet window: whether the launching thread shared cores."""
    name: str
    cpu_s: float
    core: int        # the core it last ran on
    main: bool       # the process's own thread: the one that launches the kernels

    @classmethod
    def from_dict(cls, data: Any) -> ThreadUse:
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            raise ValueError(f"quiet window thread: {data!r} is not a thread's record")
        cpu, core = data.get("cpu_s"), data.get("core")
        if isinstance(cpu, bool) or not isinstance(cpu, (int, float)) or cpu < 0:
            raise ValueError(f"quiet window thread field cpu_s: {cpu!r} is not a non-negative number")
        if isinstance(core, bool) or not isinstance(core, int) or core < 0:
            raise ValueError(f"quiet window thread field core: {core!r} is not a non-negative integer")
        return cls(name=data["name"], cpu_s=float(cpu), core=core, main=bool(data.get("main")))


@dataclass(frozen=True)
class QuietRecord:
    """One process's quiet window (run.quiet): from its release (or `go`) to the end of its measured work, what
    else used the host. CPU-seconds; None where it could not be read (no /proc: not Linux)."""
    round: int
    window_s: float                   # wall seconds the window was open
    paused_groups: int = 0            # the run's other process groups stopped for it (0: pausing was off)
    counted_processes: int | None = None  # processes of those groups read from /proc: each may add a tick
    tool_busy_s: float | None = None  # CPU the run's other processes used in the window: 0 when all were paused
    parent_busy_s: float | None = None  # the parent's own CPU (it reads the worker's event lines)
    host_busy_s: float | None = None  # the host's busy CPU less the timed process tree's: load from all else
    timed_cores: tuple[int, ...] = ()  # the cores the timed process was pinned to; () where it was not
    steal_s: float | None = None      # the host's steal time: a hypervisor ran something else on its CPUs
    timed_threads: tuple[ThreadUse, ...] = ()  # the timed process's threads that used CPU, busiest first

    def to_dict(self) -> dict[str, Any]:
        return {**{f.name: getattr(self, f.name) for f in fields(self)}, "timed_cores": list(self.timed_cores),
                "timed_threads": [asdict(t) for t in self.timed_threads]}

    @classmethod
    def from_dict(cls, data: Any) -> QuietRecord:
        if not isinstance(data, dict):
            raise ValueError(f"quiet window: {data!r} is not an object")
        counted = data.get("counted_processes")
        cores = data.get("timed_cores") or []
        for name, value in (("round", data.get("round")), ("paused_groups", data.get("paused_groups", 0)),
                            ("counted_processes", 0 if counted is None else counted), *(
                                ("timed_cores", c) for c in cores)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"quiet window field {name}: {value!r} is not a non-negative integer")
        return cls(round=data["round"], window_s=_seconds(data, "window_s", optional=False) or 0.0,
                   paused_groups=data.get("paused_groups", 0), counted_processes=counted,
                   tool_busy_s=_seconds(data, "tool_busy_s"), parent_busy_s=_seconds(data, "parent_busy_s"),
                   host_busy_s=_seconds(data, "host_busy_s"), timed_cores=tuple(cores),
                   steal_s=_seconds(data, "steal_s"),
                   timed_threads=tuple(ThreadUse.from_dict(t) for t in data.get("timed_threads") or ()))


@dataclass(frozen=True)
class StageResult:
    index: int
    stage: Stage                         # the levers it ran with; files keep them as one column per kind
    status: Status = Status.PENDING
    reason: str = ""
    iters_total: int = 0                 # timed iterations of one round
    times_ms: tuple[float, ...] = ()     # every timed iteration, round after round
    losses: tuple[float, ...] = ()
    host_ms: tuple[float, ...] = ()      # host time to enqueue each timed step (CUDA); empty on CPU
    rounds: tuple[int, ...] = ()         # iterations of each finished round: splits times_ms into rounds
    warmup_s: float | None = None
    warmup_steps: int | None = None
    warmups: tuple[WarmupTrace, ...] = ()   # every process's warm-up, round after round (raw JSON only)
    wall_s: float | None = None
    peak_allocated_mib: float | None = None
    peak_reserved_mib: float | None = None
    peak_rss_mib: float | None = None
    rank_peak_mib: tuple[float, ...] = ()   # per rank, for multi-process (DDP) stages
    energy_j: float | None = None        # GPU energy over the timed steps of every round
    skipped_steps: int | None = None     # GradScaler: steps skipped for inf/nan gradients
    conditions: Conditions | None = None  # GPU and host during the timed steps of every round (CUDA only)
    kernels: dict[str, list[str]] = field(default_factory=dict)
    sdpa_backend: str | None = None
    autocast_dtype: str | None = None
    verdict: str | None = None           # verified | fallback | unconfirmed
    warnings: tuple[str, ...] = ()
    profile: StageProfile | None = None  # where the time goes, from the profiled steps
    params: int | None = None
    optimizer_class: str | None = None
    norm_class: str | None = None
    norm_modules: dict[str, int] = field(default_factory=dict)   # the model's norm modules, class -> count
    surgery: SurgeryReport | None = None  # what each lever changed in the model (modules swapped, layers converted)
    gemm_share: GemmShare | None = None  # the share of GEMM time a lever's rule counts (FP8), and the GEMMs outside
    started_at: float | None = None      # wall clock (epoch s) when `go` was sent (the worker may still be building)
    finished_at: float | None = None
    timeline: dict[str, float] = field(default_factory=dict)  # the last process's event -> s since it started
    timelines: tuple[dict[str, float], ...] = ()  # each round's process: event -> wall clock (epoch s), in order
    quiet: tuple[QuietRecord, ...] = ()  # each round's quiet window (run.quiet), in order
    imported_metrics: dict | None = None  # figures of a stage imported from CSV (no raw series)
    node: str | None = None              # the cluster node that ran it, where its run spanned nodes (a retry)

    @property
    def finished(self) -> bool:
        return self.status in STAGE_FINISHED

    @property
    def peak_mem_mib(self) -> float | None:
        return self.peak_allocated_mib if self.peak_allocated_mib is not None else self.peak_rss_mib

    @property
    def round_series(self) -> list[list[float]]:
        """times_ms split into rounds (a round still running is the last, partial one)."""
        out, start = [], 0
        for n in self.rounds:
            out.append(list(self.times_ms[start:start + n]))
            start += n
        if start < len(self.times_ms):
            out.append(list(self.times_ms[start:]))
        return out

    @property
    def key(self) -> str:
        return self.stage.key

    @property
    def label(self) -> str:
        return self.stage.label

    def to_dict(self) -> dict[str, Any]:
        data = {"index": self.index, "key": self.key, "label": self.label, **self.stage.as_dict(),
                **{f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("index", "stage")}}
        data["status"] = self.status.value
        data["profile"] = self.profile.to_dict() if self.profile else None
        data["conditions"] = self.conditions.to_dict() if self.conditions else None
        data["gemm_share"] = self.gemm_share.to_dict() if self.gemm_share else None
        data["surgery"] = self.surgery.to_dict() if self.surgery else None
        data["warmups"] = [w.to_dict() for w in self.warmups]
        data["timelines"] = [dict(t) for t in self.timelines]
        data["quiet"] = [q.to_dict() for q in self.quiet]
        for name in _TUPLES:
            data[name] = list(getattr(self, name))
        return data

    @classmethod
    def from_dict(cls, data: dict) -> StageResult:
        known = {f.name for f in fields(cls)}
        clean = {k: v for k, v in data.items() if k in known}
        for name in _TUPLES:
            clean[name] = tuple(clean.get(name) or ())
        clean["status"] = Status(clean.get("status", "pending"))
        clean["stage"] = Stage(**saved_names(data))
        clean["profile"] = StageProfile.from_dict(clean["profile"]) if clean.get("profile") else None
        clean["conditions"] = Conditions.from_dict(clean["conditions"]) if clean.get("conditions") else None
        clean["gemm_share"] = GemmShare.from_dict(clean["gemm_share"]) if clean.get("gemm_share") else None
        clean["surgery"] = SurgeryReport.from_dict(clean["surgery"]) if clean.get("surgery") else None
        clean["warmups"] = traces_from(clean.get("warmups"))   # absent before warm-ups were recorded
        clean["timelines"] = tuple(_timeline(t) for t in clean.get("timelines") or ())  # absent in older files
        clean["quiet"] = tuple(QuietRecord.from_dict(q) for q in clean.get("quiet") or ())
        if "rounds" not in data and clean["times_ms"] and clean["status"] == Status.OK:
            clean["rounds"] = (len(clean["times_ms"]),)  # a schema-1 run: one round
        return cls(**clean)


@dataclass(frozen=True)
class RunResult:
    config: BenchConfig
    machine: Probe                       # the probe of the machine the run was measured on
    device: str
    preset: str
    stages: tuple[StageResult, ...]
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    created_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    status: Status = Status.RUNNING
    imported: bool = False
    node: str | None = None              # the cluster node it ran on; None: the dashboard's own machine
    # summary.summarize's cache: runs are immutable snapshots, so their summary is computed once
    derived: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def gpu(self) -> str:
        return (self.machine.cuda.name or "") if self.device == "cuda" else "CPU"

    def with_stage(self, stage: StageResult) -> RunResult:
        stages = tuple(stage if s.index == stage.index else s for s in self.stages)
        return replace(self, stages=stages)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "run_id": self.run_id, "created_at": self.created_at, "status": self.status.value,
                "preset": self.preset, "device": self.device, "imported": self.imported,
                "config": self.config.to_dict(), "machine": self.machine.to_dict(),
                "stages": [s.to_dict() for s in self.stages], **({"node": self.node} if self.node else {})}

    @classmethod
    def from_dict(cls, data: dict) -> RunResult:
        machine = data.get("machine") if "machine" in data else data.get("env")  # schema 1 called it env
        return cls(config=BenchConfig.from_dict(data["config"]), machine=Probe.from_dict(machine),
                   device=data["device"], preset=data.get("preset", "custom"),
                   stages=tuple(StageResult.from_dict(s) for s in data["stages"]),
                   run_id=data["run_id"], created_at=data["created_at"],
                   status=Status(data.get("status", "done")), imported=bool(data.get("imported")),
                   node=data.get("node") or None)


def _timeline(data: Any) -> dict[str, float]:
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, (int, float)) and
                                             not isinstance(v, bool) for k, v in data.items()):
        raise ValueError(f"timelines: {data!r} is not an object of event names and times")
    return {k: float(v) for k, v in data.items()}


def initial_stage(index: int, stage: Stage, iters: int) -> StageResult:
    """A pending StageResult for a Stage."""
    return StageResult(index=index, stage=stage, iters_total=iters)
