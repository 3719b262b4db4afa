"""What each lever the ladder changes adds, measured as the ratio of two stages that differ by that lever alone:
the contribution verdict every view shows first (the CLI summary, the HTML report, the Benchmark and History pages).

A lever is set against its native twin (the PyTorch lever it replaces) where the run holds that pair; else against
the other lever of its kind in the best pair found (the kind's baseline first). Its ratio and interval are computed
here, once, from the two stages' own processes paired by round (`stats.speedup_interval`, the stage it is set
against as the base): round k of both ran close together, so noise they share cancels, and the baseline's noise
does not enter. A CSV import has no step times, only each stage's interval against the baseline: there, and only
there, the pair's interval is the quotient of those at their extremes (wider than either, the baseline's noise
counted twice; all such a file allows).

The words follow the interval's effect (`stats.effect_of`), set once on the contribution and read by every view:
measured where it excludes ×1.00; "no measurable effect" only where it lies within 3% of ×1.00 (stats.EQUIVALENCE);
else inconclusive, with its interval (never a ±, which hides the way it leans), how many processes a stage would
tell it and about how long they take. A launch-bound pair says the host CPU sets its figure.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from bench_core.levers.lever_types import Lever
from bench_core.levers.registry import BASELINE_LEVERS, KINDS, LEVERS
from bench_core.measure import stats
from bench_core.measure.breakdown import Bound
from bench_core.measure.stats import Effect
from bench_core.results.near_one import decimals_of, percent, span, times
from bench_core.results.summary import RunSummary, StageSummary

SKIPPED_KINDS = ("gpus",)   # a GPU count is scaling efficiency, not a lever's contribution


@dataclass(frozen=True)
class Settle:
    """How many processes a stage would bring an inconclusive ratio's interval within stats.EQUIVALENCE of its point,
    at the spread its processes showed, and about how long the extra ones take."""
    have: int                  # processes a stage now
    needed: int | None         # None: no spread to go by (one process) or beyond stats.processes_needed's limit
    seconds: float | None      # the two stages' wall time a process × the processes to add; None: not recorded

    @property
    def text(self) -> str:
        margin = f"{stats.EQUIVALENCE:.0%}"
        if self.have < 2:
            return ("one process a stage shows no spread between processes: run at least 2 a stage (--repeats 2) "
                    "to learn how many would tell it")
        if self.needed is None:
            return f"more processes than can be run would be needed to tell it within {margin}"
        took = f"≈ {_duration(self.seconds)}; " if self.seconds is not None else ""
        return (f"about {self.needed} processes a stage would tell it within {margin} either way "
                f"({took}--repeats {self.needed})")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 90 * 60 else f"{seconds / 3600:.1f} h"


def _per_process_s(s: StageSummary) -> float | None:
    r = s.result
    return r.wall_s / len(r.rounds) if r.wall_s and r.rounds else None


def _settle(lever_side: StageSummary, other: StageSummary, processes: int) -> Settle:
    sd = stats.log_ratio_sd(other.result.round_series, lever_side.result.round_series)
    needed = stats.processes_needed(sd) if sd is not None else None
    each = [_per_process_s(lever_side), _per_process_s(other)]
    seconds = (sum(t for t in each if t is not None) * (needed - processes)
               if needed is not None and None not in each else None)
    return Settle(processes, needed, seconds)


@dataclass(frozen=True)
class PairedRatio:
    """One stage's step time against another's, with its interval and what that interval says."""
    ratio: float                             # the other stage's step time ÷ this one's (above 1: faster)
    interval: tuple[float, float] | None
    effect: Effect | None
    processes: int                           # processes a stage the interval pairs (0: a CSV's quotient)
    settle: Settle | None                    # for an inconclusive ratio only


def _paired(mine: StageSummary, other: StageSummary, baseline_key: str | None) -> PairedRatio | None:
    """Round k of `other` against round k of `mine` (module docstring); the CSV quotient where a side has no steps."""
    if mine.result.times_ms and other.result.times_ms:
        found = stats.speedup_interval(other.result.round_series, mine.result.round_series)
        if found is None or not mine.timing.median_ms or other.timing.median_ms is None:
            return None
        # across processes, the point the interval is built around; within one, the ratio of all steps' medians
        ratio = found.estimate if found.estimate is not None else other.timing.median_ms / mine.timing.median_ms
        interval: tuple[float, float] | None = (found.low, found.high)
        processes = found.processes if found.scope == stats.IntervalScope.ACROSS_PROCESSES else 1
    else:
        a, b = _speedup_of(mine, baseline_key), _speedup_of(other, baseline_key)
        if a is None or b is None or not b[0]:
            return None
        ratio, interval = _quotient(a, b)
        processes = 0
    effect = stats.effect_of(*interval) if interval is not None else None
    settle = (_settle(mine, other, processes) if effect == Effect.INCONCLUSIVE and processes else None)
    return PairedRatio(ratio, interval, effect, processes, settle)


def _unsettled(p: PairedRatio, d: int, pair: str) -> str:
    """The words of a ratio whose interval holds ×1.00: no measurable effect, or inconclusive; never a ±."""
    ci = f"95% CI ×{span(*p.interval, d)}" if p.interval else "no interval"
    if p.effect == Effect.NO_MEASURABLE_EFFECT:
        return f"no measurable effect: {times(p.ratio, d)} ({ci}, within {stats.EQUIVALENCE:.0%} of ×1.00; {pair})"
    covers = ("from the two stages' intervals against the baseline" if p.processes == 0 else
              "within one process" if p.processes == 1 else f"{p.processes} processes")
    return (f"inconclusive: {times(p.ratio, d)} ({ci}, {covers}; {pair})"
            + (f"; {p.settle.text}" if p.settle else ""))


class _ReadsPaired:
    """The figures every view reads from a pair's PairedRatio, named once for a Contribution and a VendorEffect."""
    paired: PairedRatio

    @property
    def ratio(self) -> float:
        return self.paired.ratio

    @property
    def interval(self) -> tuple[float, float] | None:
        return self.paired.interval

    @property
    def effect(self) -> Effect | None:
        return self.paired.effect

    @property
    def measurable(self) -> bool:
        return self.paired.effect == Effect.MEASURED

    @property
    def decimals(self) -> int:
        """For the ratio and its interval, in every view (results.near_one)."""
        return decimals_of(self.ratio, self.interval)


@dataclass(frozen=True)
class Contribution(_ReadsPaired):
    lever: str                               # the lever's title ("Apex FusedAdam")
    kind: str
    against: str                             # the title of the lever it is set against ("Adam fused")
    native_twin: bool                        # `against` is the lever's own PyTorch twin
    stage_key: str                           # the stage with the lever
    against_key: str                         # the stage that differs from it by that lever alone
    context: str                             # the pair's precision, in words ("in FP32", "under BF16")
    paired: PairedRatio                      # the against stage's step time ÷ the lever's, its interval and effect
    bottleneck: Bound
    against_bottleneck: Bound
    gpu_time_ratio: float | None             # the same ratio of kernel time per step (StageProfile)
    kernels_delta: float | None              # kernels a step the lever adds
    twin_title: str | None                   # the lever's native twin, when the run holds no pair with it
    words: str

    @property
    def launch_bound(self) -> bool:
        return Bound.LAUNCH in (self.bottleneck, self.against_bottleneck)


def _differing(a: StageSummary, b: StageSummary) -> list[str]:
    sa, sb = a.result.stage, b.result.stage
    return [k for k in KINDS if sa.name_of(k) != sb.name_of(k)]


def _speedup_of(s: StageSummary, baseline_key: str | None) -> tuple[float, tuple[float, float] | None] | None:
    if s.speedup is None:
        return None
    if s.key == baseline_key:
        return 1.0, (1.0, 1.0)     # the reference itself: exact
    return s.speedup, s.speedup_ci


def _quotient(mine: tuple[float, tuple[float, float] | None],
              theirs: tuple[float, tuple[float, float] | None]) -> tuple[float, tuple[float, float] | None]:
    """The ratio of two speedups and its interval: the quotient at the intervals' extremes. Only for a CSV import,
    which has no rounds to pair (module docstring)."""
    interval = ((mine[1][0] / theirs[1][1], mine[1][1] / theirs[1][0])
                if mine[1] is not None and theirs[1] is not None else None)
    return mine[0] / theirs[0], interval


def _gpu_time_ratio(mine: StageSummary, other: StageSummary) -> float | None:
    """The other stage's kernel time per step ÷ this one's (StageProfile), where both were traced on a GPU."""
    pm, po = mine.profile, other.profile
    return (po.gpu_kernel_ms / pm.gpu_kernel_ms if pm and po and pm.source == po.source == "cuda"
            and pm.gpu_kernel_ms and po.gpu_kernel_ms else None)


def _roles(a: StageSummary, b: StageSummary, kind: str) -> tuple[StageSummary, StageSummary]:
    """(the stage with the lever, the one it is set against): a vendor lever against its native twin; else the
    kind's baseline is the reference; else the earlier stage of the ladder."""
    la, lb = a.result.stage.lever(kind), b.result.stage.lever(kind)
    if lb.native == la.name or (lb.name != BASELINE_LEVERS[kind] and la.name == BASELINE_LEVERS[kind]):
        return b, a
    if la.native == lb.name or lb.name == BASELINE_LEVERS[kind]:
        return a, b
    return (b, a) if b.index > a.index else (a, b)


def _others_native(s: StageSummary, kind: str) -> int:
    """How many of the pair's shared levers are a vendor's (fewer: the lever is seen alone, among PyTorch's)."""
    return sum(1 for lever in s.result.stage.levers if lever.kind != kind and lever.vendor is not None)


def _words(c: Contribution) -> str:
    against = f"its native twin {c.against}" if c.native_twin else c.against + (
        f" (this run has no {c.twin_title} twin)" if c.twin_title else "")
    head = f"{c.lever} {c.context} against {against}"
    pair, d = f"{c.stage_key} vs {c.against_key}", c.decimals
    if c.interval is None:
        text = f"{head}: {times(c.ratio, d)}, no interval (one round): not a measured effect ({pair})"
    elif not c.measurable:
        text = f"{head}: " + _unsettled(c.paired, d, pair)
    else:
        way = "faster" if c.ratio > 1 else "slower"
        text = f"{head}: {times(c.ratio, d)} ({way}; 95% CI ×{span(*c.interval, d)}; {pair})"
    if c.launch_bound:
        bound = c.stage_key if c.bottleneck == Bound.LAUNCH else c.against_key
        extra = (f", {c.kernels_delta:+.0f} kernels a step" if c.kernels_delta is not None
                 and round(c.kernels_delta) != 0 else "")
        gpu = f"; GPU-time ratio ×{c.gpu_time_ratio:.2f}" if c.gpu_time_ratio else ""
        text += f" — launch-bound ({bound}{extra}): this figure depends on the host CPU{gpu}"
    return text + "."


def _pair(lever_side: StageSummary, other: StageSummary, kind: str,
          baseline_key: str | None) -> Contribution | None:
    paired = _paired(lever_side, other, baseline_key)
    if paired is None:
        return None
    lever: Lever = lever_side.result.stage.lever(kind)
    against: Lever = other.result.stage.lever(kind)
    pm, po = lever_side.profile, other.profile
    gpu_ratio = _gpu_time_ratio(lever_side, other)
    kernels = (pm.kernels_per_step - po.kernels_per_step if pm and po and pm.kernels_per_step is not None
               and po.kernels_per_step is not None else None)
    precision = lever_side.result.stage.precision_lever
    context = "" if kind == "precision" else (f"in {precision.title}" if precision.name in ("fp32", "tf32")
                                              else f"under {precision.title}")
    c = Contribution(lever=lever.title, kind=kind, against=against.title, native_twin=lever.native == against.name,
                     stage_key=lever_side.key, against_key=other.key, context=context, paired=paired,
                     bottleneck=lever_side.bottleneck.verdict, against_bottleneck=other.bottleneck.verdict,
                     gpu_time_ratio=gpu_ratio, kernels_delta=kernels,
                     twin_title=LEVERS[lever.native].title if lever.native and lever.native != against.name
                     else None, words="")
    return Contribution(**{**c.__dict__, "words": _words(c).replace("  ", " ")})


def contributions(summary: RunSummary) -> tuple[Contribution, ...]:
    """One contribution per lever the ladder changes (and, for a lever that is no precision, per precision it was
    measured in), from the best pair of ranked stages that differ by it alone; in ladder order."""
    stages = [s for s in summary.stages if s.ranked]
    best: dict[tuple[str, str, str], tuple[tuple[int, int, int, int], Contribution]] = {}
    for i, a in enumerate(stages):
        for b in stages[i + 1:]:
            if a.gpus != b.gpus:
                continue
            kinds = _differing(a, b)
            if len(kinds) != 1 or kinds[0] in SKIPPED_KINDS:
                continue
            kind = kinds[0]
            mine, other = _roles(a, b, kind)
            c = _pair(mine, other, kind, summary.baseline_key)
            if c is None:
                continue
            group = (kind, mine.result.stage.lever(kind).name,
                     "" if kind == "precision" else mine.result.stage.precision)
            # the native twin first, then the pair among PyTorch's own levers, then the earliest in the ladder
            rank = (0 if c.native_twin else 1, _others_native(mine, kind), mine.index, other.index)
            if group not in best or rank < best[group][0]:
                best[group] = (rank, c)
    order = {s.key: s.index for s in summary.stages}
    return tuple(c for _, c in sorted(best.values(), key=lambda rc: (order[rc[1].stage_key], rc[0])))


@dataclass(frozen=True)
class VendorEffect(_ReadsPaired):
    """A vendor's levers together: its stage with the most of them against that stage's native twin."""
    vendor: str                              # "Apex"
    stage_key: str
    twin_key: str                            # the same stage with each of the vendor's levers swapped for PyTorch's
    paired: PairedRatio                      # the twin's step time ÷ the vendor stage's (above 1: the vendor helps)
    words: str


def _vendor_words(effect: VendorEffect, pair: str) -> str:
    vendor, ratio, interval, d = effect.vendor, effect.ratio, effect.interval, effect.decimals
    if interval is None:
        return f"{vendor} against its native twin: {times(ratio, d)}, no interval (one round): not a measured " \
               f"effect ({pair})."
    if not effect.measurable:
        return f"{vendor} against its native twin: {_unsettled(effect.paired, d, pair)}."
    way = "adds about" if ratio > 1 else "costs about"
    return (f"{vendor} {way} {percent(ratio - 1, d)} here ({times(ratio, d)}; 95% CI ×{span(*interval, d)}; "
            f"{pair}).")


def vendor_effects(summary: RunSummary) -> tuple[VendorEffect, ...]:
    """Per vendor, its ranked stage with the most of its levers (and no other vendor's) whose native twin ran and
    is ranked: the combined effect of that vendor's levers, in ladder order."""
    ranked = {s.key: s for s in summary.stages if s.ranked}
    best: dict[str, tuple[tuple[int, float], StageSummary, StageSummary]] = {}
    for s in ranked.values():
        vendors = {lever.vendor.title for lever in s.result.stage.levers if lever.vendor}
        twin = s.result.stage.native_twin()
        other = ranked.get(twin.key) if twin is not None else None
        if len(vendors) != 1 or other is None:
            continue
        vendor = vendors.pop()
        # the most of its levers; among those, its fastest stage: the configuration one would run
        rank = (sum(1 for lever in s.result.stage.levers if lever.vendor), s.speedup or 0.0)
        if vendor not in best or rank > best[vendor][0]:
            best[vendor] = (rank, s, other)
    out = []
    for vendor, (_, s, twin_s) in sorted(best.items(), key=lambda kv: kv[1][1].index):
        paired = _paired(s, twin_s, summary.baseline_key)
        if paired is None:
            continue
        effect = VendorEffect(vendor, s.key, twin_s.key, paired, "")
        words = _vendor_words(effect, f"{s.key} vs {twin_s.key}")
        bound = next((x.key for x in (s, twin_s) if x.bottleneck.verdict == Bound.LAUNCH), None)
        if bound:
            gpu = _gpu_time_ratio(s, twin_s)
            words = words[:-1] + (f" — launch-bound ({bound}): this figure depends on the host CPU"
                                  + (f"; GPU-time ratio ×{gpu:.2f}" if gpu else "") + ".")
        out.append(replace(effect, words=words))
    return tuple(out)


@dataclass(frozen=True)
class CombinedEffect:
    """The fastest stage against the baseline where it is measurably faster but no lever on the way is: each
    pair's interval holds the process noise of both its stages, so effects too small for one pair can add up to
    one the stage's own interval shows."""
    stage_key: str
    baseline_key: str
    levers: tuple[str, ...]                  # the titles of the levers the two stages differ by
    ratio: float                             # the stage's speedup against the baseline
    interval: tuple[float, float]
    words: str


def combined_effect(summary: RunSummary, found: tuple[Contribution, ...]) -> CombinedEffect | None:
    """Said where the contributions read 'no measurable effect' for every lever of the fastest stage while the
    verdict gives that stage a measured speedup; None elsewhere."""
    fastest, base = summary.fastest, summary.stages[0] if summary.stages else None
    if fastest is None or base is None or fastest.key == base.key or fastest.speedup is None:
        return None
    interval = fastest.speedup_ci
    kinds = _differing(fastest, base)
    if interval is None or fastest.effect != Effect.MEASURED or any(k in SKIPPED_KINDS for k in kinds):
        return None
    stage = fastest.result.stage
    levers = tuple(stage.lever(k).title for k in kinds)
    own = [c for c in found if c.kind in kinds and c.lever == stage.lever(c.kind).title]
    if not own or any(c.measurable for c in own):
        return None
    together = levers[0] if len(levers) == 1 else ", ".join(levers[:-1]) + " and " + levers[-1]
    d = fastest.decimals
    words = (f"No single lever's effect is measurable here, but together {together} measure "
             f"{times(fastest.speedup, d)} (95% CI ×{span(*interval, d)}, {fastest.interval_text}; {fastest.key} vs "
             f"{base.key}): a pair's interval holds the noise of both its stages, so effects too small for one pair "
             "add up.")
    return CombinedEffect(fastest.key, base.key, levers, fastest.speedup, interval, words)


def contribution_lines(summary: RunSummary) -> tuple[str, ...]:
    """Each contribution's words, what they measure together where none alone is measurable, then each vendor's
    levers together: the first block of every view."""
    found = contributions(summary)
    combined = combined_effect(summary, found)
    return (tuple(c.words for c in found) + ((combined.words,) if combined else ())
            + tuple(v.words for v in vendor_effects(summary)))
