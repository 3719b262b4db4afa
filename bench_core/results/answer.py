"""The answer card every run view opens with: per vendor, is it worth it here, in a word, with its interval and
its cause; then each lever's contribution as a row of a compact table; and, for a CPU run, what to do next.
Computed here once from the contributions (results.contributions), never re-derived by a view.

The word answers a decision, adopt this vendor's library here or not, and the burden of proof lies with the
library (a dependency and often a build): it is "worth it" only where the run measured it faster, its 95% interval
above ×1.00, and by a gain that may reach the 3% the tool counts as an effect (stats.EQUIVALENCE): an interval wholly
inside ×1.00-1.03 is "measured faster, by under 3%" (H100 call 53 printed "worth it" for Apex at ×1.010,
1.006-1.014). Measured slower, faster by under 3%, no measurable effect and inconclusive all read "not worth it", the
statistics' own word said right after it (inconclusive with how many processes would tell: never "no effect"). So
two runs read different words only where one interval lies above ×1.00 reaching past ×1.03 and the other does not;
two intervals that both hold ×1.00, or lie on the same side of it and of the margin, read the same. The H100 seed
runs A and B (Apex ×0.70, 0.36–1.40, inconclusive; ×0.64, 0.60–0.69, measured slower) both read "not worth it". A
word from one interval alone cannot promise more: overlap is not transitive.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from bench_core.levers.lever_types import Vendor
from bench_core.levers.registry import VENDORS
from bench_core.measure import stats
from bench_core.measure.breakdown import Bound
from bench_core.measure.stats import Effect
from bench_core.results.contributions import (
    Contribution,
    PairedRatio,
    VendorEffect,
    combined_effect,
    contributions,
    vendor_effects,
)
from bench_core.results.near_one import decimals_of, span, times
from bench_core.results.records import Status
from bench_core.results.summary import RunSummary, StageSummary

ALWAYS_ASKED = ("apex",)     # the seed's question: answered on every run, said "not measured" where it did not run
CLUSTER_DOC = "docs/CLUSTER.md"


class Worth(StrEnum):
    WORTH_IT = "worth it"
    NOT_WORTH_IT = "not worth it"
    NOT_MEASURED = "not measured"


def under_margin(paired: PairedRatio) -> bool:
    """A measured ratio whose whole interval lies within stats.EQUIVALENCE of ×1.00: real, and under 3%."""
    return paired.effect == Effect.MEASURED and paired.interval is not None and \
        stats.within_equivalence(*paired.interval)


def worth_of(paired: PairedRatio) -> Worth:
    """The module docstring's rule: worth it only where the interval lies above ×1.00 and reaches past ×1.03."""
    if paired.interval is None or paired.effect is None:
        return Worth.NOT_MEASURED
    return Worth.WORTH_IT if paired.effect == Effect.MEASURED and paired.ratio > 1 and not under_margin(paired) \
        else Worth.NOT_WORTH_IT


def effect_text(paired: PairedRatio) -> str:
    """What the interval says, in the statistics' own words: 'measured slower', 'inconclusive', ..."""
    if paired.effect == Effect.MEASURED:
        said = "measured faster" if paired.ratio > 1 else "measured slower"
        return f"{said}, by under {stats.EQUIVALENCE:.0%}" if under_margin(paired) else said
    if paired.effect == Effect.NO_MEASURABLE_EFFECT:
        return f"no measurable effect (within {stats.EQUIVALENCE:.0%})"
    return "inconclusive" if paired.effect == Effect.INCONCLUSIVE else "no interval (one round)"


def _gpu_time(ratio: float | None) -> str:
    if ratio is None:
        return ""
    equal = stats.within_equivalence(ratio, ratio)
    return f"GPU time {'about equal' if equal else 'differs'} (×{ratio:.2f})"


def _cause(label: str, mine: StageSummary, twin: StageSummary, gpu_ratio: float | None) -> str:
    """Who set the pace of the two steps, and what the GPU's own time did."""
    bound = [who for who, s in ((f"{label}'s step", mine), ("the native step", twin))
             if s.bottleneck.verdict == Bound.LAUNCH]
    gpu = _gpu_time(gpu_ratio)
    if len(bound) == 2:
        head = "both steps are host-bound (the CPU sets its pace)"
    elif bound:
        head = f"{bound[0]} is host-bound (the CPU sets its pace)"
    elif Bound.UNKNOWN in (mine.bottleneck.verdict, twin.bottleneck.verdict):
        head = ""
    else:
        head = "both steps are GPU-bound"
    return ", ".join(p for p in (head, gpu) if p)


@dataclass(frozen=True)
class AnswerLine:
    """One vendor's answer: the word, its figure against the native twin, and why."""
    label: str                       # "Apex", "torchao FP8"
    word: Worth
    paired: PairedRatio | None       # None: not measured here
    against: str                     # "native BF16"
    cause: str                       # the bound and GPU time, or why it was not measured
    stage_key: str | None
    twin_key: str | None

    @property
    def figure(self) -> str:
        """×0.70 (0.36–1.40) against native BF16, inconclusive"""
        p = self.paired
        if p is None:
            return ""
        d = decimals_of(p.ratio, p.interval)
        ci = f" ({span(*p.interval, d)})" if p.interval else ""
        return f"{times(p.ratio, d)}{ci} against {self.against}, {effect_text(p)}"

    @property
    def text(self) -> str:
        """Apex: not worth it here — ×0.70 (0.36–1.40) against native BF16, inconclusive; <cause>"""
        body = "; ".join(x for x in (self.figure, self.cause) if x)
        return f"{self.label}: {self.word} here" + (f" — {body}" if body else "")

    @property
    def short(self) -> str:
        """Apex: not worth it (×0.70), for a list's column"""
        p = self.paired
        return f"{self.label}: {self.word}" + (f" ({times(p.ratio, decimals_of(p.ratio, p.interval))})" if p else "")

    @property
    def markdown(self) -> str:
        return self.text.replace(f"{self.label}: {self.word} here", f"**{self.label}: {self.word} here**", 1)


@dataclass(frozen=True)
class ContributionRow:
    """A contribution as a row of the compact table; the stage keys go in a tooltip or a fold."""
    lever: str                       # "Apex FusedLayerNorm under BF16"
    against: str                     # "LayerNorm (native twin)"
    effect: str                      # "×0.76 (0.34–1.71) inconclusive"
    bound: str                       # "launch-bound / launch-bound"
    proof: str                       # the lever stage's kernel proof: verified, fallback, ...
    stages: str                      # "A vs B"
    settle: str | None               # an inconclusive row: how many processes would tell it


@dataclass(frozen=True)
class Answer:
    lines: tuple[AnswerLine, ...]
    rows: tuple[ContributionRow, ...]
    combined: str | None             # what the levers measure together where none alone is measurable
    next_step: str | None            # a CPU run: its result does not carry over to a GPU, and what to do instead

    @property
    def short(self) -> str:
        """Every vendor's word in a few characters: History's Answer column."""
        return "; ".join(line.short for line in self.lines)



def _label(vendor: Vendor, stage: StageSummary) -> str:
    """The vendor's title, with its precision where its lever is one (torchao FP8)."""
    kinds = {lever.kind for lever in stage.result.stage.levers if lever.vendor == vendor}
    return f"{vendor.title} {stage.result.stage.precision_lever.title}" if kinds == {"precision"} else vendor.title


def _measured_line(summary: RunSummary, v: VendorEffect) -> AnswerLine:
    by = {s.key: s for s in summary.stages}
    mine, twin = by[v.stage_key], by[v.twin_key]
    vendor = next(x for x in VENDORS if x.title == v.vendor)
    label = _label(vendor, mine)
    pm, pt = mine.profile, twin.profile
    gpu = (pt.gpu_kernel_ms / pm.gpu_kernel_ms if pm and pt and pm.source == pt.source == "cuda"
           and pm.gpu_kernel_ms and pt.gpu_kernel_ms else None)
    return AnswerLine(label, worth_of(v.paired), v.paired, f"native {twin.result.stage.precision_lever.title}",
                      _cause(label, mine, twin, gpu), mine.key, twin.key)


def _unmeasured_line(summary: RunSummary, vendor: Vendor) -> AnswerLine:
    """A vendor asked about whose pair has no result here: why, in the stages' own reasons."""
    own = [s for s in summary.stages if any(lever.vendor == vendor for lever in s.result.stage.levers)]
    unavailable = sorted({s.reason for s in own if s.status == Status.UNAVAILABLE and s.reason})
    if not own:
        why = ("needs a CUDA GPU; this ladder has none of its stages" if summary.run.device == "cpu"
               else "this ladder has none of its stages (the seed ladder does)")
    elif unavailable:
        why = "; ".join(unavailable)[:200]
    elif not any(s.ranked for s in own):
        why = "its stages have no result"
    else:
        why = "its native twin did not run (the same stage with PyTorch's levers)"
    return AnswerLine(vendor.title, Worth.NOT_MEASURED, None, "", why, None, None)


def _row(c: Contribution, by: dict[str, StageSummary]) -> ContributionRow:
    p, d = c.paired, c.decimals
    ci = f" ({span(*p.interval, d)})" if p.interval else ""
    bounds = dict.fromkeys((str(c.bottleneck), str(c.against_bottleneck)))
    return ContributionRow(
        lever=f"{c.lever} {c.context}".strip(), against=c.against + (" (native twin)" if c.native_twin else ""),
        effect=f"{times(p.ratio, d)}{ci} {effect_text(p)}", bound=" / ".join(bounds),
        proof=(by[c.stage_key].verdict or "—").removeprefix("imported: ").split(" on ")[0],   # the word alone
        stages=f"{c.stage_key} vs {c.against_key}",
        settle=p.settle.text if p.settle else None)


def next_step(summary: RunSummary) -> str | None:
    """For a CPU run only: its figures do not carry over to a GPU, and how to get a GPU's."""
    if summary.run.device != "cpu":
        return None
    from bench_core.results.examples import EXAMPLES
    names = " or ".join(f"`{name}`" for name in EXAMPLES)
    return ("A CPU result does not carry over to a GPU: fused kernels, BF16 and the host's share of a step all behave "
            "differently there, and Apex runs only there. To see a GPU's answer, open an example GPU run (two H100 "
            f"seed runs ship with the package: \"Open an example GPU run\" on the dashboard, or `python -m "
            f"bench_core import --example NAME` with NAME {names}), or run this on a GPU host (`python -m "
            f"bench_core run`) or a cluster's GPU node (`--cluster ADDRESS`; {CLUSTER_DOC}).")


def answer(summary: RunSummary) -> Answer:
    """The card: Apex always, any other vendor whose stages the ladder holds; the contributions as rows."""
    found = {v.vendor: v for v in vendor_effects(summary)}
    in_ladder = {lever.vendor for s in summary.stages for lever in s.result.stage.levers if lever.vendor}
    lines = []
    for vendor in VENDORS:
        if vendor.title in found:
            lines.append(_measured_line(summary, found[vendor.title]))
        elif vendor in in_ladder or vendor.name in ALWAYS_ASKED:
            lines.append(_unmeasured_line(summary, vendor))
    by = {s.key: s for s in summary.stages}
    found_rows = contributions(summary)
    combined = combined_effect(summary, found_rows)
    rows = tuple(_row(c, by) for c in found_rows)
    return Answer(tuple(lines), rows, combined.words if combined else None, next_step(summary))
