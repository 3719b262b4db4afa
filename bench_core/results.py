"""The result objects of a run, and their CSV / JSON forms. Torch-free."""
from __future__ import annotations

import io
import json
import uuid
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timezone
from typing import Any

from .config import BenchConfig
from .kernels import KEY_KERNELS
from .metrics import throughput, timing_stats

STATUSES = ("pending", "running", "ok", "unavailable", "oom", "failed", "timeout", "cancelled", "interrupted")
FINISHED = ("ok", "unavailable", "oom", "failed", "timeout", "cancelled", "interrupted")
SCHEMA = "bench_core.run/1"


@dataclass(frozen=True)
class StageResult:
    index: int
    key: str
    label: str
    optimizer: str
    norm: str
    precision: str
    compile: str
    gpus: str = "1"
    status: str = "pending"
    reason: str = ""
    iters_total: int = 0
    times_ms: tuple[float, ...] = ()
    losses: tuple[float, ...] = ()
    warmup_s: float | None = None
    wall_s: float | None = None
    peak_allocated_mib: float | None = None
    peak_reserved_mib: float | None = None
    peak_rss_mib: float | None = None
    rank_peak_mib: tuple[float, ...] = ()   # per rank, for multi-process (DDP) stages
    kernels: dict[str, list[str]] = field(default_factory=dict)
    sdpa_backend: str | None = None
    autocast_dtype: str | None = None
    verdict: str | None = None          # verified | fallback | unconfirmed
    warnings: tuple[str, ...] = ()
    params: int | None = None
    started_at: float | None = None     # wall clock (epoch s) when the stage's worker got its job
    finished_at: float | None = None    # wall clock when the stage ended, whatever its status
    timeline: dict[str, float] = field(default_factory=dict)  # worker event -> seconds since its process start
    imported_metrics: dict | None = None  # summary figures of a run imported from CSV (no raw series)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def peak_mem_mib(self) -> float | None:
        return self.peak_allocated_mib if self.peak_allocated_mib is not None else self.peak_rss_mib

    def to_dict(self) -> dict:
        data = asdict(self)
        for name in ("times_ms", "losses", "warnings", "rank_peak_mib"):
            data[name] = list(getattr(self, name))
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "StageResult":
        known = {f.name for f in fields(cls)}
        clean = {k: v for k, v in data.items() if k in known}
        for name in ("times_ms", "losses", "warnings", "rank_peak_mib"):
            clean[name] = tuple(clean.get(name) or ())
        return cls(**clean)


@dataclass(frozen=True)
class RunResult:
    config: BenchConfig
    env: dict
    device: str
    preset: str
    stages: tuple[StageResult, ...]
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    created_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    status: str = "running"

    @property
    def gpu(self) -> str:
        return (self.env.get("cuda") or {}).get("name") or "" if self.device == "cuda" else "CPU"

    def with_stage(self, stage: StageResult) -> "RunResult":
        stages = tuple(stage if s.index == stage.index else s for s in self.stages)
        return replace(self, stages=stages)

    def to_dict(self) -> dict:
        return {"schema": SCHEMA, "run_id": self.run_id, "created_at": self.created_at, "status": self.status,
                "preset": self.preset, "device": self.device, "config": self.config.to_dict(), "env": self.env,
                "stages": [s.to_dict() for s in self.stages], "summary": summary_rows(self)}

    @classmethod
    def from_dict(cls, data: dict) -> "RunResult":
        return cls(config=BenchConfig.from_dict(data["config"]), env=data.get("env") or {},
                   device=data["device"], preset=data.get("preset", "custom"),
                   stages=tuple(StageResult.from_dict(s) for s in data["stages"]),
                   run_id=data["run_id"], created_at=data["created_at"], status=data.get("status", "done"))


def baseline(run: RunResult) -> StageResult | None:
    """The run's first stage that finished ok: every speedup is against it."""
    return next((s for s in run.stages if s.status == "ok" and s.times_ms), None)


def stage_metrics(run: RunResult, stage: StageResult) -> dict[str, Any]:
    if stage.imported_metrics and not stage.times_ms:
        return {**dict.fromkeys(("median_ms", "p10_ms", "p90_ms", "mean_ms", "std_ms", "tokens_per_s", "tflops",
                                 "mfu", "speedup", "loss_first", "loss_last")),
                "noisy": None, "n": 0, **stage.imported_metrics}
    stats = timing_stats(stage.times_ms)
    world = int(stage.gpus)
    perf = throughput(run.config, stats["median_ms"], run.gpu if run.device == "cuda" else None, stage.precision,
                      world)
    base = baseline(run)
    base_median = timing_stats(base.times_ms)["median_ms"] if base else None
    speedup = base_median / stats["median_ms"] if base_median and stats["median_ms"] else None
    return {**stats, **perf, "speedup": speedup, "scaling_efficiency": scaling_efficiency(run, stage, perf),
            "loss_first": stage.losses[0] if stage.losses else None,
            "loss_last": stage.losses[-1] if stage.losses else None}


def scaling_efficiency(run: RunResult, stage: StageResult, perf: dict) -> float | None:
    """throughput(N) / (N x throughput(1)) against the same levers on one GPU in this run."""
    if stage.gpus == "1" or not perf["tokens_per_s"]:
        return None
    single = next((s for s in run.stages if s.gpus == "1" and s.status == "ok" and s.times_ms and
                   (s.optimizer, s.norm, s.precision, s.compile) ==
                   (stage.optimizer, stage.norm, stage.precision, stage.compile)), None)
    if single is None:
        return None
    one = throughput(run.config, timing_stats(single.times_ms)["median_ms"], None, single.precision)["tokens_per_s"]
    return perf["tokens_per_s"] / (int(stage.gpus) * one) if one else None


CSV_COLUMNS = [
    "stage", "label", "optimizer", "norm", "precision", "compile", "gpus", "scaling_efficiency", "status", "reason",
    "verdict", "warnings",
    "median_ms", "p10_ms", "p90_ms", "mean_ms", "std_ms", "noisy", "tokens_per_s", "speedup",
    "peak_mem_mib", "peak_reserved_mib", "tflops", "mfu", "loss_first", "loss_last", "kernels_seen",
    "sdpa_backend", "autocast_dtype", "warmup_s",
    "run_id", "created_at", "preset", "device", "gpu", "torch", "cuda", "driver", "apex",
    "depth", "width", "heads", "seq_len", "batch_size", "vocab_size", "warmup", "iters", "seed",
]


def apex_label(env: dict) -> str:
    apex = env.get("apex") or {}
    dist = apex.get("distribution") or {}
    status = apex.get("status", "missing")
    return status if status == "missing" else f"{status} {dist.get('version') or ''}".strip()


def summary_rows(run: RunResult) -> list[dict[str, Any]]:
    """One flat row per stage, config and environment repeated: the CSV's content."""
    rows = []
    for stage in run.stages:
        m = stage_metrics(run, stage)
        seen = sorted(k for k, names in stage.kernels.items() if names and k in KEY_KERNELS)
        rows.append({
            "stage": stage.key, "label": stage.label, "optimizer": stage.optimizer, "norm": stage.norm,
            "precision": stage.precision, "compile": stage.compile, "gpus": int(stage.gpus),
            "scaling_efficiency": m["scaling_efficiency"], "status": stage.status,
            "reason": stage.reason, "verdict": stage.verdict or "", "warnings": " | ".join(stage.warnings),
            "median_ms": m["median_ms"], "p10_ms": m["p10_ms"], "p90_ms": m["p90_ms"], "mean_ms": m["mean_ms"],
            "std_ms": m["std_ms"], "noisy": m["noisy"], "tokens_per_s": m["tokens_per_s"],
            "speedup": m["speedup"], "peak_mem_mib": stage.peak_mem_mib,
            "peak_reserved_mib": stage.peak_reserved_mib, "tflops": m["tflops"], "mfu": m["mfu"],
            "loss_first": m["loss_first"], "loss_last": m["loss_last"], "kernels_seen": ";".join(seen),
            "sdpa_backend": stage.sdpa_backend or "", "autocast_dtype": stage.autocast_dtype or "",
            "warmup_s": stage.warmup_s,
            "run_id": run.run_id, "created_at": run.created_at, "preset": run.preset, "device": run.device,
            "gpu": run.gpu, "torch": run.env.get("torch", ""), "cuda": run.env.get("cuda_runtime") or "",
            "driver": run.env.get("driver") or "", "apex": apex_label(run.env),
            **{k: getattr(run.config, k) for k in ("depth", "width", "heads", "seq_len", "batch_size",
                                                    "vocab_size", "warmup", "iters", "seed")},
        })
    return rows


FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value: Any) -> Any:
    """Spreadsheet formula injection guard for text cells."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def to_csv(runs: RunResult | list[RunResult]) -> str:
    import pandas as pd
    runs = [runs] if isinstance(runs, RunResult) else runs
    rows = [{k: neutralise(v) for k, v in row.items()} for run in runs for row in summary_rows(run)]
    buf = io.StringIO()
    pd.DataFrame(rows, columns=CSV_COLUMNS).to_csv(buf, index=False)
    return buf.getvalue()


def to_json(run: RunResult) -> str:
    return json.dumps(run.to_dict(), indent=1, default=str)
