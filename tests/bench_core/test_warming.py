"""A process still warming up when its timed steps began: its first 3 timed steps all slower than its own p90.
The flag at and around its rule, its minimum of steps, its chance bound, and its way into the noise text, the
CSV/JSON field and back."""
import csv
import io
import json
import math
from dataclasses import replace

from sample_runs import gpu_run

from bench_core.measure.noise import WARMING_CHANCE, WARMING_RUN, least_judged_steps, warming
from bench_core.measure.stats import quantile
from bench_core.results.columns import DISPLAY_COLUMNS
from bench_core.results.formats import parse_csv, parse_json, to_csv, to_json
from bench_core.results.summary import summarize

STEPS = 22   # least_judged_steps(): the fewest in which 3 steps can lie above their own p90


def settled(n: int) -> list[float]:
    """n distinct step times within 0.2% of 20 ms, in no order: a settled process."""
    return [20.0 + 0.002 * ((7 * i) % 19) for i in range(n)]


def slow_start(slow: list[float], n: int = STEPS) -> list[float]:
    return slow + settled(n - len(slow))


def with_rounds(*rounds: list[float], index: int = 3):
    """The round-figure GPU run, its stage `index` replaced by these processes' timed steps."""
    run = gpu_run()
    times = tuple(ms for r in rounds for ms in r)
    stage = replace(run.stages[index], times_ms=times, rounds=tuple(len(r) for r in rounds),
                    losses=(5.0,) * len(times), host_ms=(19.5,) * len(times))
    return replace(run, stages=tuple(stage if s.index == index else s for s in run.stages))


def p90_exceeded(steps) -> int:
    """How many steps lie above their own p90 (stats.quantile)."""
    p90 = quantile(steps, 0.9)
    return sum(ms > p90 for ms in steps)


CAUSE = "warming up (process 2's first 3 timed steps were all slower than its own p90, 0.1% by chance)"


def test_a_process_whose_first_three_steps_are_slow_flags_the_stage_with_that_cause():
    s = summarize(with_rounds(settled(STEPS), slow_start([20.6, 20.5, 20.4]))).stages[3]
    assert s.noisy is True and s.noise_reason == CAUSE   # the only rule it broke: the spread stays under 10%
    assert s.warming_processes == 1
    notes = next(c for c in DISPLAY_COLUMNS if c.key == "reason")
    assert f"noisy: {CAUSE}" in notes.cell(s)


def test_two_slow_first_steps_do_not_flag():
    w = warming([slow_start([20.6, 20.5])])
    assert w.judged == 1 and w.warming == () and w.cause is None
    s = summarize(with_rounds(settled(STEPS), slow_start([20.6, 20.5]))).stages[3]
    assert s.noisy is False and s.noise_reason is None and s.warming_processes == 0


def test_a_slow_first_step_alone_does_not_flag():
    """The first timed step starts on an empty GPU queue, so it is often a little slower: never a flag alone."""
    assert warming([slow_start([20.6]), slow_start([20.6])]).warming == ()
    # with a third slow step too it is one
    assert warming([slow_start([20.6]), slow_start([20.6, 20.5, 20.4])]).warming == (2,)


def test_steps_equal_to_the_p90_are_not_slower_than_it():
    """Coarse timers (CPU) give ties: a process of identical steps is settled, not warming up."""
    assert warming([[20.0] * STEPS]).warming == () and warming([[20.0] * STEPS]).count == 0


def test_too_few_steps_give_no_verdict_not_a_settled_one():
    assert least_judged_steps() == STEPS and least_judged_steps() >= 2 * WARMING_RUN
    few = warming([slow_start([20.6, 20.5, 20.4], STEPS - 1)])
    assert few.judged == 0 and few.warming == () and few.count is None
    s = summarize(with_rounds(slow_start([20.6, 20.5, 20.4], STEPS - 1))).stages[3]
    assert s.warming_processes is None and s.noise_reason is None
    rows = list(csv.DictReader(io.StringIO(to_csv(with_rounds(slow_start([20.6, 20.5, 20.4], STEPS - 1))))))
    assert rows[3]["warming_processes"] == ""
    # one process long enough is judged; the short one beside it is not counted
    assert warming([settled(STEPS - 1), settled(STEPS)]).count == 0


def test_the_least_judged_steps_follow_the_p90_rule():
    """Below it, the p90 is at or above the 3rd-slowest step; from it on, 3 distinct steps lie above it."""
    above = [p90_exceeded(range(n)) for n in (STEPS - 1, STEPS)]
    assert above == [WARMING_RUN - 1, WARMING_RUN]


def test_a_settled_process_is_flagged_by_chance_at_most_one_time_in_a_thousand():
    """Exchangeable steps: the first 3 are a random 3 of n, all among the m above the p90 with C(m,3)/C(n,3)."""
    for n in range(STEPS, 1500):
        m = p90_exceeded(range(n))
        assert math.comb(m, WARMING_RUN) / math.comb(n, WARMING_RUN) <= WARMING_CHANCE, n
    assert f"{WARMING_CHANCE:.1%}" == "0.1%"


def test_several_processes_are_named_each():
    w = warming([slow_start([21.0, 20.9, 20.8]), settled(STEPS), slow_start([21.0, 20.9, 20.8], 30)])
    assert w.warming == (1, 3) and w.judged == 3 and w.count == 2
    assert w.cause.text == ("warming up (processes 1 and 3: each one's first 3 timed steps were all slower than "
                            "its own p90, 0.1% by chance each)")


def test_the_flag_is_in_the_csv_and_json_field_and_comes_back():
    run = with_rounds(settled(STEPS), slow_start([20.6, 20.5, 20.4]))
    rows = list(csv.DictReader(io.StringIO(to_csv(run))))
    assert rows[3]["warming_processes"] == "1" and rows[3]["noise_reason"] == CAUSE and rows[3]["noisy"] == "True"
    assert rows[0]["warming_processes"] == ""   # 4 steps a process: not judged, never 0
    [summary_row] = [r for r in json.loads(to_json(run))["summary"] if r["stage"] == rows[3]["stage"]]
    assert summary_row["warming_processes"] == 1 and summary_row["noise_reason"] == CAUSE
    [back] = parse_csv(to_csv(run).encode())
    assert summarize(back).stages[3].warming_processes == 1 and summarize(back).stages[3].noise_reason == CAUSE
    [back] = parse_json(to_json(run).encode())
    assert summarize(back).stages[3].warming_processes == 1 and summarize(back).stages[3].noise_reason == CAUSE
