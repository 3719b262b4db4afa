"""results.agreement: two runs compared stage by stage, in one sentence (issue 42, item 6)."""
from dataclasses import replace

from bench_core.results.agreement import Match, compare, compare_sentences
from bench_core.results.summary import summarize
from helpers import sample_runs

gpu_run = sample_runs().gpu_run



def _b(times_ms):
    """Run B: `gpu_run()` with its Apex BF16 stage's steps replaced."""
    a = gpu_run()
    return replace(a, stages=(*a.stages[:3], replace(a.stages[3], times_ms=times_ms)), run_id="b")


def test_the_same_run_twice_agrees_on_every_stage_it_measured():
    a = summarize(gpu_run())
    found = compare(a, a)
    # the baseline has no interval and stage 2 failed in both: the two measured stages are judged
    assert [g.match for g in found.stages] == [Match.AGREE, Match.AGREE]
    assert found.sentence == "2 of 2 stages agree (their 95% intervals overlap)."


def test_a_stage_whose_intervals_do_not_overlap_is_named_with_what_each_run_recorded():
    """B's Apex BF16 at 25 ms (×4.00) against A's 20 ms (×5.00), each interval a point: they cannot overlap."""
    a, b = summarize(gpu_run()), summarize(_b((25.0,) * 8))
    found = compare(a, b)
    assert [g.match for g in found.stages] == [Match.AGREE, Match.DIFFER]
    assert found.sentence.startswith("1 of 2 stages agree (their 95% intervals overlap); "
                                     "Apex FusedAdam · Apex FusedLayerNorm · BF16 differs: ×5.00")
    assert "against ×4.00" in found.sentence
    # both runs recorded it launch-bound (10 ms of kernels in its step) and steady
    assert found.sentence.endswith("launch-bound in both; steady in both.")


def test_agreement_is_symmetric_and_noise_is_said_for_the_run_that_recorded_it():
    a, b = summarize(gpu_run()), summarize(_b((25.0, 35.0) * 4))
    ab, ba = compare(a, b), compare(b, a)
    assert [g.match for g in ab.stages] == [g.match for g in ba.stages]
    differ = [g for g in ab.stages if g.match == Match.DIFFER]
    assert differ and "noisy in B" in differ[0].cause and "noisy in A" in [g for g in ba.stages
                                                                         if g.match == Match.DIFFER][0].cause


def test_every_later_run_is_compared_with_the_first():
    a = summarize(gpu_run())
    b = summarize(_b((25.0,) * 8))
    pairs = compare_sentences([a, b, a])
    assert [(x.run.run_id, y.run.run_id) for x, y, _ in pairs] == [("abc123def456", "b"),
                                                                    ("abc123def456", "abc123def456")]


def test_the_two_shipped_h100_seed_runs_agree_on_all_six_stages():
    """The same count benchmarks/interval_agreement.py prints for the pair: one rule, in one place."""
    from bench_core.results.examples import EXAMPLES, example_run
    a, b = (summarize(example_run(name)) for name in EXAMPLES)
    assert compare(a, b).sentence == "6 of 6 stages agree (their 95% intervals overlap)."
