"""The end-to-end phase's intake: the pruning rule on synthetic predictions (a candidate predicted slower beyond
the best contender's bound is never measured, one inside it is, and one held comes back when that contender fails),
the cap derived from the budget and each candidate's predicted cost, the timed predictor's wiring with a stand-in
timing function, and the check set in the answer's JSON."""
import itertools
import math

from bench_core.config.bench_config import BenchConfig
from bench_core.machine.stage_costs import StageCosts
from bench_core.recommend.answer import Recommendation
from bench_core.recommend.check import CHECK_PROCESSES, DECLARED, NEXT_BEST, RECOMMENDED, measure_check_set
from bench_core.recommend.planner import Label, Planner
from bench_core.recommend.predict import TIMING_CHUNK, Predicted, PredictionSource, TimedPredictor
from bench_core.recommend.prune import CONFIRM_PROCESSES, PREDICTED_NOT_MEASURED, affordable, process_seconds
from bench_core.recommend.space import Candidate
from bench_core.sweep.timing.timings import KernelTime, PointTimings
from bench_core.sweep.timing.variants import step_parts
from tests.bench_core.recommend.test_recommend_planner import STAGES, Clock, searched, synthetic

TOKENS = 8 * 64


def predicted(states, ms):
    """Each candidate predicted at (low, point, high) ms a step."""
    return [s.__class__(s.candidate, Predicted(p, lo, hi, source=PredictionSource.TIMED), s.fit, s.tokens)
            for s, (lo, p, hi) in zip(states, ms, strict=True)]


def measured_keys(calls):
    return {c for c, _ in calls}


def test_a_candidate_predicted_slower_beyond_the_best_bound_is_never_measured_and_one_inside_is():
    true = [10.0, 10.4, 20.0]
    states = predicted(searched(true), [(9.5, 10.0, 11.0), (9.0, 10.4, 12.0), (18.0, 20.0, 22.0)])
    measure, calls = synthetic(true)
    out = {s.candidate: s for s in Planner(measure, None).run(states)}
    slow, inside = states[2].candidate, states[1].candidate
    assert slow not in measured_keys(calls)
    assert out[slow].label is Label.PREDICTED
    assert out[slow].dropped.startswith(PREDICTED_NOT_MEASURED) and states[0].candidate.key in out[slow].dropped
    assert inside in measured_keys(calls)


def test_an_open_prediction_is_never_dropped_on_the_rule():
    true = [10.0, 30.0]
    states = predicted(searched(true), [(9.5, 10.0, 11.0), (None, 30.0, None)])
    measure, calls = synthetic(true)
    Planner(measure, None, max_processes=1).run(states)
    assert states[1].candidate in measured_keys(calls)


def test_a_held_candidate_comes_back_when_the_contender_bounding_it_fails_to_verify():
    true = [10.0, 20.0]
    states = predicted(searched(true), [(9.5, 10.0, 11.0), (18.0, 20.0, 22.0)])
    measure, calls = synthetic(true, unverified=(0,))
    out = {s.candidate: s for s in Planner(measure, None).run(states)}
    assert states[1].candidate in measured_keys(calls)
    assert out[states[1].candidate].label is Label.MEASURED


def test_the_cap_takes_the_candidates_whose_first_processes_and_the_confirming_ones_fit_the_budget():
    cost, budget = 10.0, 100.0
    ordered = [Candidate(s, 8) for s in STAGES]
    cap = affordable(ordered, lambda c: cost, budget)
    # k first processes plus CONFIRM_PROCESSES at the same cost within the budget
    assert cap.count == math.floor(budget / cost) - CONFIRM_PROCESSES
    assert affordable(ordered, lambda c: cost, None).count is None
    assert affordable(ordered, lambda c: None, budget).count is None
    assert affordable(ordered, lambda c: cost, 1.0).count == 1   # the first always runs: the budget check stops


def test_a_candidate_too_costly_to_fit_is_passed_over_and_cheaper_ones_after_it_are_still_taken():
    """A compiled stage predicted fastest but costing a compile the budget cannot afford must not stop the eager
    candidates behind it from running."""
    ordered = [Candidate(s, 8) for s in STAGES[:4]]
    costly = ordered[1]
    cap = affordable(ordered, lambda c: 500.0 if c == costly else 10.0, 100.0)
    assert cap.chosen is not None and costly not in cap.chosen
    assert [c for c in ordered if c != costly][:3] == list(cap.chosen) and "passed over" in cap.why


def test_a_process_costs_its_fixed_part_its_compile_where_it_compiles_and_its_steps():
    costs = StageCosts("cuda", fixed_s=3.0, compile_s=40.0)
    cfg = BenchConfig(warmup=5, iters=20)
    eager = Candidate(STAGES[0], 8)
    compiled = Candidate(STAGES[0].replace(compile="compile"), 8)
    assert process_seconds(cfg, eager, Predicted(100.0), costs) == 3.0 + 25 * 0.1
    assert process_seconds(cfg, compiled, Predicted(100.0), costs) == 3.0 + 40.0 + 25 * 0.1
    assert process_seconds(cfg, eager, Predicted(None), costs) is None


def test_the_planner_never_measures_a_candidate_beyond_the_cap():
    true = [10.0, 10.1, 10.2, 10.3, 10.4, 10.5]
    states = searched(true)   # open predictions: the rule drops none, the cap does
    measure, calls = synthetic(true)
    cost, budget = 10.0, 60.0

    clock = Clock(measure, cost)   # each process takes what the cap priced it at: drawing it again changes nothing
    planner = Planner(clock.measure, budget, process_cost=lambda c: cost, clock=clock)
    out = planner.run(states)
    assert planner.cap is not None and planner.cap.count == math.floor(budget / cost) - CONFIRM_PROCESSES
    assert len(measured_keys(calls)) == planner.cap.count
    assert sum(1 for s in out if s.dropped.startswith(PREDICTED_NOT_MEASURED)) == 6 - planner.cap.count


def timings_for(stage, one_ms, two_ms, depth=4):
    one, two = step_parts(stage)
    return PointTimings((KernelTime(one[0], one[1], one_ms, one_ms * 0.95, one_ms * 1.05, 0, 1),
                         KernelTime(two[0], two[1], two_ms, two_ms * 0.95, two_ms * 1.05, 0, 1)), 0.0, depth)


class Estimate:
    def __call__(self, candidates):
        return {c: Predicted(5.0 * (i + 1), source=PredictionSource.ESTIMATE, note="est")
                for i, c in enumerate(candidates)}


def test_the_timed_predictor_predicts_each_timed_candidate_and_keeps_the_estimate_where_it_could_not_time():
    cands = [Candidate(STAGES[0], 8), Candidate(STAGES[1], 8)]
    seen = []

    def stand_in(order, cancel):
        seen.extend(order)
        yield 0, timings_for(order[0].stage, 2.0, 3.0), ()
        yield 1, None, ("an FP8 GEMM cannot run here",)
    out = TimedPredictor(stand_in, Estimate())(cands)
    assert seen == cands   # best estimated first
    timed, untimed = out[cands[0]], out[cands[1]]
    assert timed.source is PredictionSource.TIMED and timed.step_ms == 2.0 + 3 * (3.0 - 2.0)
    assert timed.low_ms is not None and timed.low_ms < timed.step_ms < timed.high_ms
    assert untimed.source is PredictionSource.ESTIMATE and "FP8 GEMM" in untimed.note


def test_the_timed_predictor_stops_at_its_share_of_the_budget():
    cands = [Candidate(s, 8) for s in STAGES[:3]]
    ticks = itertools.count(0.0, 10.0)   # each look at the clock: 10 s later
    cancelled = []

    def stand_in(order, cancel):
        for i, c in enumerate(order):
            cancelled.append(cancel.is_set())
            yield i, timings_for(c.stage, 2.0, 3.0), ()
    p = TimedPredictor(stand_in, Estimate(), budget_s=15.0, clock=lambda: next(ticks))
    out = p(cands)
    assert [out[c].source for c in cands].count(PredictionSource.TIMED) < len(cands)
    assert any("share of the budget ran out" in out[c].note for c in cands)


def timed_at(seconds_each, cands, measuring_s):
    """A timing process that takes `seconds_each` a candidate on a clock it advances, and a predictor over it whose
    end-to-end process is predicted at `measuring_s`; returns the predictions and how many were timed."""
    now = [0.0]
    timed = []

    def stand_in(order, cancel):
        for i, c in enumerate(order):
            if cancel.is_set():
                return
            now[0] += seconds_each
            timed.append(c)
            yield i, timings_for(c.stage, 2.0, 3.0), ()
    p = TimedPredictor(stand_in, Estimate(), clock=lambda: now[0], process_cost=lambda c, est: measuring_s)
    return p, p(cands), timed


def test_the_timed_predictor_stops_where_timing_a_candidate_costs_more_than_measuring_it():
    cands = [Candidate(s, 8) for s in STAGES[:6]]
    p, out, timed = timed_at(25.0, cands, measuring_s=15.0)   # llama-1b on an H100: about 25 s a prediction
    assert len(timed) == 2    # the first (it carries the process start) and one after it, which cost more
    assert p.stopped and "measuring is the cheaper way" in p.stopped
    untimed = [c for c in cands if c not in timed]
    assert all(out[c].source is PredictionSource.ESTIMATE and "measuring is the cheaper" in out[c].note
               for c in untimed)


def test_the_timed_predictor_times_every_candidate_while_timing_is_the_cheaper():
    cands = [Candidate(s, 8) for s in STAGES[:6]]
    p, out, timed = timed_at(10.0, cands, measuring_s=15.0)
    assert len(timed) == len(cands) and not p.stopped
    assert all(out[c].source is PredictionSource.TIMED for c in cands)


def test_the_timed_predictor_hands_each_timing_process_one_wave_of_candidates_best_estimated_first():
    """A timing process compiles every compiled step it is given before it times any (sweep.timing.ahead): given
    608 candidates on an H100 it spent the whole share compiling and timed none. Handed a wave at a time, the first
    timings come after one wave, and every candidate is still timed while the share lasts."""
    cands = [Candidate(STAGES[i % len(STAGES)], 8 * (1 + i // len(STAGES))) for i in range(2 * TIMING_CHUNK + 3)]
    handed = []

    def stand_in(order, cancel):
        handed.append(list(order))
        for i, c in enumerate(order):
            yield i, timings_for(c.stage, 2.0, 3.0), ()
    out = TimedPredictor(stand_in, Estimate())(cands)
    assert [len(h) for h in handed] == [TIMING_CHUNK, TIMING_CHUNK, 3]
    assert [c for h in handed for c in h] == sorted(cands, key=lambda c: Estimate()(cands)[c].step_ms / c.batch_size)
    assert all(out[c].source is PredictionSource.TIMED for c in cands)


def test_the_check_set_reuses_what_the_search_measured_and_goes_into_the_json():
    true = [10.0, 12.0, 14.0]
    states = {s.candidate: s for s in Planner(synthetic(true)[0], None).run(searched(true))}
    measure, calls = synthetic(true, seed=1)
    lead, other, third = (Candidate(STAGES[i], 8) for i in range(3))
    rows = measure_check_set([(third, DECLARED), (lead, RECOMMENDED), (other, NEXT_BEST), (other, DECLARED)],
                             states, measure, BenchConfig(batch_size=8, seq_len=64), None)
    assert [r.key for r in rows] == [third.key, lead.key, other.key]
    assert rows[2].roles == (NEXT_BEST, DECLARED)
    assert all(r.processes >= CHECK_PROCESSES and r.us_per_token_low <= r.us_per_token <= r.us_per_token_high
               for r in rows)
    assert lead not in measured_keys(calls)   # the search had measured it with enough processes
    rec = Recommendation("m", "cpu", None, "adam", None, False, None, "", None, None, None, "", (), None, "", (),
                         "", None, "", (), (), next_best=other.key, check=rows)
    back = Recommendation.from_json(rec.to_json())
    assert back.check == rows and back.next_best == other.key
