"""A sweep's answers cannot contradict themselves: an unlocated crossing has no value, a side of ×1.00 is claimed
only where every interval lies on it, a cell whose interval holds ×1.00 is drawn neutral, and an interval holding
×1.00 reads as the engine's outcomes do (measure.stats.Effect): "can't tell yet" or "no measurable difference".

The H100 sweep (tests/data, from shared/data: `sweep --compare
adam-fused+layernorm+bf16,apex-fusedadam+apex-fusedln+bf16 --model gpt2-small --axis batch_size=4,12 --axis
width=1024 --budget 200s`, 2026-12-07) measured ×0.67 (0.42–1.07) at batch 4 and ×1.005 (0.998–1.013) at batch 12."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bench_core.measure.stats import EQUIVALENCE
from bench_core.sweep.core.crossover import Estimate, Verdict
from bench_core.sweep.core.line_answers import line_answers
from bench_core.sweep.core.records import from_json
from bench_core.sweep.views.figures import sweep_figure

SWEEP = Path(__file__).parents[3] / "data" / "h100_2026-12-07_sweep_apex_w1024.json"


def _sweep():
    return from_json(SWEEP.read_text())


def _at(point, speedup, low, high):
    """The point, measured at this speedup and interval."""
    return replace(point, measurement=replace(point.measurement, speedup=speedup, low=low, high=high))


def test_an_unlocated_crossing_is_given_no_value():
    result = _sweep()
    [answer] = line_answers(result)
    # it had read "reaches ×1.00 above batch_size ≈ 12 (not located: …)", 12 being the last value swept
    assert answer.startswith("reaches ×1.00 somewhere along batch_size (not located: its interval spans every "
                             "swept value)"), answer
    assert "≈" not in answer and "12" not in answer


def test_a_cell_whose_interval_holds_one_is_neutral_its_figure_still_written():
    result = _sweep()
    heat = next(t for t in sweep_figure(result).data if t.type == "heatmap")
    shown = {p.value("batch_size"): result.best_estimate(p) for p in result.points}
    assert all(low <= 1.0 <= high for _, low, high in shown.values())   # both intervals hold ×1.00
    assert list(heat.z[0]) == [0.0, 0.0]                                  # ×1.00's colour (zmid 0)
    assert heat.text[0][0].endswith("×0.67")                              # batch 4's figure, as measured
    # a point whose interval lies off ×1.00 keeps its colour
    p4 = result.points[0]
    off = replace(result, points=(_at(p4, 0.67, 0.60, 0.75), *result.points[1:]))
    heat = next(t for t in sweep_figure(off).data if t.type == "heatmap")
    assert heat.z[0][0] < 0


def test_an_interval_holding_one_reads_cant_tell_yet_or_no_measurable_difference():
    assert Estimate(4, 0.67, 0.42, 1.07).verdict == Verdict.UNSURE and Verdict.UNSURE.value == "can't tell yet"
    # within EQUIVALENCE either way of ×1.00: no measurable difference
    assert 1 / (1 + EQUIVALENCE) < 0.998 and 1.013 < 1 + EQUIVALENCE
    assert Estimate(12, 1.005, 0.998, 1.013).verdict == Verdict.EVEN
    assert Estimate(12, 1.2, 1.1, 1.3).verdict == Verdict.PAYS and Estimate(12, 0.8, 0.7, 0.9).verdict == Verdict.COSTS


def test_a_side_of_one_is_claimed_only_where_every_interval_lies_on_it():
    """A tiny CLI sweep said "above ×1.00 at every swept width" with ×0.77–1.92 at one of them."""
    result = _sweep()
    p4, p12 = result.points
    above = replace(result, points=(_at(p4, 1.3, 1.1, 1.5), _at(p12, 1.2, 0.77, 1.92)))
    [answer] = line_answers(above)
    assert "every swept" not in answer
    assert "pays at batch_size=4" in answer and "can't tell yet at batch_size=12" in answer, answer
    clear = replace(result, points=(_at(p4, 1.3, 1.1, 1.5), _at(p12, 1.2, 1.1, 1.3)))
    assert line_answers(clear)[0].startswith("no crossing: above ×1.00 at every swept batch_size")
