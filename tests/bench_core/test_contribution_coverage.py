"""The contribution's interval and its three outcomes, simulated end to end through summarize() and contributions()
on runs whose processes are bimodal: each process is "slow" (+SLOW) with probability P_SLOW, independently on each
side, as a process whose allocator or autotuner drew badly; round k of both stages also shares a drift, and each step
has its own noise. The true ratio is known, so what the interval and its words claim can be checked against it.

What is asserted, and why it must hold:
- coverage: the 95% interval holds the true ratio in at least 0.95 less 3 binomial standard errors of the runs
  (a correct 95% interval lands below that about once in 700 such tests). Each side's slow processes have the same
  law, so a process's log-ratio is symmetric about the true log-ratio: the t-interval's centre is unbiased.
- "no measurable effect" where the true ratio lies outside the 3% margin: its interval lies inside the margin and
  holds ×1.00, so it misses the truth. That is asserted run by run (an implication, not a rate): the old rule (any
  interval holding ×1.00 is "no effect") breaks it wherever a wide interval holds both ×1.00 and the truth.
- at a true ratio of ×1.00, "measured" (a false effect) is a miss too: at most 0.05 plus 3 binomial standard errors.
"""
import math
import random
from dataclasses import replace

import pytest
from sample_runs import gpu_run

from bench_core.levers.stage import Stage
from bench_core.measure.stats import EQUIVALENCE, Effect
from bench_core.results.contributions import contributions
from bench_core.results.records import Status, initial_stage
from bench_core.results.summary import summarize

P_SLOW, SLOW = 0.25, 0.40           # a process is 40% slower a quarter of the time
DRIFT, PROCESS, STEP = 0.02, 0.01, 0.01   # log-scale sd: a round's shared drift, a process's own offset, a step
STEPS = 4
RUNS = 1000
LEVEL = 0.95


def _floor(runs: int = RUNS, level: float = LEVEL) -> float:
    return level - 3 * math.sqrt(level * (1 - level) / runs)


def _process(rng: random.Random, ms: float, drift: float) -> list[float]:
    level = ms * math.exp(drift + rng.gauss(0, PROCESS)) * (1 + SLOW if rng.random() < P_SLOW else 1.0)
    return [level * math.exp(rng.gauss(0, STEP)) for _ in range(STEPS)]


def _run(rng: random.Random, processes: int, ratio: float):
    """Adam against Adam fused (the lever) in FP32, `processes` rounds each; the lever's true ratio `ratio`."""
    base, lever = [], []
    for _ in range(processes):
        drift = rng.gauss(0, DRIFT)
        base.append(_process(rng, 100.0, drift))
        lever.append(_process(rng, 100.0 / ratio, drift))
    run = gpu_run()
    stages = tuple(replace(initial_stage(i, stage, STEPS), status=Status.OK, verdict="verified",
                           rounds=(STEPS,) * processes, times_ms=tuple(t for r in rounds for t in r))
                   for i, (stage, rounds) in enumerate(((Stage("adam", "layernorm", "fp32"), base),
                                                        (Stage("adam-fused", "layernorm", "fp32"), lever))))
    return replace(run, stages=stages)


def _simulate(processes: int, ratio: float, seed: int):
    rng = random.Random(seed)  # noqa: S311 (statistics, not cryptography)
    out = []
    for _ in range(RUNS):
        (c,) = contributions(summarize(_run(rng, processes, ratio)))
        assert c.paired.processes == processes
        out.append(c)
    return out


@pytest.mark.parametrize("processes", [3, 5])
def test_the_contribution_interval_covers_a_bimodal_effect_and_never_calls_a_missed_one_no_effect(processes):
    ratio = (1 + EQUIVALENCE) * 1.01    # just outside the margin: the hardest case for "no measurable effect"
    found = _simulate(processes, ratio, seed=processes)
    covered = sum(c.interval[0] <= ratio <= c.interval[1] for c in found) / RUNS
    assert covered >= _floor(), covered
    assert all(c.interval[0] <= c.ratio <= c.interval[1] for c in found)   # the point lies inside its interval
    said = [c for c in found if c.effect == Effect.NO_MEASURABLE_EFFECT]
    assert all(not c.interval[0] <= ratio <= c.interval[1] for c in said)


@pytest.mark.parametrize("processes", [3, 5])
def test_a_lever_with_no_effect_is_measured_no_more_often_than_the_interval_misses(processes):
    found = _simulate(processes, 1.0, seed=20 + processes)
    measured = sum(c.effect == Effect.MEASURED for c in found) / RUNS
    assert measured <= 1 - _floor(), measured
    # and the words follow the one classification every view reads
    assert all(("inconclusive: ×" in c.words) == (c.effect == Effect.INCONCLUSIVE) for c in found)
