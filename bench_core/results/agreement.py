"""Do two runs agree, stage by stage? A stage both runs measured agrees where its two 95% intervals overlap and
differs where they do not (symmetric: A against B reads as B against A); whether B's point lies inside A's interval
is kept too (benchmarks/interval_agreement.py's measure of an honest interval). One sentence says it for the
History compare view, the CLI and the HTML report: "5 of 6 stages agree; Apex … differs: launch-bound in both"."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from bench_core.measure.breakdown import Bound
from bench_core.results.summary import RunSummary


@dataclass(frozen=True)
class StageFigures:
    """One stage's speedup as one run gives it: the point, its interval and what they came with."""
    key: str
    speedup: float | None
    low: float | None
    high: float | None
    covers: str                 # what the interval covers, as the run says it
    noise: str = ""             # the stage's noise reason as the run gives it ("" where steady)
    baseline_noise: str = ""    # the baseline stage's, which the speedup shares
    label: str = ""             # the stage's name in words ("" where the run gave none: its key is said)
    text: str = ""              # the speedup as the run writes it, ×2.00 (1.95–2.05)
    bound: Bound = Bound.UNKNOWN

    @property
    def name(self) -> str:
        return self.label or self.key

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None


class Match(StrEnum):
    AGREE = "agree"            # the two intervals overlap
    DIFFER = "differ"          # they do not
    UNJUDGED = "unjudged"      # one run gave a point without an interval


VERBS = {Match.AGREE: "agrees", Match.DIFFER: "differs", Match.UNJUDGED: "is not judged"}


@dataclass(frozen=True)
class Agreement:
    key: str
    a: StageFigures
    b: StageFigures

    @property
    def inside(self) -> bool:
        """B's point inside A's interval (False where either is missing: `agreements` pairs only stages with both)."""
        low, high, point = self.a.low, self.a.high, self.b.speedup
        return low is not None and high is not None and point is not None and low <= point <= high

    @property
    def overlap(self) -> bool | None:
        if self.b.low is None or self.b.high is None or self.a.low is None or self.a.high is None:
            return None
        return self.a.low <= self.b.high and self.b.low <= self.a.high

    @property
    def match(self) -> Match:
        overlap = self.overlap
        return Match.UNJUDGED if overlap is None else Match.AGREE if overlap else Match.DIFFER

    @property
    def cause(self) -> str:
        """What each run recorded of the stage: its bottleneck and noise (the stage's or its baseline's), as the
        runs said them, never a cause guessed afterwards."""
        bounds = _in_both(str(self.a.bound), str(self.b.bound)) if Bound.UNKNOWN not in (self.a.bound,
                                                                                          self.b.bound) else ""
        noisy = [bool(f.noise or f.baseline_noise) for f in (self.a, self.b)]
        noise = ("noisy in both" if all(noisy) else "noisy in A" if noisy[0] else "noisy in B" if noisy[1]
                 else "steady in both")
        return "; ".join(p for p in (bounds, noise) if p)

    @property
    def sentence(self) -> str:
        """'Apex FusedAdam · BF16 differs: ×3.91 (1.97–7.76) against ×5.55 (5.47–5.63); launch-bound in both'."""
        figures = f"{self.a.text} against {self.b.text}" if self.a.text and self.b.text else ""
        return f"{self.a.name} {VERBS[self.match]}: " + "; ".join(p for p in (figures, self.cause) if p)


def _in_both(a: str, b: str) -> str:
    return f"{a} in both" if a == b else f"{a} in A, {b} in B"


def figures_of(summary: RunSummary) -> dict[str, StageFigures]:
    """Each stage's figures as this engine computes them from the run (its summary)."""
    base = next((s.noise_reason or "" for s in summary.stages if s.key == summary.baseline_key), "")
    out = {}
    for s in summary.stages:
        low, high = s.speedup_ci or (None, None)
        out[s.key] = StageFigures(s.key, s.speedup, low, high, covers=s.interval_text or "", noise=s.noise_reason or "",
                                  baseline_noise=base, label=s.label, text=s.speedup_text or "",
                                  bound=s.bottleneck.verdict)
    return out


def agreements(a: dict[str, StageFigures], b: dict[str, StageFigures]) -> list[Agreement]:
    """The stages A gives an interval for and B a point, in A's order (the baseline, without either, is left out)."""
    return [Agreement(key, fa, b[key]) for key, fa in a.items()
            if key in b and fa.has_interval and b[key].speedup is not None]


@dataclass(frozen=True)
class Comparison:
    """Run B against run A: each stage both measured, and the stages only one of them did."""
    stages: tuple[Agreement, ...]
    one_run_only: int

    @property
    def judged(self) -> list[Agreement]:
        return [g for g in self.stages if g.match != Match.UNJUDGED]

    @property
    def differ(self) -> list[Agreement]:
        return [g for g in self.stages if g.match == Match.DIFFER]

    @property
    def sentence(self) -> str:
        """'5 of 6 stages agree; <stage> differs: …': agreement is overlap of the two 95% intervals."""
        judged, differ = self.judged, self.differ
        if not judged:
            return "No stage has a speedup interval in both runs: nothing to compare."
        parts = [f"{len(judged) - len(differ)} of {len(judged)} stages agree (their 95% intervals overlap)"]
        parts += [g.sentence for g in differ]
        unjudged = len(self.stages) - len(judged)
        if unjudged:
            parts.append(f"{unjudged} without an interval in one run, not judged")
        if self.one_run_only:
            parts.append(f"{self.one_run_only} measured in one run only")
        return "; ".join(parts) + "."


def compare(a: RunSummary, b: RunSummary) -> Comparison:
    fa, fb = figures_of(a), figures_of(b)
    measured = [{k for k, f in side.items() if f.speedup is not None and k != s.baseline_key}
                for side, s in ((fa, a), (fb, b))]
    return Comparison(tuple(agreements(fa, fb)), len(measured[0] ^ measured[1]))


def compare_sentences(summaries: Sequence[RunSummary]) -> list[tuple[RunSummary, RunSummary, str]]:
    """Every later run against the first (the compare view's run A): (A, B, sentence)."""
    return [(summaries[0], s, compare(summaries[0], s).sentence) for s in summaries[1:]]
