"""Which candidates the end-to-end phase takes, before it runs any.

The rule: a candidate is measured only if its predicted time per token at its fastest could beat the slowest
predicted time of the best contender (the lowest predicted upper bound among the candidates that can still win).
That contender will take at most its upper bound, so one whose lower bound lies above it loses unless the
predictor's own interval is wrong; a prediction left open (the estimate, a candidate not timed) bounds nothing and
is never dropped on it. A contender that then fails or does not verify leaves the race, and the bound is drawn
again from those left (the planner re-applies the rule before each round).

The cap: which candidates the budget affords end to end, in the order they are measured (best predicted first);
one too costly to fit is passed over, and cheaper ones after it are still taken.
Each one's first process costs the machine's fixed cost a process, its compile where the stage compiles
(machine.stage_costs: measured here or assumed, said so) and its warm-up and timed steps at its predicted step
time; CONFIRM_PROCESSES more are held back, so that the leader and the runner-up reach a second process and --from
two, the fewest for an interval across processes on both of the answer's comparisons.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench_core.config.bench_config import BenchConfig
from bench_core.machine.stage_costs import StageCosts
from bench_core.recommend.predict import Predicted
from bench_core.recommend.space import Candidate

CONFIRM_PROCESSES = 4
PREDICTED_NOT_MEASURED = "predicted, not measured"


@dataclass(frozen=True)
class Contender:
    """What the rule reads of a candidate: its predicted time per token (fastest, point, slowest)."""
    candidate: Candidate
    predicted: Predicted
    tokens: int

    @property
    def bounds(self) -> tuple[float, float, float]:
        return self.predicted.per_token(self.tokens)


def best_bound(contenders: Sequence[Contender]) -> Contender | None:
    """The contender with the lowest predicted upper bound per token; None where every bound is open."""
    bounded = [c for c in contenders if math.isfinite(c.bounds[2])]
    return min(bounded, key=lambda c: c.bounds[2], default=None)


def predicted_slower(c: Contender, best: Contender | None) -> str | None:
    """Why `c` is not measured (its fastest is above the best contender's slowest), or None: it could still win."""
    if best is None or c.candidate == best.candidate:
        return None
    low, bound = c.bounds[0], best.bounds[2]
    if low <= bound:
        return None
    return (f"{PREDICTED_NOT_MEASURED}: predicted slower than {best.candidate.key} by at least {low / bound - 1:.1%} "
            f"per token (its fastest {low * 1e3:.3f} us/token, above that one's slowest {bound * 1e3:.3f})")


def process_seconds(cfg: BenchConfig, c: Candidate, predicted: Predicted, costs: StageCosts) -> float | None:
    """One process of `c`: fixed cost, compile where it compiles, warm-up and timed steps at the predicted step
    (None where no step time is predicted)."""
    if not predicted.step_ms:
        return None
    compiles = c.stage.compile_lever.traces_model
    return costs.fixed_s + (costs.compile_s if compiles else 0.0) + (cfg.warmup + cfg.iters) * predicted.step_ms / 1e3


@dataclass(frozen=True)
class Cap:
    chosen: tuple[Candidate, ...] | None   # the candidates the end-to-end phase may take; None: no cap
    why: str

    @property
    def count(self) -> int | None:
        return None if self.chosen is None else len(self.chosen)


def affordable(ordered: Sequence[Candidate], cost: Callable[[Candidate], float | None],
               budget_s: float | None, at_least_one: bool = True) -> Cap:
    """The candidates of `ordered`, in order, whose first processes plus CONFIRM_PROCESSES at their mean cost fit
    `budget_s`; one that would not fit is passed over (a compile's cost, say) and cheaper ones after it still taken;
    at least one unless `at_least_one` is False (the budget check before each launch still holds)."""
    if budget_s is None:
        return Cap(None, "no budget: no cap")
    spent = 0.0
    chosen: list[Candidate] = []
    passed: list[Candidate] = []
    for c in ordered:
        seconds = cost(c)
        if seconds is None:
            return Cap(None, f"no cap: {c.key}'s process cost cannot be predicted (no step time)")
        mean = (spent + seconds) / (len(chosen) + 1)
        if spent + seconds + CONFIRM_PROCESSES * mean > budget_s and (chosen or not at_least_one):
            passed.append(c)
            continue
        spent, chosen = spent + seconds, chosen + [c]
    return Cap(tuple(chosen), f"{len(chosen)} candidate(s): their first processes (predicted {spent:.0f} s) and "
                              f"{CONFIRM_PROCESSES} confirming processes fit the {budget_s:.0f} s left"
                              + (f"; {len(passed)} passed over as too costly to fit" if passed else ""))


def beyond_cap(cap: Cap) -> str:
    return f"{PREDICTED_NOT_MEASURED}: beyond the cap of {cap.count} candidate(s) the budget affords ({cap.why})"
