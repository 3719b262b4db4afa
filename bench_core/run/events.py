"""The worker → parent event protocol: one JSON object per line on the worker's stdout.

Both sides use this module: the worker's emitter encodes these dataclasses, the parent's fold decodes them.
Every event carries `t`, seconds since the worker process started (the per-stage timeline), and `at`, the
worker's wall clock (epoch s) when it was emitted: every process's timeline on the run's one clock.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar


@dataclass(frozen=True)
class Event:
    name: ClassVar[str] = ""
    t: float = 0.0
    at: float = 0.0

    def encode(self) -> str:
        return json.dumps({"event": self.name, **asdict(self)}, default=str)


@dataclass(frozen=True)
class Ready(Event):
    """torch imported (and the CUDA context created): waiting for the job."""
    name: ClassVar[str] = "ready"


@dataclass(frozen=True)
class Built(Event):
    """Model, optimizer and batch exist; waiting for `go`."""
    name: ClassVar[str] = "built"
    pid: int = 0
    params: int = 0
    optimizer_class: str = ""
    norm_class: str = ""
    norm_modules: dict[str, int] = field(default_factory=dict)   # the model's norm modules, class -> count
    surgery: dict[str, Any] | None = None   # levers.changes.SurgeryReport.to_dict(): what each lever changed
    tf32_matmul: bool = False
    grad_scaler: bool = False
    cpu_threads: int = 0
    world_size: int = 1
    nccl: str | None = None


@dataclass(frozen=True)
class Started(Event):
    """`go` received: warm-up begins."""
    name: ClassVar[str] = "started"


@dataclass(frozen=True)
class FirstStep(Event):
    """The first warm-up step is done: it carries the one-off costs (a compiled stage compiles there)."""
    name: ClassVar[str] = "first_step"
    seconds: float = 0.0


@dataclass(frozen=True)
class WarmupProgress(Event):
    name: ClassVar[str] = "warmup_progress"
    steps: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class Warmup(Event):
    name: ClassVar[str] = "warmup"
    seconds: float = 0.0
    iters: int = 0
    trace: dict[str, Any] | None = None   # measure.warmup.WarmupTrace.to_dict(): each step, the SM clock


@dataclass(frozen=True)
class Iter(Event):
    name: ClassVar[str] = "iter"
    i: int = 0
    ms: float = 0.0
    loss: float = 0.0
    host_ms: float | None = None   # perf_counter around the Python call of the step, no sync


@dataclass(frozen=True)
class Memory(Event):
    name: ClassVar[str] = "memory"
    peak_allocated_mib: float | None = None
    peak_reserved_mib: float | None = None
    peak_rss_mib: float | None = None
    rank_peak_mib: list[float] = field(default_factory=list)
    energy_j: float | None = None          # NVML total-energy counter, read around the timed steps
    skipped_steps: int | None = None       # GradScaler steps skipped for inf/nan gradients
    conditions: dict[str, Any] | None = None  # machine.conditions.Conditions.to_dict(), CUDA only


@dataclass(frozen=True)
class Profiled(Event):
    """The profiled steps are done (their trace is being read): the parent may start another process now."""
    name: ClassVar[str] = "profiled"


@dataclass(frozen=True)
class Kernels(Event):
    name: ClassVar[str] = "kernels"
    seen: dict[str, list[str]] = field(default_factory=dict)
    sdpa_backend: str | None = None
    verdict: str = "unconfirmed"
    warnings: list[str] = field(default_factory=list)
    autocast_dtype: str | None = None
    profile: dict[str, Any] | None = None  # breakdown.StageProfile.to_dict()
    gemm_share: dict[str, Any] | None = None  # gemms.GemmShare.to_dict(): stages with a share rule (FP8), on CUDA


@dataclass(frozen=True)
class Unavailable(Event):
    name: ClassVar[str] = "unavailable"
    reason: str = ""


@dataclass(frozen=True)
class Error(Event):
    name: ClassVar[str] = "error"
    kind: str = "error"     # error | oom
    message: str = ""


@dataclass(frozen=True)
class Finished(Event):
    name: ClassVar[str] = "finished"
    wall_s: float = 0.0


EVENTS: dict[str, type[Event]] = {cls.name: cls for cls in (Ready, Built, Started, FirstStep, WarmupProgress, Warmup,
                                                             Iter,
                                                             Memory, Profiled, Kernels, Unavailable, Error, Finished)}


def decode(line: str) -> Event | None:
    """An event from one line of a worker's stdout; None for anything that is not one of ours."""
    try:
        data = json.loads(line)
    except (json.JSONDecodeError, TypeError):
        return None
    cls = EVENTS.get(str(data.get("event"))) if isinstance(data, dict) else None
    if cls is None:
        return None
    known = {f.name for f in fields(cls)}
    try:
        return cls(**{k: v for k, v in data.items() if k in known})
    except TypeError:
        return None
