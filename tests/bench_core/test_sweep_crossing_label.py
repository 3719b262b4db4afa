"""A crossing of ×1.00 is labelled predicted whenever a point it rests on is predicted, measured points on its line
or not: a measured interval holds its own noise only, a predicted one the predictor's spread only."""
from bench_core.sweep.crossover import Crossover, Estimate, crossover


def _line(measured: tuple[bool, ...]) -> list[Estimate]:
    # costs at 256 and 512, pays at 1024 and 2048: crosses between 512 and 1024, its bounds in the same bracket
    figures = ((256, 0.80, 0.78, 0.82), (512, 0.90, 0.88, 0.92), (1024, 1.10, 1.08, 1.12), (2048, 1.20, 1.18, 1.22))
    return [Estimate(x, s, lo, hi, m) for (x, s, lo, hi), m in zip(figures, measured, strict=True)]


def test_a_crossing_beside_measured_points_that_rests_on_a_predicted_one_is_labelled_predicted():
    found = crossover("width", _line((True, True, False, True)))   # 1,024 predicted, the rest measured
    assert found is not None and not found.predicted_only
    assert found.predicted and found.crossings[0].predicted
    assert "(512–1,024), predicted" in found.text


def test_a_crossing_read_between_measured_points_only_is_not_labelled_predicted():
    found = crossover("width", _line((False, True, True, False)))  # predicted points lie outside its bracket
    assert found is not None and not found.predicted
    assert found.text.split(":")[0] == "pays above width ≈ 740 (512–1,024)"   # the best point says its own label


def test_a_line_with_no_point_measured_says_so_once_up_front():
    found = crossover("width", _line((False,) * 4))
    found = found and Crossover(**{**found.__dict__, "predicted_only": True})
    assert found is not None and found.text.startswith("predicted only")
    assert "(512–1,024):" in found.text   # not again beside the crossing


def test_the_label_survives_the_file():
    found = crossover("width", _line((True, True, False, True)))
    assert found is not None and Crossover.from_dict(found.to_dict()) == found
