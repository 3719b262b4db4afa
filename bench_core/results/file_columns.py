"""A run's file columns: one table (name, type, where the value comes from) in the fixed order saved files keep, the
shown figures' columns taken from their display columns (`columns.DISPLAY_COLUMNS`). The CSV and JSON writer and the
strict reader (results.formats) both read it."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench_core.config.bench_config import INT_FIELDS, model_label
from bench_core.levers.registry import KIND_SPECS, KINDS
from bench_core.measure.noise import FILE_FIELDS
from bench_core.measure.proof import KEY_KERNELS
from bench_core.results.columns import DISPLAY_COLUMNS, DisplayColumn, Field, Getter, display_fields
from bench_core.results.records import RunResult
from bench_core.results.summary import QUIET_FIELDS, StageSummary

Column = Field     # one CSV/JSON column: name, type, where the value comes from


def _s(fn: Callable[[StageSummary], Any]) -> Getter:
    return lambda run, stage: fn(stage)


def _r(fn: Callable[[RunResult], Any]) -> Getter:
    return lambda run, stage: fn(run.run)


def _profile(attr: str) -> Getter:
    return lambda run, stage: getattr(stage.profile, attr) if stage.profile else None


def _quiet(name: str) -> Getter:
    return lambda run, stage: getattr(stage.quiet, name) if stage.quiet else None


def file_columns(display: tuple[DisplayColumn, ...]) -> list[Column]:
    """The file's columns in their fixed order (saved files must still import). A shown figure's columns come
    from its display column (`shown[...]`); one not placed here is appended at the end."""
    shown = display_fields(display)
    ordered: list[Column] = [
        shown["stage"], Column("label", "str", _s(lambda s: s.label)),
        *[Column(kind, "str", (lambda k: _s(lambda s: s.result.stage.name_of(k)))(kind)) for kind in KINDS],
        shown["status"], shown["reason"], shown["verdict"], shown["warnings"],
        Column("baseline_stage", "str", lambda run, stage: run.baseline_key or ""),
        shown["partial"], shown["median_ms"], shown["p10_ms"], shown["p90_ms"],
        Column("mean_ms", "float", _s(lambda s: s.timing.mean_ms)),
        Column("std_ms", "float", _s(lambda s: s.timing.std_ms)),
        shown["noisy"], shown["noise_reason"], shown["tokens_per_s"],
        shown["speedup"], shown["speedup_ci_low"], shown["speedup_ci_high"], shown["scaling_efficiency"],
        Column("tflops", "float", _s(lambda s: s.rates.tflops)), shown["mfu"],
        Column("mfu_measured_peak", "float", _s(lambda s: s.mfu_measured_peak)),
        shown["peak_mem_mib"],
        Column("peak_reserved_mib", "float", _s(lambda s: s.result.peak_reserved_mib)),
        Column("loss_first", "float", _s(lambda s: s.loss_first)),
        Column("loss_last", "float", _s(lambda s: s.loss_last)),
        Column("host_ms", "float", _s(lambda s: s.host_ms)),
        Column("gpu_kernel_ms", "float", _profile("gpu_kernel_ms")), shown["kernel_share"],
        Column("kernels_per_step", "float", _profile("kernels_per_step")),
        shown["bottleneck"], shown["energy_j_per_token"], shown["skipped_steps"],
        Column("kernels_seen", "str", _s(lambda s: ";".join(sorted(k for k, v in s.result.kernels.items()
                                                                 if v and k in KEY_KERNELS)))),
        Column("sdpa_backend", "str", _s(lambda s: s.result.sdpa_backend or "")),
        Column("autocast_dtype", "str", _s(lambda s: s.result.autocast_dtype or "")),
        Column("warmup_s", "float", _s(lambda s: s.result.warmup_s)),
        *[Column(name, "float", _quiet(name)) for name in QUIET_FIELDS],
        Column("run_id", "str", _r(lambda r: r.run_id)), Column("created_at", "str", _r(lambda r: r.created_at)),
        Column("preset", "str", _r(lambda r: r.preset)), Column("device", "str", _r(lambda r: r.device)),
        Column("gpu", "str", _r(lambda r: r.gpu)), Column("torch", "str", _r(lambda r: r.machine.torch or "")),
        Column("cuda", "str", _r(lambda r: r.machine.cuda_runtime or "")),
        Column("driver", "str", _r(lambda r: r.machine.driver or "")),
        Column("apex", "str", _r(lambda r: r.machine.apex.label)),
        *[Column(name, "int", (lambda n: _r(lambda r: getattr(r.config, n)))(name)) for name in INT_FIELDS],
        # the model: a built-in family's name, or its source (catalog name, config hash, factory); the JSON
        # holds the source's config itself, so a run can be repeated from its file
        Column("model_source", "str", _r(lambda r: model_label(r.config))),
        Column("attention", "str", _r(lambda r: r.config.source.attention if r.config.source else "")),
    ]
    placed = {c.name for c in ordered}
    return ordered + [f for name, f in shown.items() if name not in placed]


COLUMNS: list[Column] = file_columns(DISPLAY_COLUMNS)
CSV_COLUMNS = [c.name for c in COLUMNS]
REQUIRED_COLUMNS = ["stage", *(k.name for k in KIND_SPECS if k.in_every_file), "status", "reason", "median_ms",
                    "p10_ms", "p90_ms", "device", "gpu",
                    "torch", "apex", *[n for n in INT_FIELDS if n not in ("seed", "repeats")]]
STAGE_METRICS = [c.name for c in COLUMNS if c.kind == "float"] + ["noise_reason", "processes", "interval_scope",
                                                                  "warming_processes", "process_medians_ms",
                                                                  *FILE_FIELDS]
