"""The shown columns of a run's table, once: header, cell text, where the column applies, help text, and the raw
CSV/JSON fields that carry the same figure as numbers.

The CLI table (`table`), the HTML report (`report`), the dashboard's table and the file formats' column list
(`formats`) all render `DISPLAY_COLUMNS`; a new shown figure is one entry here. Each cell's text is read from the
stage's summary (its `*_text` figures), never computed again.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from bench_core.levers.presets import is_twin
from bench_core.measure.breakdown import Bound, share_text
from bench_core.measure.noise import StageConditions
from bench_core.measure.stats import NOISE_SPREAD, SPLIT_GAP
from bench_core.results.summary import RunSummary, StageSummary

NA = "—"   # a figure that does not apply to this stage, or was not measured: never "None" or a made-up 0
Getter = Callable[[RunSummary, StageSummary], Any]


@dataclass(frozen=True)
class Field:
    """One raw cell of the CSV/JSON row: machine-readable, so numbers stay numbers."""
    name: str
    kind: str          # str | int | int? | float | bool
    get: Getter


class Layout(Enum):
    NUMBER = "number"  # short, right-aligned
    TEXT = "text"      # short words, left-aligned
    NOTE = "note"      # long sentences: the terminal prints them under its table, one line per stage


@dataclass(frozen=True)
class DisplayColumn:
    key: str                                      # the dashboard's column id
    header: str
    text: Callable[[StageSummary], str | None]    # None: "—" in a table, nothing under the terminal's table
    help: str
    fields: tuple[Field, ...] = ()                # the same figure, raw, in the CSV/JSON row
    layout: Layout = Layout.NUMBER
    applies: Callable[[RunSummary], bool] = lambda summary: True

    def cell(self, stage: StageSummary) -> str:
        return self.text(stage) or NA


def _on(device: str) -> Callable[[RunSummary], bool]:
    return lambda summary: summary.run.device == device


def _any(test: Callable[[StageSummary], bool]) -> Callable[[RunSummary], bool]:
    return lambda summary: any(test(s) for s in summary.stages)


def _stage(name: str, kind: str, fn: Callable[[StageSummary], Any]) -> Field:
    return Field(name, kind, lambda summary, stage: fn(stage))


def _ci(i: int) -> Callable[[StageSummary], float | None]:
    return lambda s: s.speedup_ci[i] if s.speedup_ci else None


def _unit(value: float | None, fmt: str, unit: str = "") -> str | None:
    return None if value is None else format(value, fmt) + unit


def _cond(name: str, kind: str, fn: Callable[[StageConditions], Any]) -> Field:
    return Field(name, kind, lambda summary, stage: fn(stage.conditions) if stage.conditions else None)


def _conditions(s: StageSummary) -> str | None:
    """Every figure of the GPU and host over the timed steps, each said only where it was read."""
    c = s.conditions
    if c is None:
        return None
    parts = []  # short: a cell in a wide table; the column's help says what each figure is
    if c.sm_clock_mhz_min is not None:
        parts.append(f"SM {c.sm_clock_mhz_min:,} MHz min" + (
            f" ({c.sm_clock_mhz_median:,.0f} median)" if c.sm_clock_mhz_median is not None else ""))
        parts.append("throttled: " + ", ".join(c.throttle_reasons) if c.throttle_reasons else "no clock events")
    parts += [f"{c.power_w_median:,.0f} W" if c.power_w_median is not None else "",
              f"{c.temp_c_max:.0f} °C" if c.temp_c_max is not None else "",
              f"{c.gpu_other_processes} other GPU processes" if c.gpu_other_processes is not None else "",
              f"load {c.host_load_avg:.1f}/{c.host_cores} cores" if c.host_load_avg is not None else "",
              f"worker CPU {c.worker_cpu_share:.0%}" if c.worker_cpu_share is not None else "",
              f"clocks locked: {c.clocks_locked}" if c.clocks_locked else ""]
    return " · ".join(p for p in parts if p) or None


def _noise(s: StageSummary) -> str | None:
    return None if s.noisy is None else "noisy" if s.noisy else "steady"


def _notes(s: StageSummary) -> str | None:
    notes = [s.reason] if s.reason else []
    notes += list(s.warnings)
    notes += [f"noisy: {s.noise_reason}"] if s.noise_reason else []
    notes += [s.bottleneck.sentence] if s.ok and s.bottleneck.verdict == Bound.LAUNCH else []
    return "; ".join(notes) or None


def _uses_grad_scaler(s: StageSummary) -> bool:
    return s.result.stage.precision_lever.plan.grad_scaler


def proof_consequence(s: StageSummary) -> str | None:
    """What a stage's proof warnings mean for it, naming its own libraries: a vendor lever that fell back is not
    counted as that library; any other warning leaves the proof unconfirmed."""
    if not s.warnings:
        return None
    state = (s.verdict or "").removeprefix("imported: ").split(" on ")[0]
    vendors = s.result.stage.vendors
    if state == "fallback" and vendors:
        return f"this stage is not counted as {vendors}"
    return "this stage's kernel proof is unconfirmed"


PEAK_MEM = _stage("peak_mem_mib", "float", lambda s: s.peak_mem_mib)

DISPLAY_COLUMNS: tuple[DisplayColumn, ...] = (
    DisplayColumn("stage", "Stage", lambda s: s.key, "the stage's levers, joined by '+'",
                  (_stage("stage", "str", lambda s: s.key),), Layout.TEXT),
    DisplayColumn("status", "Status", lambda s: s.status.value + (" (partial)" if s.partial else ""),
                  "partial: timings exist, but the stage did not finish ok, so they are not a result",
                  (_stage("status", "str", lambda s: s.status.value), _stage("partial", "bool", lambda s: s.partial)),
                  Layout.TEXT),
    DisplayColumn("median_ms", "Median", lambda s: _unit(s.timing.median_ms, ",.2f", " ms"),
                  "median time of one training step over every timed iteration",
                  (_stage("median_ms", "float", lambda s: s.timing.median_ms),)),
    DisplayColumn("spread", "p10–p90", lambda s: None if s.spread_text is None else f"{s.spread_text} ms",
                  "10th and 90th percentile of the step time",
                  (_stage("p10_ms", "float", lambda s: s.timing.p10_ms),
                   _stage("p90_ms", "float", lambda s: s.timing.p90_ms))),
    DisplayColumn("speedup", "Speedup (95% CI)", lambda s: s.speedup_text,
                  "throughput against the first stage, with a 95% interval across its fresh processes (a t-interval "
                  "on their log-ratios); with one process, a bootstrap of its steps, only the noise within it",
                  (_stage("speedup", "float", lambda s: s.speedup), _stage("speedup_ci_low", "float", _ci(0)),
                   _stage("speedup_ci_high", "float", _ci(1)))),
    DisplayColumn("interval", "CI covers", lambda s: s.interval_text,
                  "what the speedup's interval covers: the spread across N fresh processes, or only the noise "
                  "within one process (which misses how much processes differ)",
                  (_stage("processes", "int", lambda s: s.processes),
                   _stage("interval_scope", "str", lambda s: s.interval.scope.value if s.interval else "")),
                  Layout.TEXT),
    DisplayColumn("tokens_per_s", "Tokens/s", lambda s: _unit(s.rates.tokens_per_s, ",.0f"),
                  "training tokens per second, all GPUs of the stage together",
                  (_stage("tokens_per_s", "float", lambda s: s.rates.tokens_per_s),)),
    DisplayColumn("scaling", "Scaling", lambda s: _unit(s.scaling_efficiency, ".0%"),
                  "throughput on N GPUs ÷ (N × throughput of the same levers on one GPU)",
                  (_stage("scaling_efficiency", "float", lambda s: s.scaling_efficiency),),
                  applies=_any(lambda s: s.gpus > 1)),
    DisplayColumn("mfu_pct", "MFU", lambda s: s.mfu_text,
                  "model FLOPs per second ÷ the GPU's datasheet peak for the stage's precision (FP8: of bf16)",
                  (_stage("mfu", "float", lambda s: s.rates.mfu),), applies=_on("cuda")),
    DisplayColumn("peak_mem_mib", "Peak memory", lambda s: _unit(s.peak_mem_mib, ",.0f", " MiB"),
                  "peak GPU memory allocated by the stage (reserved, for CUDA graphs' private pool)",
                  (PEAK_MEM,), applies=_on("cuda")),
    DisplayColumn("peak_rss_mib", "Peak RSS", lambda s: _unit(s.peak_mem_mib, ",.0f", " MiB"),
                  "peak resident memory of the worker process: host memory, the whole process, not the model alone",
                  (PEAK_MEM,), applies=_on("cpu")),
    DisplayColumn("energy", "Energy/token", lambda s: _unit(s.energy_j_per_token, ".4f", " J"),
                  "GPU energy per training token over the timed steps (NVML)",
                  (_stage("energy_j_per_token", "float", lambda s: s.energy_j_per_token),),
                  applies=_any(lambda s: s.energy_j_per_token is not None)),
    DisplayColumn("skipped_steps", "Skipped steps",
                  lambda s: None if s.skipped_steps is None or not _uses_grad_scaler(s) else str(s.skipped_steps),
                  "steps GradScaler skipped for inf/nan gradients",
                  (_stage("skipped_steps", "int?", lambda s: s.skipped_steps),), applies=_any(_uses_grad_scaler)),
    DisplayColumn("bottleneck", "Bottleneck", lambda s: s.bottleneck.cell_text,
                  "launch-bound: the GPU waited for the host CPU more than the trace's timestamps can account for "
                  "(host wait, shown beside it); gpu-bound otherwise, with its kernel share: kernel time ÷ median "
                  "step time (the CSV's kernel_share)",
                  (_stage("kernel_share", "float", lambda s: s.bottleneck.busy),
                   _stage("bottleneck", "str", lambda s: s.bottleneck.verdict)),
                  Layout.TEXT, applies=_on("cuda")),
    DisplayColumn("host_wait", "Host wait",
                  lambda s: None if s.bottleneck.host_wait_share is None else share_text(s.bottleneck.host_wait_share),
                  "share of a timed step the GPU sat idle waiting for the host to launch its next kernel (HTA's "
                  "idle-time rule on the profiled steps, less what the profiler's own host overhead added)",
                  (_stage("host_wait_share", "float", lambda s: s.bottleneck.host_wait_share),), applies=_on("cuda")),
    DisplayColumn("conditions", "GPU and host", _conditions,
                  "over the timed steps of every process: the SM clock's lowest and median sample (NVML, every 0.1 "
                  "s); clock-event (throttle) reasons but idle and a clock setting, any of which flags the stage "
                  "throttled; median board power; highest temperature; compute processes on the GPU not of this run "
                  "(any flags it shared; unknown where NVML's process ids cannot be matched); the host's 1-minute "
                  "load on its cores (above one runnable thread per core flags the host busy); the worker's CPU "
                  f"time ÷ wall time (its launch loop needs a whole core: under {1 - NOISE_SPREAD:.0%} flags the "
                  "host busy); whether the clocks were locked (application clocks off their default, or a clock "
                  "setting holding them)",
                  (_cond("sm_clock_mhz_min", "int?", lambda c: c.sm_clock_mhz_min),
                   _cond("sm_clock_mhz_median", "float", lambda c: c.sm_clock_mhz_median),
                   _stage("throttle_reasons", "str", lambda s: s.conditions.reasons_text if s.conditions else ""),
                   _cond("power_w_median", "float", lambda c: c.power_w_median),
                   _cond("temp_c_max", "float", lambda c: c.temp_c_max),
                   _cond("gpu_other_processes", "int?", lambda c: c.gpu_other_processes),
                   _cond("host_load_avg", "float", lambda c: c.host_load_avg),
                   _cond("host_cores", "int?", lambda c: c.host_cores),
                   _cond("worker_cpu_share", "float", lambda c: c.worker_cpu_share),
                   _stage("clocks_locked", "str", lambda s: s.conditions.clocks_locked if s.conditions else "")),
                  Layout.NOTE, applies=_any(lambda s: s.conditions is not None)),
    DisplayColumn("gemm_fp8", "FP8 GEMM share",
                  lambda s: None if s.gemm_fp8_share is None else share_text(s.gemm_fp8_share),
                  "FP8 GEMM kernels' GPU time ÷ all GEMM kernels' (profiled steps); the GEMMs not in FP8 are named in "
                  "the JSON, and any the lever does not expect (only the LM head and attention's may stay BF16) "
                  "fail its proof",
                  (_stage("gemm_fp8_share", "float", lambda s: s.gemm_fp8_share),),
                  applies=_any(lambda s: s.gemm_fp8_share is not None)),
    DisplayColumn("noise", "Noise", _noise,
                  "noisy: the step time broke a steadiness rule, or it was measured throttled, shared or with the "
                  "host busy, or a process's first timed steps were all slower than its own p90 (still warming up; "
                  "the reason is in Notes)",
                  # a boolean in every row, so the column loads as one: a stage not measured is not flagged
                  (_stage("noisy", "bool", lambda s: s.noisy is True),
                   _stage("noise_reason", "str", lambda s: s.noise_reason or ""),
                   _stage("warming_processes", "int?", lambda s: s.warming_processes)), Layout.TEXT),
    DisplayColumn("process_medians", "Per-process medians", lambda s: s.process_medians_text,
                  "each fresh process's median step time, for a noisy or launch-bound stage, where one median hides "
                  "how they differ; 'split in two groups' where the largest gap between them is over "
                  f"{SPLIT_GAP:.0f}× the spread inside the groups it leaves",
                  (_stage("process_medians_ms", "str", lambda s: ";".join(f"{m:.6g}" for m in s.round_medians)),
                   _stage("processes_split", "bool", lambda s: s.process_split is not None)), Layout.NOTE,
                  applies=_any(lambda s: s.process_medians_text is not None)),
    DisplayColumn("model_changes", "Model changes", lambda s: s.result.surgery.text if s.result.surgery else None,
                  "what each lever changed in the model before the run: modules swapped (count and class), layers "
                  "converted (n of m, and why not the rest), library entry points applied; a lever that changed "
                  "nothing is not verified",
                  (_stage("model_changes", "str", lambda s: s.result.surgery.text if s.result.surgery else ""),),
                  Layout.NOTE, applies=_any(lambda s: s.result.surgery is not None and s.result.surgery.by_surgery)),
    DisplayColumn("verdict", "Kernel proof", lambda s: s.verdict,
                  "verified: the profiler saw the kernels of every lever; fallback: a library's lever did not run its "
                  "kernels; unconfirmed: an expected kernel or switch was not seen",
                  (_stage("verdict", "str", lambda s: s.verdict or ""),), Layout.TEXT),
    DisplayColumn("reason", "Notes", _notes, "why a stage did not run, proof warnings, noise and launch-bound causes",
                  (_stage("reason", "str", lambda s: s.reason),
                   _stage("warnings", "str", lambda s: " | ".join(s.warnings))), Layout.NOTE),
    DisplayColumn("delta", "Change from the stage before", lambda s: s.delta.text if s.delta else None,
                  "what this stage's lever changed, by kernel category (the JSON's delta_vs_previous)",
                  layout=Layout.NOTE),
)


KEY_COLUMNS = ("stage", "median_ms", "speedup", "bottleneck", "verdict")  # never clipped: the rest in a toggle


def key_columns(summary: RunSummary) -> tuple[DisplayColumn, ...]:
    """The shown columns every view keeps whole at any width; the others go behind a details toggle."""
    return tuple(c for c in shown(summary) if c.key in KEY_COLUMNS)


def key_cell(summary: RunSummary, column: DisplayColumn, stage: StageSummary) -> str:
    """A key column's cell: a stage the preset runs only as a twin says so, after the ladder's own; "native" only
    where it is all PyTorch (the seed's Apex FusedAdam + LayerNorm BF16 twin, which isolates FusedLayerNorm, read
    "native twin")."""
    twin = column.key == "stage" and is_twin(summary.run.preset, stage.result.stage)
    native = not stage.result.stage.vendors
    return column.cell(stage) + ((" (native twin)" if native else " (twin)") if twin else "")


def shown(summary: RunSummary) -> tuple[DisplayColumn, ...]:
    """The columns that apply to this run: each view shows exactly these."""
    return tuple(c for c in DISPLAY_COLUMNS if c.applies(summary))


def display_fields(columns: tuple[DisplayColumn, ...] = DISPLAY_COLUMNS) -> dict[str, Field]:
    """Every raw field of the shown columns, by name (a field two columns share appears once)."""
    return {f.name: f for c in columns for f in c.fields}
