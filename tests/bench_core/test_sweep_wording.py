"""What a sweep says where a new user's review found it contradicting its own figures: a crossing the line later
crosses back over, speedups near ×1.00 rounded into a tie, and a cancelled sweep's points that never ran."""
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from bench_core.config.bench_config import BenchConfig
from bench_core.machine.probe import Probe
from bench_core.results.near_one import speedup_decimals
from bench_core.results.records import Status
from bench_core.sweep.core.crossover import Change, Crossover, Estimate, crossover, speedup_text
from bench_core.sweep.core.errors import coverage
from bench_core.sweep.core.line_answers import line_answers
from bench_core.sweep.core.records import (
    NotRun,
    PointMeasurement,
    PointResult,
    SweepResult,
    crossovers,
    from_json,
)
from bench_core.sweep.core.runner import SweepHooks, run_sweep
from bench_core.sweep.core.spec import Axis, SweepSpec, grid, parse_comparison
from bench_core.sweep.timing.timings import KernelTime, Part, PointTimings
from bench_core.sweep.views.figures import sweep_figure
from bench_core.sweep.views.rows import PREDICTED_MARK, phone_rows, shown_text_rows
from bench_core.sweep.views.words import summary_lines

DATA = Path(__file__).parents[2] / "docs" / "data"
APEX_33 = DATA / "h200_2026-12-05_call33_sweep_apex_gpt_2.json"
FLCE_26 = DATA / "h200_2026-12-04_call26_sweep_flce_gpt_2.json"
A, B = "adam+layernorm+fp32", "adam-fused+layernorm+fp32"
BASE = BenchConfig(depth=1, width=64, heads=2, seq_len=16, batch_size=2, vocab_size=128, device="cpu")


def _lines(path: Path) -> dict[str, Crossover]:
    return {c.fixed: c for c in crossovers(from_json(path.read_text()))}


# ---------------------------------------------------------------- a line that crosses back
def test_a_lever_that_pays_and_stops_paying_says_both_crossings():
    """The H200 Apex map at width 768 (APEX_33): ×0.75 at batch 4, ×1.005 (1.005–1.006) at 8, then ×0.9997 at 16 and 32.
    It read "pays above batch_size ≈ 7.9": past 8 it no longer pays (their intervals hold ×1.00)."""
    line = _lines(APEX_33)["width=768"]
    assert line.text == ("pays above batch_size ≈ 7.9 (4–8), and stops paying above ≈ 15 (at least 8) at width=768: "
                         "×1.005 (1.005–1.006) at best, at batch_size=8")
    (back,) = line.later
    # its own interval: the lower bounds fall below ×1.00 after 8, the upper ones never do (open above)
    assert back.change == Change.STOPS_PAYING and 8 < back.value < 16 and (back.low, back.high) == (8, None)
    # the other line crosses once and stays: today's words
    assert _lines(APEX_33)["width=1280"].text.startswith("pays above batch_size ≈ 21 (3–32) at width=1280: ")


def test_a_lever_that_pays_then_costs_and_one_that_only_reaches_parity_then_costs():
    """The H200 FLCE map (FLCE_26): at batch 16 ×0.989 (0.979–1.001), ×1.03 (1.02–1.04), ×0.92 (0.91–0.93) read "pays
    above vocab ≈ 36,450" though vocab 128,256 is slower beyond its interval; at batch 4 "reaches ×1.00 above ≈
    47,048" though 128,256 is predicted ×0.52 (0.44–0.62)."""
    lines = _lines(FLCE_26)
    assert lines["batch_size=16"].text == (
        "pays above vocab_size ≈ 36,000 (at most 50,304), and is slower above ≈ 63,000 (50,304–128,256) at "
        "batch_size=16: ×1.03 (1.02–1.04) at best, at vocab_size=50,304")
    assert lines["batch_size=4"].text == (
        "predicted only (no point at batch_size=4 measured): reaches ×1.00 above vocab_size ≈ 47,000 "
        "(32,000–50,304), and is slower above ≈ 51,000 (50,304–128,256) at batch_size=4; no point measurably faster")
    assert [c.change for c in lines["batch_size=16"].later] == [Change.SLOWER]


def test_a_dip_below_one_that_no_interval_can_tell_keeps_the_single_crossings_words():
    """Past the crossing the point speedups wander round ×1.00 while every interval holds it: nothing measurable
    crosses back, so the sentence is the one crossing's."""
    points = [Estimate(4, 0.7, 0.6, 0.8), Estimate(8, 1.002, 0.99, 1.01), Estimate(16, 0.998, 0.99, 1.01),
              Estimate(32, 1.001, 0.99, 1.01)]
    found = crossover("batch_size", points)
    assert found is not None and found.later == () and not found.pays
    assert found.text.startswith("reaches ×1.00 above batch_size ≈ ") and \
        found.text.endswith("; no point past it measurably faster")


def test_a_lever_that_pays_at_both_ends_says_it_pays_again():
    points = [Estimate(1, 1.3, 1.2, 1.4), Estimate(2, 0.7, 0.6, 0.8), Estimate(4, 0.8, 0.7, 0.9),
              Estimate(8, 1.5, 1.4, 1.6)]
    found = crossover("batch_size", points)
    assert found is not None and found.text.startswith("pays below batch_size ≈ ") and \
        ", and pays again above ≈ " in found.text
    assert found.text.endswith(": ×1.50 (1.40–1.60) at best, at batch_size=8")
    assert [c.change for c in found.later] == [Change.PAYS_AGAIN] and Crossover.from_dict(found.to_dict()) == found
    # first paying only past a later crossing: "pays above", not "again"
    late = crossover("batch_size", [Estimate(1, 0.5, 0.4, 0.6), Estimate(2, 1.002, 0.99, 1.01),
                                    Estimate(4, 0.8, 0.7, 0.9), Estimate(8, 1.5, 1.4, 1.6)])
    assert late is not None and late.text.startswith("reaches ×1.00 above batch_size ≈ ") and \
        ", and pays above ≈ " in late.text
    assert [c.change for c in late.later] == [Change.SLOWER, Change.PAYS]


def test_every_crossing_is_drawn_on_the_line():
    spec = SweepSpec(parse_comparison(f"{A},{B}", "gpt"), BASE, (Axis("width", (64, 128, 256)),), None)
    speedups = {64: (0.989, 0.979, 1.001), 128: (1.03, 1.02, 1.04), 256: (0.92, 0.91, 0.93)}
    points = tuple(PointResult(p.index, p.values, measurement=PointMeasurement(
        Status.OK, None, *speedups[p.config.width])) for p in grid(spec.axes, spec.base))
    result = SweepResult(spec, "cuda", "GPU", points, Status.DONE)
    fig = sweep_figure(result)
    (c,) = crossovers(result)
    (cross,) = [t for t in fig.data if t.name.startswith("crossover")]
    assert len(cross.x) == 2 and len([s for s in fig.layout.shapes if s.type == "rect"]) == 2
    assert list(cross.x) == [pytest.approx(x.value) for x in c.crossings]


# ---------------------------------------------------------------- near ×1.00
def test_speedups_near_one_take_a_third_decimal_for_every_figure_of_the_sentence():
    # APEX_33's batch 16 at width 768: "×1.00 (0.99–1.01)" beside batch 8's ×1.005
    assert speedup_text(0.9997, 0.9918, 1.0077) == "×1.000 (0.992–1.008)"
    assert speedup_text(0.997, 0.97, 1.02) == "×1.00 (0.97–1.02)"   # wider than ×0.98–1.02: two decimals tell it
    assert speedup_decimals(0.992, 1.008) == 3 and speedup_decimals(0.97, 1.02) == 2
    assert speedup_decimals(0.90, 0.999) == 3            # a bound that would print as 1.00
    assert speedup_decimals(1.252, 1.30, 1.251) == 3      # a miss that would print inside the interval
    assert speedup_decimals(1.25, 1.30, 1.20) == 2


def test_a_missed_prediction_near_one_does_not_read_as_a_hit():
    """APEX_33 read "missed at batch_size=8, width=768: measured ×1.01, predicted ×1.01 (1.01–1.02)"."""
    said = coverage(from_json(APEX_33.read_text())).text
    assert "missed at batch_size=8, width=768: measured ×1.005, predicted ×1.013 (1.011–1.016)" in said
    assert "missed at batch_size=4, width=1280: measured ×0.896, predicted ×0.999 (0.996–1.001)" in said


def test_a_points_speedups_share_its_decimals_in_the_table_and_the_terminal():
    """Batch 8 at width 768, ×1.0053 (1.0048–1.0058): its row read ×1.00, ×1.00, ×1.01 and predicted ×1.01; at
    three decimals its point printed onto its lower bound, ×1.005 (1.005–1.006), so it takes a fourth."""
    result = from_json(APEX_33.read_text())
    row = next(r for r in shown_text_rows(result) if (r["batch_size"], r["width"]) == ("8", "768"))
    assert (row["speedup (B over A)"], row["95% low"], row["95% high"], row["predicted"], row["measured"]) == \
        ("×1.0053", "×1.0048", "×1.0058", "×1.0131", "×1.0053")
    line = next(t for t in summary_lines(result) if t.strip().startswith("batch_size=8, width=768"))
    assert "×1.0053 (1.0048–1.0058)" in line and "predicted ×1.0131," in line


# ---------------------------------------------------------------- a cancelled sweep
def _timings(a_ms: float, spread: float = 1.2) -> PointTimings:
    """A's step a_ms and B's 1 ms, each with its p10/p90 `spread` either way: a prediction with an interval."""
    return PointTimings(tuple(KernelTime(part, key, ms, ms / spread, ms * spread, 0, 1)
                              for key, ms in ((A, a_ms), (B, 1.0)) for part in (Part.STEP_1, Part.STEP_2)), 0.0, 1)


def _cancelled() -> SweepResult:
    """Five points; the user cancels while the fourth is predicted."""
    spec = SweepSpec(parse_comparison(f"{A},{B}", "gpt"), BASE, (Axis("width", (64, 128, 256, 512, 1024)),), None)
    cancel = threading.Event()

    def predict_points(points, comparison, device, stop):
        for p, a_ms in zip(points[:3], (0.5, 0.9, 1.2), strict=True):
            yield p.index, _timings(a_ms), ()
        cancel.set()
        stop.wait(5)   # the timing process, killed, yields nothing more

    result = run_sweep(spec, grid(spec.axes, spec.base), Probe.from_dict({}), SweepHooks(
        cancel=cancel, predict_points=predict_points, measure_point=lambda *a: pytest.fail("cancelled")))
    assert result.status == Status.CANCELLED
    return result


def test_a_cancelled_sweep_counts_the_points_that_did_not_run():
    """It read "0 of 5 points measured end to end, 3 predicted only": two points gone unsaid."""
    result = _cancelled()
    assert result.notes[0] == "0 of 5 points measured end to end, 3 predicted only, 2 not run (cancelled)"
    assert [result.not_run(p) for p in result.points] == [NotRun.CANCELLED] * 5
    # a sweep that ended on its own claims no point as not run
    done = replace(result, status=Status.DONE)
    assert done.not_run(done.points[0]) is None and "not run" not in done.tally


def test_a_cancelled_sweeps_rows_say_why_they_have_no_figure():
    """Its last two rows read "–" in every column, with no reason."""
    rows = shown_text_rows(_cancelled())
    assert [r["why not measured"] for r in rows] == ["not run: cancelled"] * 5
    assert [r["why not predicted"] for r in rows] == ["–"] * 3 + ["not run: cancelled"] * 2


def test_a_crossing_interval_is_not_drawn_across_points_that_never_ran():
    """The crossing's interval is open above (the lower bounds never reach ×1.00 at the points with a figure): it
    was shaded to width 1,024, which never ran. It ends at the last point with a figure, 256, and says so."""
    result = _cancelled()
    bands = [s for s in sweep_figure(result).layout.shapes if s.type == "rect"]
    assert len(bands) == 1 and bands[0].x1 == 256
    (c,) = crossovers(result)
    assert c.high is None and "(at least 94, its other end beyond the last point with a figure)" in c.text
    assert c.unrun == (512, 1024)


# ---------------------------------------------------------------- a phone's points table
def test_a_phone_s_points_table_holds_the_axes_the_speedup_marked_where_predicted_and_the_bound():
    """At 390 px the full table scrolled sideways, its source and bound off the screen: a phone's holds four columns
    for FLCE_26's two axes, each speedup as the full table writes it, "≈" before a predicted one (as the heatmap)."""
    result = from_json(FLCE_26.read_text())
    phone, full = phone_rows(result), shown_text_rows(result)
    assert list(phone[0]) == ["vocab_size", "batch_size", "B over A", "bound"]
    for point, short, row in zip(result.points, phone, full, strict=True):
        mark = PREDICTED_MARK if row["source"] == "predicted" else ""
        assert short["B over A"] == mark + row["speedup (B over A)"] and short["bound"] == row["bound"], point.label
    assert {r["source"] for r in full} == {"measured", "predicted"}   # both kinds, so both are read


# ---------------------------------------------------------------- a long reason on one line
def test_an_out_of_memory_point_says_its_first_sentences_on_its_line_and_keeps_the_whole_reason_in_its_file():
    """An H100 map's batch 32 × 1280 ran out of memory: its terminal line carried the whole ~800-character CUDA message
    with the allocator's advice. The line keeps what was asked and what was free; the JSON and CSV keep all."""
    result = from_json((DATA / "h100_2026-12-06_call36_sweep_apex_1.json").read_text())
    oom = next(p for p in result.points if p.measurement and p.measurement.status == Status.OOM)
    assert oom.measurement is not None and len(oom.measurement.reason or "") > 600
    brief = oom.measurement.brief_reason or ""
    assert brief.endswith(" …") and len(brief) <= 242
    assert "Tried to allocate 6.14 GiB. GPU 0 has a total capacity of 79.18 GiB of which" in brief
    assert "PYTORCH_CUDA_ALLOC_CONF" not in brief
    line = next(t for t in summary_lines(result) if t.strip().startswith(oom.label))
    assert brief in line and "PYTORCH_CUDA_ALLOC_CONF" not in line
    assert PointMeasurement(Status.FAILED, "a: it broke").brief_reason == "a: it broke"   # short: as it was


def test_a_point_that_ran_out_of_memory_shows_no_figure_and_says_so_everywhere():
    """An H100 map's batch 32 ran out of memory at both widths: the heatmap showed them as predicted ×1.01 and ×1.02,
    the tally counted them as predicted only, and width 768's crossing named batch 32 its best point."""
    result = from_json((DATA / "h100_2026-12-06_call36_sweep_apex_1.json").read_text())
    failed = [p for p in result.points if p.failure]
    assert [p.label for p in failed] == ["batch_size=32, width=768", "batch_size=32, width=1280"]
    assert all(p.source is None and p.estimate is None and p.memory is None and p.bound is None for p in failed)
    assert all(p.prediction is not None for p in failed)   # kept, in its own column
    assert result.shown_notes[0] == "10 of 12 points measured end to end, 0 predicted only, 2 ran out of memory"
    line = _lines(DATA / "h100_2026-12-06_call36_sweep_apex_1.json")["width=768"]
    assert "at best, at batch_size=16" in line.text
    rows = {(r["batch_size"], r["width"]): r for r in shown_text_rows(result)}
    assert rows[("32", "768")]["speedup (B over A)"] == "ran out of memory"
    assert rows[("32", "768")]["predicted"] == "×1.01"
    assert len(rows[("32", "768")]["why not measured"]) <= 242
    cells = sweep_figure(result).data
    heat = next(t for t in cells if t.type == "heatmap")
    assert heat.text[0][5] == heat.text[1][5] == "out of<br>memory"   # batch 32's column, both widths
    assert heat.z[0][5] is None and "ran out of memory" in heat.hovertext[0][5]


def test_every_line_of_a_map_says_its_answer_even_where_it_never_crosses():
    """An H100 FLCE map: Liger pays at batch 16 and at no vocabulary at batch 4 or 8. The page and the report said
    only batch 16's crossing, or "no crossover of ×1.00 inside the swept values" for a lever that paid everywhere
    and one that never did alike."""
    result = from_json((DATA / "h100_2026-12-06_call39_sweep_flce_1.json").read_text())
    answers = line_answers(result)
    assert answers[:2] == ["no crossing: below ×1.00 at every swept vocab_size, at batch_size=4",
                           "no crossing: below ×1.00 at every swept vocab_size, at batch_size=8"]
    assert answers[2].startswith("pays below vocab_size ≈") and answers[2].count("at batch_size=16") == 1
    assert [f"  crossover: {a}" for a in answers] == [t for t in summary_lines(result) if "crossover:" in t]


def test_a_crossings_value_is_given_to_the_step_its_interval_can_tell():
    """A tenth of its interval's width, down to a unit: an FLCE map's "≈ 57,062 (50,304–128,256)" gave five figures
    inside an interval 78,000 wide; a tight one keeps its figures (an FP8 map's ≈ 1,846 (1,821–1,914))."""
    from bench_core.sweep.core.crossover import _shown
    assert _shown(57_062.4, 50_304, 128_256, 0) == "57,000"
    assert _shown(1_846.2, 1_821, 1_914, 0) == "1,846"
    assert _shown(1_546.0, 1_024, 2_048, 0) == "1,500"
    assert _shown(36_450.0, None, 50_304, 0) == "36,000"   # open on one side: its distance to the other bound
    assert _shown(7.94, 4, 8, 1) == "7.9" and _shown(15.99, 15.58, 25.49, 1) == "16.0"
    assert _shown(39_224.0, None, None, 0) == "39,000" and _shown(1_000.0, None, None, 0) == "1,000"
    assert _shown(7.94, None, None, 1) == "7.9"


def test_a_sweep_says_when_its_measured_intervals_hold_one_process_only():
    """The FLCE maps run one process a stage: "×1.02 (1.02–1.02)" read as certain (a new user's pass); the Apex
    maps run three, and say nothing more."""
    flce = from_json((DATA / "h100_2026-12-06_call41_sweep_flce_1.json").read_text())
    assert flce.shown_notes[-1].startswith("9 of 9 measured intervals are within one process")
    apex = from_json(APEX_33.read_text())
    assert not any("within one process" in n for n in apex.shown_notes)


def test_the_points_table_gives_each_stages_measured_peak_in_mib():
    """Only percentages were shown ("−56.7%"): whether a shape fits a card needs the peaks themselves."""
    result = from_json((DATA / "h100_2026-12-06_call41_sweep_flce_1.json").read_text())
    row = next(r for r in shown_text_rows(result) if (r["vocab_size"], r["batch_size"]) == ("128256", "16"))
    assert (row["peak memory B vs A"], row["A peak MiB"], row["B peak MiB"]) == ("-56.7%", "47,874", "20,732")
