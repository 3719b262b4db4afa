"""The answer card: per vendor a word that follows the statistics (two runs whose intervals both hold ×1.00 or lie
on one side of it read the same word), its figure read from the engine's contributions, the contributions as rows,
and a CPU run's next step."""
import itertools
import math

import pytest

from bench_core.measure import stats
from bench_core.measure.stats import Effect, effect_of
from bench_core.results.answer import Worth, answer, effect_text, worth_of
from bench_core.results.contributions import PairedRatio, contributions, vendor_effects
from bench_core.results.examples import EXAMPLES, example_json, example_run
from bench_core.results.formats import ImportRejected
from bench_core.results.summary import summarize
from helpers import ROOT, sample_runs

# shared/ lies beside the checkout (the team's reference runs, provenance in its README)
SHARED = str(ROOT.parent / "shared" / "data" / "h100_2026-12-07_seed_gpt2-small_{}.json")


def _paired(low: float, high: float) -> PairedRatio:
    return PairedRatio(math.sqrt(low * high), (low, high), effect_of(low, high), 3, None)


def test_the_two_h100_seed_runs_read_the_same_word_from_different_effects():
    """Run A's Apex interval holds ×1.00 (inconclusive), run B's lies below it (measured slower): one word."""
    lines = {}
    for name in ("h100-seed-A", "h100-seed-B"):
        summary = summarize(example_run(name))
        [apex_line] = [line for line in answer(summary).lines if line.label == "Apex"]
        [apex] = vendor_effects(summary)
        assert apex_line.paired == apex.paired   # read from the engine, never re-derived
        lines[name] = apex_line
    a, b = lines["h100-seed-A"], lines["h100-seed-B"]
    assert (a.paired.effect, b.paired.effect) == (Effect.INCONCLUSIVE, Effect.MEASURED) and b.paired.ratio < 1
    assert a.word == b.word == Worth.NOT_WORTH_IT
    assert a.text.startswith("Apex: not worth it here — ×0.70 (0.36–1.40) against native BF16, inconclusive; ")
    assert "host-bound" in a.text and "GPU time about equal (×1.02)" in a.text


# intervals on every side of ×1.00: below, holding it (narrow and wide), above
# intervals on every side of ×1.00 and of the 3% margin: below, holding it (narrow and wide), above it within the
# margin (H100 call 53's Apex, 1.006-1.014), above it reaching past the margin
INTERVALS = [(0.60, 0.69), (0.90, 0.99), (0.995, 1.004), (0.98, 1.02), (0.36, 1.40), (0.99, 1.10), (1.006, 1.014),
             (1.01, 1.05), (1.5, 2.0)]
MARGIN = 1 + stats.EQUIVALENCE


def _side(low: float, high: float) -> str:
    return "below" if high < 1 else "above" if low > 1 and high > MARGIN else "under 3%" if low > 1 else "holds"


@pytest.mark.parametrize("one,other", list(itertools.combinations(INTERVALS, 2)))
def test_intervals_that_hold_one_or_lie_on_one_side_read_the_same_word(one, other):
    sides = {_side(*one), _side(*other)}
    if "above" not in sides or len(sides) == 1:
        assert worth_of(_paired(*one)) == worth_of(_paired(*other))
    else:   # one lies above ×1.00 reaching past ×1.03, the other does not: the only pair that may read apart
        assert worth_of(_paired(*one)) != worth_of(_paired(*other))


def test_worth_it_only_where_the_interval_lies_above_one_and_reaches_past_the_margin():
    for low, high in INTERVALS:
        assert (worth_of(_paired(low, high)) == Worth.WORTH_IT) == (low > 1 and high > MARGIN)
    assert worth_of(PairedRatio(1.3, None, None, 1, None)) == Worth.NOT_MEASURED


def test_a_gain_measured_under_the_margin_says_so_and_is_not_worth_a_dependency():
    """H100 call 53: Apex BF16 against native BF16 on gpt2-small, ×1.010 (1.006-1.014): real, and under 3%."""
    small = _paired(1.006, 1.014)
    assert effect_text(small) == "measured faster, by under 3%" and worth_of(small) == Worth.NOT_WORTH_IT
    assert effect_text(_paired(0.985, 0.995)) == "measured slower, by under 3%"
    assert effect_text(_paired(1.01, 1.05)) == "measured faster"


def test_the_rows_are_the_contributions_with_their_stage_keys():
    summary = summarize(example_run("h100-seed-B"))
    rows, found = answer(summary).rows, contributions(summary)
    assert [r.stages for r in rows] == [f"{c.stage_key} vs {c.against_key}" for c in found]
    assert all(r.effect.startswith(f"×{c.ratio:.{c.decimals}f}") for r, c in zip(rows, found, strict=True))
    # the lever's words carry no stage key: the keys sit in their own field (a tooltip, a fold, a note)
    assert all("+" not in r.lever + r.against + r.effect for r in rows)
    assert [r.proof for r in rows] == ["verified"] * len(rows)


def test_a_gpu_run_has_no_next_step_and_a_cpu_run_points_to_the_examples_and_a_gpu_host():
    assert answer(summarize(sample_runs().gpu_run())).next_step is None
    card = answer(summarize(sample_runs().gpu_ladder_on_cpu()))
    assert "does not carry over to a GPU" in card.next_step
    assert all(name in card.next_step for name in EXAMPLES) and "docs/CLUSTER.md" in card.next_step
    assert "GPU host" in card.next_step


def test_a_vendor_that_did_not_run_says_not_measured_and_why():
    [apex] = answer(summarize(sample_runs().gpu_ladder_on_cpu())).lines
    assert apex.word == Worth.NOT_MEASURED and apex.paired is None
    assert apex.text.startswith("Apex: not measured here — ")


def test_the_examples_are_the_shared_h100_runs_byte_for_byte():
    for name, suffix in (("h100-seed-A", "A"), ("h100-seed-B", "B")):
        try:
            with open(SHARED.format(suffix), "rb") as fh:
                assert example_json(name) == fh.read()
        except FileNotFoundError:
            pytest.skip("the shared reference data is not on this machine")
    with pytest.raises(ImportRejected, match="example: 'h100' is not one of h100-seed-A, h100-seed-B"):
        example_json("h100")
