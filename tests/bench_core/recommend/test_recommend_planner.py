"""The planner on synthetic timings with known true step times: it finds the fastest, stops early once it
separates (fewer processes than measuring every candidate to the cap), answers "either" for a true tie, never
recommends a candidate whose kernels did not verify, and stops at the budget keeping what it measured."""
import random
from dataclasses import replace

from bench_core.levers.stage import Stage
from bench_core.recommend.answer import leader_and_runner_up
from bench_core.recommend.memory import Fit, PeakSource
from bench_core.recommend.planner import KEPT_FOR_CONFIRMING, MAX_PROCESSES, Label, Measurement, Planner, Searched, Stop
from bench_core.recommend.predict import Predicted
from bench_core.recommend.space import Candidate

STAGES = [Stage("adam", "layernorm", "fp32"), Stage("adam-fused", "layernorm", "fp32"),
          Stage("adam", "layernorm", "bf16"), Stage("adam-fused", "layernorm", "bf16"),
          Stage("adam-loop", "layernorm", "fp32"), Stage("adam-loop", "layernorm", "bf16")]
SPREAD = 0.01   # each process's steps: lognormal-ish noise of 1% around the true time
STEPS = 20


def searched(true_ms, fits=None):
    out = []
    for i in range(len(true_ms)):
        c = Candidate(STAGES[i], 8)
        fit = Fit(c, 1.0, PeakSource.UPPER_BOUND, True if fits is None else fits[i])
        out.append(Searched(c, Predicted(None), fit, tokens=8 * 64))
    return out


def synthetic(true_ms, unverified=(), seed=0):
    rng = random.Random(seed)  # noqa: S311 (synthetic timings, not cryptography)
    by_key = {Candidate(STAGES[i], 8): (ms, i in unverified) for i, ms in enumerate(true_ms)}
    calls = []

    def measure(c, processes):
        ms, bad = by_key[c]
        calls.append((c, processes))
        rounds = tuple(tuple(ms * (1 + rng.gauss(0, SPREAD)) for _ in range(STEPS)) for _ in range(processes))
        return Measurement(rounds, verified=not bad, verdict="fallback" if bad else "verified", seconds=1.0 * processes)
    return measure, calls


class Clock:
    """The planner's clock, advanced by each process the measurement runs, at `seconds` a process; the measurement
    reports the same seconds, so the planner's budget and its costs read one time."""
    def __init__(self, measure, seconds: float):
        self.now, self._measure, self.seconds = 0.0, measure, seconds

    def __call__(self) -> float:
        return self.now

    def measure(self, c, processes):
        self.now += self.seconds * processes
        return replace(self._measure(c, processes), seconds=self.seconds * processes)


def leader(states):
    live = [s for s in states if not s.dropped and s.label == Label.MEASURED]
    return min(live, key=lambda s: sum(s.measurement.rounds_ms[0]))


def test_a_clear_winner_is_found_and_the_search_stops_early():
    true = [30.0, 20.0, 12.0, 10.0, 40.0, 14.0]
    measure, calls = synthetic(true)
    planner = Planner(measure, budget_s=None)
    states = planner.run(searched(true))
    assert planner.stop is Stop.SEPARATED
    assert leader(states).candidate.stage == STAGES[3]
    processes = sum(p for _, p in calls)
    assert processes < len(true) * MAX_PROCESSES, "stopping early must cost fewer processes than the exhaustive cap"
    assert all(s.dropped for s in states if s.candidate.stage != STAGES[3])
    assert leader_and_runner_up(states)[2] is False


def test_a_tie_runs_to_the_cap_and_stays_either():
    true = [10.0, 10.0, 30.0]
    measure, _ = synthetic(true, seed=3)
    planner = Planner(measure, budget_s=None)
    states = planner.run(searched(true))
    assert planner.stop is Stop.PROCESS_CAP
    live = {s.candidate.stage for s in states if not s.dropped}
    assert live == {STAGES[0], STAGES[1]}
    assert leader_and_runner_up(states)[2] is True, "a tie's answer is either"


def test_unverified_kernels_are_never_the_leader():
    true = [30.0, 5.0, 12.0]
    measure, _ = synthetic(true, unverified={1})
    states = Planner(measure, budget_s=None).run(searched(true))
    by_stage = {s.candidate.stage: s for s in states}
    assert by_stage[STAGES[1]].label is Label.UNVERIFIED and by_stage[STAGES[1]].dropped
    assert leader(states).candidate.stage == STAGES[2]


def test_a_candidate_that_does_not_fit_is_not_measured():
    true = [30.0, 5.0, 12.0]
    measure, calls = synthetic(true)
    Planner(measure, budget_s=None).run(searched(true, fits=[True, False, True]))
    assert STAGES[1] not in {c.stage for c, _ in calls}


def test_the_budget_stops_before_a_launch_that_would_overrun_it_and_keeps_what_was_measured():
    true = [10.0, 10.5, 11.0, 11.5]
    measure, calls = synthetic(true)
    clock = Clock(measure, 1.0)
    planner = Planner(clock.measure, budget_s=5.5, clock=clock)
    states = planner.run(searched(true))
    assert planner.stop is Stop.BUDGET
    assert clock.now <= 5.5
    assert sum(s.measurement.processes for s in states if s.measurement) == sum(p for _, p in calls)


def test_ctrl_c_keeps_what_was_measured():
    true = [10.0, 20.0, 30.0]
    measure, _ = synthetic(true)
    seen = []

    def interrupted(c, processes):
        if seen:
            raise KeyboardInterrupt
        seen.append(c)
        return measure(c, processes)
    planner = Planner(interrupted, budget_s=None)
    states = planner.run(searched(true))
    assert planner.stop is Stop.CANCELLED
    assert [s.candidate for s in states if s.measurement] == seen


def test_a_leader_measured_alone_is_not_said_to_have_separated():
    """With one candidate the budget affords, nothing was compared: the stop says so instead of "separated"."""
    true = [10.0, 12.0, 14.0]
    states = searched(true)
    measure, calls = synthetic(true)
    clock = Clock(measure, 10.0)   # each process takes the 10 s the cap priced it at
    planner = Planner(clock.measure, 30.0, process_cost=lambda c: 10.0,   # one first process + 4 confirming: one fits
                      clock=clock)
    planner.run(states)
    assert planner.stop is Stop.ALONE and len({c for c, _ in calls}) == 1


def test_a_budget_that_first_processes_would_fill_keeps_time_to_confirm_the_leader():
    """Six candidates at 1 s a process and 7.5 s: measuring every first process would leave the leader measured
    once, its interval within one process. The reserve stops first processes while the confirming
    ones still fit, so the leader and the runner-up each run twice."""
    true = [10.0, 10.5, 11.0, 11.5, 12.0, 12.5]
    measure, calls = synthetic(true)
    clock = Clock(measure, 1.0)
    planner = Planner(clock.measure, budget_s=7.5, clock=clock)
    states = planner.run(searched(true))
    assert clock.now <= 7.5
    lead, second, _, _ = leader_and_runner_up(states)
    assert lead.measurement.processes >= 2 and second.measurement.processes >= 2
    kept = [s for s in states if s.measurement is None]
    assert kept and all(s.dropped == KEPT_FOR_CONFIRMING for s in kept)


def test_the_cap_is_drawn_again_at_what_processes_took_and_a_passed_over_candidate_comes_back():
    """A compile assumed at 60 s a process passes over the second compiled candidate and the eager one; the first
    compiled process takes 10 s, so the cap drawn again takes both back."""
    stages = [Stage("adam-fused", "layernorm", "bf16", "compile"), Stage("adam", "layernorm", "bf16", "compile"),
              Stage("adam-fused", "layernorm", "bf16")]
    true = {c: ms for c, ms in zip((Candidate(s, 8) for s in stages), (10.0, 10.2, 12.0), strict=True)}
    rng = random.Random(1)  # noqa: S311 (synthetic timings)

    def measure(c, processes):
        rounds = tuple(tuple(true[c] * (1 + rng.gauss(0, SPREAD)) for _ in range(STEPS)) for _ in range(processes))
        return Measurement(rounds, verified=True, verdict="verified")
    clock = Clock(measure, 10.0)   # every process takes 10 s

    def predicted_cost(c):
        return 60.0 if c.stage.compile_lever.traces_model else 10.0
    states = [Searched(c, Predicted(None), Fit(c, 1.0, PeakSource.UPPER_BOUND, True), tokens=8 * 64) for c in true]
    planner = Planner(clock.measure, budget_s=120.0, process_cost=predicted_cost, clock=clock)
    result = {s.candidate.stage: s for s in planner.run(states)}
    assert all(result[s].measurement for s in stages), "the passed-over candidates were measured"
    assert "drawn again" in planner.cap.why and clock.now <= 120.0
