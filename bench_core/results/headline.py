"""The verdict in plain words, from a run's summary: what each lever (and each vendor's levers together) adds
against its native twin, read from contributions with its interval, then the fastest stage, which stages are
launch-bound or noisy, and what did not run. Pure text: pages, the CLI and History show it."""
from __future__ import annotations

from dataclasses import dataclass

from bench_core.measure.stats import Effect
from bench_core.results.contributions import VendorEffect, contribution_lines, vendor_effects
from bench_core.results.near_one import span, times
from bench_core.results.records import Status
from bench_core.results.summary import RunSummary, StageSummary


@dataclass(frozen=True)
class Headline:
    contributions: tuple[str, ...]   # what each lever adds against the stage without it: the first block
    lines: tuple[str, ...]           # the contributions, then the rest of the verdict
    one_liner: str


def _includes_one(s: StageSummary) -> bool:
    return s.effect is not None and s.effect != Effect.MEASURED


def _x(s: StageSummary) -> str:
    i = s.interval
    ci = f" (95% CI ×{span(i.low, i.high, s.decimals)}, {i.text})" if i else ""
    return f"{s.speedup_point_text}{ci}"


def _per_process(s: StageSummary, sep: str = "; ") -> str:
    """Each process's median, or the two groups they fell in (StageSummary.process_medians_text)."""
    text = s.process_medians_text
    return "" if text is None else sep + text


def headline(summary: RunSummary) -> Headline:
    run = summary.run
    contributions = contribution_lines(summary)
    lines: list[str] = list(contributions)
    fastest = summary.fastest
    if fastest is not None and fastest.key == summary.baseline_key and sum(s.ranked for s in summary.stages) == 1:
        lines.append(f"Only the baseline **{fastest.key}** gave a result here ({fastest.timing.median_ms:.2f} ms a "
                     "step): there is nothing to compare it with.")
    elif fastest is not None and fastest.key == summary.baseline_key:
        lines.append(f"Fastest: the baseline **{fastest.key}** itself, at {fastest.timing.median_ms:.2f} ms a step: "
                     "no stage beat it here.")
    elif fastest is not None and summary.baseline_key and _includes_one(fastest):
        said = ("has no measurable effect" if fastest.effect == Effect.NO_MEASURABLE_EFFECT else "is inconclusive")
        lines.append(f"No stage is measurably faster than {summary.baseline_key}: the best, **{fastest.key}**, "
                     f"{said}: {_x(fastest)}.")
    elif fastest is not None and summary.baseline_key:
        lines.append(f"Fastest: **{fastest.key}** at {fastest.timing.median_ms:.2f} ms a step, "
                     f"{_x(fastest)} against {summary.baseline_key}.")
    elif summary.baseline_note:
        lines.append(summary.baseline_note[0].upper() + summary.baseline_note[1:] + ".")
    bound = [s for s in summary.stages if s.ok and s.bottleneck.verdict == "launch-bound"]
    if bound:
        lines.append("Launch-bound (GPU waits on the host CPU, so these times follow the CPU): "
                     + ", ".join(f"{s.key} ({s.bottleneck.figure_text}{_per_process(s, ', ')})" for s in bound)
                     + ".")
    noisy = [s for s in summary.stages if s.noisy]
    if noisy:
        lines.append("Noisy: " + "; ".join(f"{s.key} — {s.noise_reason}" + _per_process(s) for s in noisy) + ".")
    fallback = [s for s in summary.stages if s.verdict == "fallback"]
    if fallback:
        vendors = " / ".join(dict.fromkeys(s.result.stage.vendors for s in fallback))
        lines.append(f"Not counted as {vendors} (the trace showed a PyTorch fallback): "
                     + ", ".join(s.key for s in fallback) + ".")
    skipped = [s for s in summary.stages if s.status == Status.UNAVAILABLE]
    if skipped:
        apex_only = all(any(lever.is_apex for lever in s.result.stage.levers) for s in skipped)
        why = ("Apex needs a CUDA GPU and a CUDA build of torch" if run.device == "cpu" and apex_only else
               "; ".join(sorted({s.reason for s in skipped}))[:300])
        lines.append(f"Did not run: {len(skipped)} of {len(summary.stages)} stages ({why}).")
    failed = [s for s in summary.stages if s.status in (Status.FAILED, Status.OOM, Status.TIMEOUT)]
    if failed:
        lines.append("Failed: " + "; ".join(f"{s.key} ({s.status.value}: {s.reason[:120]})" for s in failed) + ".")
    best = (f"no stage measurably faster than {summary.baseline_key}" if fastest and _includes_one(fastest)
            else f"{fastest.key} {_x(fastest)}" if fastest else None)
    # each vendor against its native twin first: History's verdict read "apex-fusedadam+apex-fusedln+bf16 ×6.17",
    # BF16's gain credited to the Apex stage (a new user's pass)
    vendors = "; ".join(_vendor_short(v) for v in vendor_effects(summary))
    lead = f"{vendors} · fastest: " if vendors and best else ""
    one = lead + (best if best else (summary.baseline_note or "no result")) + (
        f" · {len(bound)} launch-bound" if bound else "") + (f" · {len(noisy)} noisy" if noisy else "") + (
        f" · {len(failed)} failed" if failed else "")
    return Headline(contributions, tuple(lines), one)


def _vendor_short(v: VendorEffect) -> str:
    """A vendor's levers together against their native twin, in a few words: the one-liner's first figure."""
    spread = f" (95% CI ×{span(*v.interval, v.decimals)})" if v.interval else " (one round)"
    return f"{v.vendor} vs its native twin {times(v.ratio, v.decimals)}{spread}"
