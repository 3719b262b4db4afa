"""Every derived figure of a run, computed once per snapshot: statistics, rates, speedups with their interval,
scaling, kernel cells, bottleneck and what changed from the previous stage.

The store, the figures, the HTML report, the CLI table, the file formats and the pages all read a RunSummary
(through `summarize(run)`); none of them computes a figure again.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from bench_core.config.bench_config import CUDA_PROCESSES
from bench_core.machine.ceilings import Ceilings
from bench_core.measure import breakdown, stats
from bench_core.measure.breakdown import StageProfile
from bench_core.measure.metrics import Rates, rates
from bench_core.measure.noise import StageConditions, Warming, warming
from bench_core.measure.proof import KernelCell, kernel_cells
from bench_core.results.near_one import decimals_of, span, times
from bench_core.results.records import QuietRecord, RunResult, StageResult, Status

QUIET_FIELDS = ("quiet_window_s", "tool_busy_s", "parent_busy_s", "host_busy_s", "steal_s")


@dataclass(frozen=True)
class QuietTotals:
    """A stage's quiet windows (run.quiet) summed over its processes: their wall seconds, and the CPU-seconds in
    them of the run's other processes, of the parent, of the rest of the host, and the host's steal time. None: not
    read (not Linux, or a file from before the field)."""
    quiet_window_s: float | None
    tool_busy_s: float | None
    parent_busy_s: float | None
    host_busy_s: float | None
    steal_s: float | None = None


def quiet_totals(records: tuple[QuietRecord, ...]) -> QuietTotals | None:
    if not records:
        return None

    def total(values: list[float | None]) -> float | None:
        return None if any(v is None for v in values) else round(sum(v for v in values if v is not None), 4)
    return QuietTotals(total([q.window_s for q in records]), total([q.tool_busy_s for q in records]),
                       total([q.parent_busy_s for q in records]), total([q.host_busy_s for q in records]),
                       total([q.steal_s for q in records]))


@dataclass(frozen=True)
class StageSummary:
    index: int
    key: str
    label: str
    status: Status
    reason: str
    gpus: int
    precision: str
    mfu_peak: str                     # which datasheet peak MFU counts against (FP8 stages: bf16)
    timing: stats.TimingStats
    partial: bool                     # timings exist but the stage did not finish ok: not a result
    round_medians: tuple[float, ...]  # each process's median step time, in the order they ran
    process_split: stats.ProcessSplit | None  # those medians in two groups (stats.process_split); None: one group
    noise_reason: str | None          # None: steady; else which rule it broke, with the figures
    rates: Rates
    mfu_measured_peak: float | None
    speedup: float | None
    interval: stats.SpeedupInterval | None  # the speedup's 95% interval, and what it covers
    processes: int                    # fresh worker processes (rounds) whose timed steps the stage has
    scaling_efficiency: float | None
    peak_mem_mib: float | None
    loss_first: float | None
    loss_last: float | None
    verdict: str | None               # verified | fallback | unconfirmed, or "imported: verified on <gpu>"
    cells: dict[str, KernelCell]
    warnings: tuple[str, ...]
    host_ms: float | None             # median host time to enqueue one timed step
    profile: StageProfile | None
    bottleneck: breakdown.Bottleneck
    delta: breakdown.StageDelta | None
    energy_j_per_token: float | None
    skipped_steps: int | None
    conditions: StageConditions | None  # GPU and host over the timed steps (CUDA); their causes are in noise_reason
    warming_processes: int | None     # processes still warming up when timed (noise.warming); None: none judged
    gemm_fp8_share: float | None      # FP8 GEMM time / all GEMM time, for stages with an FP8 share rule (CUDA)
    quiet: QuietTotals | None         # its quiet windows, summed over its processes
    result: StageResult = field(repr=False)

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    @property
    def noisy(self) -> bool | None:
        if self.noise_reason is not None:  # also for an imported stage, whose series did not come along
            return True
        return None if self.timing.n == 0 else False

    # Each figure's text, written once: the CLI, the dashboard, the HTML report and the docs' tables show these.
    @property
    def spread_text(self) -> str | None:
        return None if self.timing.p10_ms is None else f"{self.timing.p10_ms:,.2f}–{self.timing.p90_ms:,.2f}"

    @property
    def speedup_ci(self) -> tuple[float, float] | None:
        return (self.interval.low, self.interval.high) if self.interval else None

    @property
    def effect(self) -> stats.Effect | None:
        """What the speedup's interval says of ×1.00 (stats.effect_of); None without one."""
        return stats.effect_of(self.interval.low, self.interval.high) if self.interval else None

    @property
    def interval_text(self) -> str | None:
        """What the interval covers: 'across 3 processes', 'within one process'."""
        return self.interval.text if self.interval else None

    @property
    def decimals(self) -> int:
        """How many decimals the speedup and its interval are written with, in every view (results.near_one)."""
        return decimals_of(self.speedup, self.speedup_ci)

    @property
    def speedup_point_text(self) -> str | None:
        """×2.00: the point alone, where the interval is drawn beside it (the speedup chart's error bar)."""
        return None if self.speedup is None else times(self.speedup, self.decimals)

    @property
    def speedup_text(self) -> str | None:
        """×2.00 (1.95–2.05), ×0.997 (0.996–0.998); an interval over fewer than CUDA_PROCESSES processes says what it
        covers here too."""
        if self.speedup is None:
            return None
        i = self.interval
        if i is None:
            return self.speedup_point_text
        full = i.scope == stats.IntervalScope.ACROSS_PROCESSES and i.processes >= CUDA_PROCESSES
        return f"{self.speedup_point_text} ({span(i.low, i.high, self.decimals)}{'' if full else ', ' + i.text})"

    @property
    def process_medians_text(self) -> str | None:
        """'per process 25.6, 25.7, 41.3 ms', or 'processes split in two groups: 25.6, 25.7 | 41.3 ms': said where one
        median hides how the processes differ (a noisy, launch-bound or split stage of two processes or more)."""
        if self.process_split is not None:
            return self.process_split.text
        launch = self.ok and self.bottleneck.verdict == breakdown.Bound.LAUNCH
        if len(self.round_medians) < 2 or not (self.noisy or launch):
            return None
        d = stats.ms_decimals(self.round_medians)
        return "per process " + ", ".join(f"{m:,.{d}f}" for m in self.round_medians) + " ms"

    @property
    def mfu_text(self) -> str | None:
        """FP8 stages count against the BF16 peak, and say so."""
        if self.rates.mfu is None:
            return None
        return f"{self.rates.mfu:.1%}" + (f" of {self.mfu_peak}" if self.mfu_peak != self.precision else "")

    @property
    def cpu_ops_ms(self) -> float | None:
        """A CPU profile's op self time per profiled step, every category together (the breakdown bar's length)."""
        p = self.profile
        return sum(p.breakdown_ms.values()) if p is not None and p.source == "cpu" and p.breakdown_ms else None

    @property
    def cpu_ops_over_step(self) -> float | None:
        """cpu_ops_ms ÷ the median step. Above 1 it is no contradiction: the ops' time is summed over every thread
        that ran them, on the profiled steps, which the profiler slows."""
        ops, step = self.cpu_ops_ms, self.timing.median_ms
        return ops / step if ops is not None and step else None

    @property
    def ranked(self) -> bool:
        """May appear in rankings and headlines: finished ok, measured here, and not a fallback."""
        return self.ok and self.speedup is not None and not (self.verdict or "").split(" on ")[0].endswith("fallback")


@dataclass(frozen=True)
class RunSummary:
    run: RunResult
    baseline_key: str | None
    baseline_status: Status | None
    baseline_note: str | None         # why there are no speedups, when there are none
    stages: tuple[StageSummary, ...]

    def stage(self, index: int) -> StageSummary:
        return self.stages[index]

    @property
    def fastest(self) -> StageSummary | None:
        ranked = [s for s in self.stages if s.ranked]
        return max(ranked, key=lambda s: s.speedup or 0) if ranked else None


def _imported_timing(metrics: dict) -> stats.TimingStats:
    return stats.TimingStats(n=0, median_ms=metrics.get("median_ms"), p10_ms=metrics.get("p10_ms"),
                             p90_ms=metrics.get("p90_ms"), mean_ms=metrics.get("mean_ms"),
                             std_ms=metrics.get("std_ms"), iqr_ms=None)


def _median(values: tuple[float, ...]) -> float | None:
    return stats.timing_stats(values).median_ms if values else None


def summarize(run: RunResult) -> RunSummary:
    """Every derived figure of this snapshot, computed once (runs are immutable; a change is a new run)."""
    cached = run.derived.get("summary")
    if cached is None:
        cached = run.derived["summary"] = _summarize(run)
    return cached


def _summarize(run: RunResult) -> RunSummary:
    base = run.stages[0] if run.stages else None
    base_ok = base is not None and base.status == Status.OK and bool(base.times_ms)
    note = None
    if base is not None and not base_ok:
        note = (f"no speedups: the baseline stage {base.key} is {base.status.value}"
                + (f" ({base.reason})" if base.reason else "") if base.finished else None)
    imported_gpu = run.gpu if run.imported else None
    ceilings = run.machine.ceilings
    out: list[StageSummary] = []
    for stage in run.stages:
        prev = out[-1] if out else None
        # the baseline is the first stage: its median is read from its own summary, never computed again
        base_median = (out[0].timing.median_ms if out else None) if base_ok else None
        out.append(_stage_summary(run, stage, base if base_ok else None, base_median, prev, imported_gpu, ceilings))
    out = [replace(s, scaling_efficiency=_scaling(s, out)) if s.gpus > 1 and s.scaling_efficiency is None else s
           for s in out]
    return RunSummary(run=run, baseline_key=base.key if base else None,
                      baseline_status=base.status if base else None, baseline_note=note, stages=tuple(out))


def _stage_summary(run: RunResult, stage: StageResult, base: StageResult | None, base_median: float | None,
                   prev: StageSummary | None,
                   imported_gpu: str | None, ceilings: Ceilings | None) -> StageSummary:
    imported_csv = bool(stage.imported_metrics) and not stage.times_ms
    metrics = stage.imported_metrics or {}
    timing = _imported_timing(metrics) if imported_csv else stats.timing_stats(stage.times_ms)
    ok = stage.status == Status.OK
    world = stage.stage.world_size
    rounds = stage.round_series
    round_medians = (_imported_medians(metrics) if imported_csv else
                     tuple(m for m in (stats.timing_stats(r).median_ms for r in rounds if r) if m is not None))
    warm = warming(rounds)
    gpu = run.gpu if run.device == "cuda" else None
    mfu_peak = stage.stage.precision_lever.peak
    stage_rates = rates(run.config, timing.median_ms, gpu, mfu_peak, world) if ok else Rates(
        mfu_reason=f"stage {stage.status.value}: no result")
    speedup = interval = None
    processes = sum(1 for r in rounds if r) if not imported_csv else metrics.get("processes") or 0
    if imported_csv:
        speedup = metrics.get("speedup")
        interval = _imported_interval(metrics)
    elif ok and base is not None and timing.median_ms:
        base_world = base.stage.world_size
        # throughput ratio: equal to the step-time ratio at equal world sizes
        scale = world / base_world
        found = stats.speedup_interval(base.round_series, rounds) if stage is not base else None
        interval = found.scaled(scale) if found else None  # the baseline is the reference: no interval
        # Across processes the point is the one the interval is built around (per-process ratios), so it lies
        # inside its interval; else the ratio of the medians of all steps.
        speedup = interval.estimate if interval is not None and interval.estimate is not None else (
            scale * (timing.median_ms if stage is base else base_median or 0) / timing.median_ms)
    bottleneck = (breakdown.bottleneck(stage.profile, timing.median_ms, _median(stage.host_ms)) if ok else
                  breakdown.Bottleneck(breakdown.Bound.UNKNOWN, None, f"stage {stage.status.value}: not measured"))
    delta = (breakdown.delta(prev.profile, stage.profile, _changed_title(prev.result, stage))
             if prev is not None and prev.profile and stage.profile else None)
    # measured ceilings: bf16 GEMM for the autocast stages, fp32 with TF32 off for fp32; none is measured for TF32.
    # None until measured (a run measures them after its stages): then only the datasheet MFU is shown
    peak = ({"bf16": ceilings.bf16_tflops, "fp16": ceilings.bf16_tflops,
             "fp32": ceilings.fp32_tflops}.get(mfu_peak) if ceilings else None)
    tokens_timed = len(stage.times_ms) * run.config.tokens_per_step * world
    conditions = StageConditions.of(stage.conditions) if stage.conditions else (
        StageConditions.imported(metrics) if imported_csv else None)
    verdict = stage.verdict
    if imported_gpu and verdict and not verdict.startswith("imported:"):
        verdict = f"imported: {verdict} on {imported_gpu}"
    return StageSummary(
        index=stage.index, key=stage.key, label=stage.label, status=stage.status, reason=stage.reason,
        gpus=world, precision=stage.stage.precision, mfu_peak=mfu_peak, timing=timing,
        partial=not ok and bool(stage.times_ms), round_medians=round_medians,
        process_split=stats.process_split(round_medians),
        noise_reason=_noise_reason(stage, round_medians, conditions, warm) if stage.times_ms else
        metrics.get("noise_reason"),
        rates=stage_rates if not imported_csv else Rates(metrics.get("tokens_per_s"), metrics.get("tflops"),
                                                         metrics.get("mfu"), None),
        mfu_measured_peak=(stage_rates.tflops / (world * peak) if stage_rates.tflops and peak else
                           metrics.get("mfu_measured_peak")),
        speedup=speedup, interval=interval, processes=processes,
        scaling_efficiency=metrics.get("scaling_efficiency") if imported_csv else None,
        # a CUDA graph's replays use its private pool, which the allocator counts as reserved, not allocated
        peak_mem_mib=(stage.peak_reserved_mib if stage.stage.compile_lever.captures_graph and stage.peak_reserved_mib
                      else stage.peak_mem_mib),
        loss_first=stage.losses[0] if stage.losses else metrics.get("loss_first"),
        loss_last=stage.losses[-1] if stage.losses else metrics.get("loss_last"),
        verdict=verdict,
        cells=kernel_cells(stage.stage, stage.status.value, stage.reason, stage.kernels, stage.verdict,
                           run.device, imported_gpu),
        warnings=stage.warnings, host_ms=_median(stage.host_ms) if not imported_csv else metrics.get("host_ms"),
        profile=stage.profile, bottleneck=bottleneck, delta=delta,
        energy_j_per_token=(stage.energy_j / tokens_timed if stage.energy_j and tokens_timed and ok else
                            metrics.get("energy_j_per_token")),
        skipped_steps=stage.skipped_steps, conditions=conditions,
        warming_processes=metrics.get("warming_processes") if imported_csv else warm.count,
        gemm_fp8_share=stage.gemm_share.share if stage.gemm_share else metrics.get("gemm_fp8_share"),
        quiet=(QuietTotals(*(metrics.get(n) for n in QUIET_FIELDS)) if imported_csv and
               metrics.get("quiet_window_s") is not None else quiet_totals(stage.quiet)), result=stage)


def _noise_reason(stage: StageResult, round_medians: tuple[float, ...],
                  conditions: StageConditions | None, warm: Warming) -> str | None:
    """The steadiness rules the step time broke, then what could explain it: a process still warming up, and
    what the GPU and host were doing."""
    reasons = [stats.noise_reason(stage.times_ms, list(round_medians)) or ""]
    reasons += [warm.cause.text] if warm.cause else []
    reasons += [c.text for c in conditions.causes] if conditions else []
    return "; ".join(r for r in reasons if r) or None


def _imported_medians(metrics: dict) -> tuple[float, ...]:
    """A CSV's per-process medians, ';'-joined (columns.process_medians_ms); none from an older file."""
    return tuple(float(m) for m in str(metrics.get("process_medians_ms") or "").split(";") if m.strip())


def _imported_interval(metrics: dict) -> stats.SpeedupInterval | None:
    """A CSV's interval; one from a file older than `interval_scope` did not say what it covered."""
    low, high = metrics.get("speedup_ci_low"), metrics.get("speedup_ci_high")
    if low is None or high is None:
        return None
    scope = metrics.get("interval_scope") or stats.IntervalScope.NOT_RECORDED
    return stats.SpeedupInterval(low, high, metrics.get("processes") or 0, stats.IntervalScope(scope))


def _changed_title(prev: StageResult, cur: StageResult) -> str:
    changed = [new.title for old, new in zip(prev.stage.levers, cur.stage.levers, strict=True) if old != new]
    return " + ".join(changed) or cur.label


def _scaling(stage: StageSummary, stages: list[StageSummary]) -> float | None:
    """throughput(N) / (N x throughput(1)) against the same levers on one GPU in this run."""
    if not stage.rates.tokens_per_s:
        return None
    one_gpu = stage.result.stage.replace(gpus="1")
    twin = next((s for s in stages if s.gpus == 1 and s.ok and s.rates.tokens_per_s and s.result.stage == one_gpu),
                None)
    if twin is None or not twin.rates.tokens_per_s:
        return None
    return stage.rates.tokens_per_s / (stage.gpus * twin.rates.tokens_per_s)
