"""The answer: what to switch on, with its speedup over the user's current setup (the interval across processes),
tokens/s, MFU against the GPU's BF16 dense peak, peak memory; the runner-up and what separates them ("either" where
their intervals overlap); the contributions that make the difference (results.contributions); what it saves over
--tokens; the recipe (the stage's own snippet); and the limits: what was not searched and why, and what decides a
launch-bound leader. Typed, with a JSON round-trip."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from bench_core.measure.metrics import rates
from bench_core.measure.stats import time_interval
from bench_core.recommend.check import Checked
from bench_core.recommend.memory import MemoryBudget
from bench_core.recommend.planner import Label, Searched, versus
from bench_core.recommend.space import Exclusion

LAUNCH_BOUND_LIMIT = ("the leader is launch-bound: the host's time to issue its kernels sets its pace, so the host "
                      "(its CPU, its load) decides this figure; CUDA graphs or a larger batch are the remedy")


@dataclass(frozen=True)
class Ranked:
    """One candidate as the answer shows it."""
    key: str
    stage: str
    batch_size: int
    label: str
    step_ms: float | None          # measured median across processes, else the prediction's
    tokens_per_s: float | None
    mfu: float | None              # against the BF16 dense peak of the datasheet (FP8 stages too)
    peak_gib: float | None         # measured where it ran, else the memory filter's
    processes: int
    dropped: str

    @classmethod
    def of(cls, s: Searched, seq_len: int, gpu: str | None, cfg: Any) -> Ranked:
        measured = s.measurement is not None and bool(s.measurement.rounds_ms)
        step = time_interval([list(r) for r in s.measurement.rounds_ms])[1] if measured and s.measurement else \
            s.predicted.step_ms
        r = rates(cfg, step, gpu, s.candidate.stage.precision_lever.peak)
        peak = s.measurement.peak_mib / 1024 if measured and s.measurement and s.measurement.peak_mib else \
            s.fit.peak_gib
        return cls(s.candidate.key, s.candidate.stage.key, s.candidate.batch_size, s.label.value, step,
                   r.tokens_per_s, r.mfu, peak, s.measurement.processes if s.measurement else 0, s.dropped)


@dataclass(frozen=True)
class Savings:
    tokens: int
    gpu_hours_from: float
    gpu_hours: float
    energy_kwh_saved: float | None   # from measured J/token; None: not measured (no NVML, CPU)
    cost_saved: float | None         # with --gpu-price; None: no price given
    note: str = ""


@dataclass(frozen=True)
class Recommendation:
    model: str
    device: str
    gpu: str | None
    from_key: str
    recommended: Ranked | None
    either: bool                     # the runner-up's interval overlaps the leader's: either will do
    runner_up: Ranked | None
    separation: str                  # what separates them, in one sentence
    speedup: float | None            # over --from, per token
    speedup_low: float | None
    speedup_high: float | None
    speedup_scope: str
    contributions: tuple[str, ...]
    savings: Savings | None
    recipe: str
    limits: tuple[str, ...]
    tokens_per_step: str             # held constant or not, said
    memory: MemoryBudget | None
    stop: str
    candidates: tuple[Ranked, ...]
    excluded: tuple[Exclusion, ...]
    history_run: str | None = None   # the History's run holding the stages measured at the leader's batch
    recommendation_id: str = field(default="")
    next_best: str = ""              # the predictor's best candidate other than the leader (the check set's)
    check: tuple[Checked, ...] = ()  # the check set, measured end to end (--check-set)

    def to_json(self) -> str:
        return json.dumps({"kind": "recommendation", **asdict(self)}, indent=1)

    @classmethod
    def from_json(cls, text: str | bytes) -> Recommendation:
        data = json.loads(text)
        data.pop("kind", None)
        nested = {"recommended": Ranked, "runner_up": Ranked}
        for name, kind in nested.items():
            data[name] = kind(**data[name]) if data.get(name) else None
        data["savings"] = Savings(**data["savings"]) if data.get("savings") else None
        data["memory"] = MemoryBudget(**data["memory"]) if data.get("memory") else None
        data["candidates"] = tuple(Ranked(**c) for c in data["candidates"])
        data["excluded"] = tuple(Exclusion.from_dict(e) for e in data["excluded"])
        data["check"] = tuple(Checked.from_dict(c) for c in data.get("check", ()))
        for name in ("contributions", "limits"):
            data[name] = tuple(data[name])
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def is_recommendation_json(data: bytes | str) -> bool:
    try:
        return json.loads(data).get("kind") == "recommendation"
    except (ValueError, AttributeError):
        return False


def _recommendable(states: list[Searched]) -> list[Searched]:
    ok = [s for s in states if s.label is Label.MEASURED]
    return sorted(ok, key=lambda s: time_interval(s.per_token_rounds())[1])


def leader_and_runner_up(states: list[Searched]) -> tuple[Searched | None, Searched | None, bool, str]:
    """The fastest verified candidate, the next, whether either will do, and what separates them."""
    ranked = _recommendable(states)
    if not ranked:
        return None, None, False, "no candidate was measured with verified kernels"
    if len(ranked) == 1:
        return ranked[0], None, False, "no other candidate was measured with verified kernels"
    lead, second = ranked[0], ranked[1]
    interval = versus(lead, second)
    if interval is None:
        return lead, second, True, "no interval between them"
    either = not interval.low > 1.0
    words = (f"{lead.candidate.key} is x{interval.low:.2f}-x{interval.high:.2f} as fast per token as "
             f"{second.candidate.key} ({interval.text})")
    return lead, second, either, words + ("; the interval holds x1.00: either" if either else "")


def savings_of(tokens: int | None, lead: Ranked, base: Ranked, energy: tuple[float | None, float | None],
               price: float | None) -> Savings | None:
    """GPU-hours for `tokens` at each side's measured tokens/s; energy from each side's measured J/token."""
    if not tokens or not lead.tokens_per_s or not base.tokens_per_s:
        return None
    hours_base, hours = tokens / base.tokens_per_s / 3600, tokens / lead.tokens_per_s / 3600
    e_lead, e_base = energy
    kwh = (e_base - e_lead) * tokens / 3.6e6 if e_lead is not None and e_base is not None else None
    cost = (hours_base - hours) * price if price is not None else None
    note = "" if kwh is not None else "energy not measured here (no GPU power reading)"
    return Savings(tokens, hours_base, hours, kwh, cost, note)


def text(rec: Recommendation) -> str:
    """The answer as the terminal prints it."""
    lines = [f"Recommendation for {rec.model} on {rec.gpu or rec.device}"]
    r = rec.recommended
    if r is None:
        lines.append("  no recommendation: " + rec.separation)
    else:
        head = "either" if rec.either and rec.runner_up else "switch on"
        lines.append(f"  {head}: {r.stage} at batch {r.batch_size}"
                     + (f"  or  {rec.runner_up.stage} at batch {rec.runner_up.batch_size}"
                        if rec.either and rec.runner_up else ""))
        if rec.speedup is not None:
            lines.append(f"  over {rec.from_key}: x{rec.speedup:.2f} (x{rec.speedup_low:.2f}-x{rec.speedup_high:.2f}, "
                         f"{rec.speedup_scope})")
        lines.append(f"  {r.tokens_per_s or 0:,.0f} tokens/s"
                     + (f", MFU {r.mfu:.1%} of the BF16 dense peak" if r.mfu is not None else ", no MFU (no GPU peak)")
                     + (f", peak {r.peak_gib:.2f} GiB" if r.peak_gib is not None else ""))
        lines.append(f"  runner-up: {rec.separation}")
    lines += [f"  {c}" for c in rec.contributions]
    if rec.savings:
        s = rec.savings
        lines.append(f"  for {s.tokens:,} tokens: {s.gpu_hours:,.2f} GPU-hours instead of {s.gpu_hours_from:,.2f}"
                     + (f", {s.energy_kwh_saved:,.2f} kWh saved" if s.energy_kwh_saved is not None else "")
                     + (f", {s.cost_saved:,.2f} saved at the price given" if s.cost_saved is not None else "")
                     + (f" ({s.note})" if s.note else ""))
    lines.append(f"  tokens per step: {rec.tokens_per_step}")
    if rec.memory:
        lines.append(f"  memory budget {rec.memory.gib:.1f} GiB: {rec.memory.why}")
    lines.append(f"  stopped: {rec.stop}")
    lines += ["  limits:"] + [f"    {line}" for line in rec.limits]
    lines += ["  not searched:"] + [f"    {e.text}" for e in rec.excluded]
    if rec.check:
        lines.append("  check set (end to end):")
        lines += [f"    {c.key}: " + (f"{c.us_per_token:.3f} us/token ({c.us_per_token_low:.3f}-"
                                       f"{c.us_per_token_high:.3f}), {c.processes} process(es)"
                                       + (f", MFU {c.mfu:.1%}" if c.mfu is not None else "")
                                       if c.us_per_token is not None else f"no figure ({c.failed})")
                  + f" [{', '.join(c.roles)}]" for c in rec.check]
    if r is not None:
        lines += ["  recipe:"] + [f"    {line}" for line in rec.recipe.splitlines()]
    return "\n".join(lines)
