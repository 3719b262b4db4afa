"""Maps of one comparison side by side (sweep.views.compare): hand-made sweeps from two GPUs with known crossings."""
from dataclasses import replace
from pathlib import Path

from bench_core.config.bench_config import BenchConfig
from bench_core.results.records import Status
from bench_core.sweep.core.records import PointMeasurement, PointPrediction, PointResult, SweepResult, from_json
from bench_core.sweep.core.spec import Axis, SweepSpec, grid, parse_comparison
from bench_core.sweep.timing.timings import PointTimings
from bench_core.sweep.views.compare import apart_count, crossovers_side_by_side, same_map, speedups_side_by_side
from bench_core.sweep_cli import main as cli_main

COMPARISON = parse_comparison("adam+layernorm+fp32,adam-fused+layernorm+fp32", "gpt")
BASE = BenchConfig(depth=1, width=64, heads=2, seq_len=16, batch_size=2, vocab_size=128, device="cpu")


def _map(gpu: str, sweep_id: str, speedups: dict[tuple[int, int], float], batches=(2, 4),
         predicted: tuple[tuple[int, int], ...] = ()) -> SweepResult:
    """Width 64, 128, 256 by the given batches; each point's speedup as given, its interval ±1%; the points named in
    `predicted` only predicted."""
    spec = SweepSpec(COMPARISON, BASE, (Axis("width", (64, 128, 256)), Axis("batch_size", batches)), None)
    points = []
    for p in grid(spec.axes, spec.base):
        s = speedups[(p.config.width, p.config.batch_size)]
        if (p.config.width, p.config.batch_size) in predicted:
            points.append(PointResult(p.index, p.values, PointPrediction(s, s * 0.99, s * 1.01, 1.0, 1.0 / s,
                                                                         "gpu-bound", PointTimings((), 0.0))))
        else:
            points.append(PointResult(p.index, p.values, measurement=PointMeasurement(
                Status.OK, speedup=s, low=s * 0.99, high=s * 1.01)))
    return SweepResult(spec, "cuda", gpu, tuple(points), Status.DONE, sweep_id=sweep_id,
                       created_at="2026-12-05T04:07:12+00:00")


# H200: at batch 2 crosses between widths 64 and 128; at batch 4 above at every width
H200 = {(64, 2): 0.8, (128, 2): 1.2, (256, 2): 1.3, (64, 4): 1.1, (128, 4): 1.2, (256, 4): 1.4}
# H100: at batch 2 below at every width; batch 8, which the H200 did not sweep, crosses between 128 and 256
H100 = {(64, 2): 0.7, (128, 2): 0.8, (256, 2): 0.9, (64, 8): 0.8, (128, 8): 0.9, (256, 8): 1.2}


def test_each_line_s_crossing_in_each_sweep_with_the_lines_of_both():
    h200, h100 = _map("H200", "aaaaaa000000", H200), _map("H100", "bbbbbb000000", H100, batches=(2, 8))
    assert same_map(h200, h100)
    table = crossovers_side_by_side([h200, h100])
    assert table.columns == ("H200 12-05 04:07 (aaaaaa)", "H100 12-05 04:07 (bbbbbb)")
    rows = dict(table.rows)
    assert list(rows) == ["at batch_size=2", "at batch_size=4", "at batch_size=8"]
    assert rows["at batch_size=2"][0].startswith("pays above width") and "at batch_size=2" in rows["at batch_size=2"][0]
    assert rows["at batch_size=2"][1] == "no crossing: below ×1.00 at every swept width"
    assert rows["at batch_size=4"] == ("no crossing: above ×1.00 at every swept width", "not swept")
    assert rows["at batch_size=8"][0] == "not swept" and rows["at batch_size=8"][1].startswith("pays above width")
    assert table.records()[0] == {"line": "at batch_size=2", "H200 12-05 04:07 (aaaaaa)": rows["at batch_size=2"][0],
                                  "H100 12-05 04:07 (bbbbbb)": rows["at batch_size=2"][1]}


def test_each_point_s_speedup_in_each_sweep_those_apart_first_a_predicted_one_marked():
    """Shared points: batch 2 at widths 64, 128, 256. At 64, x0.80 and x0.70 (each ±1%) lie apart; at 128, x1.2
    and x0.8; at 256 x1.3 and x0.9: all three apart, listed first in the axes' order."""
    h200 = _map("H200", "aaaaaa000000", H200, predicted=((256, 4),))
    h100 = _map("H100", "bbbbbb000000", H100, batches=(2, 8))
    table = speedups_side_by_side([h200, h100])
    assert table.first == "width, batch_size" and table.columns[0] == "intervals overlap"
    assert [label for label, _ in table.rows][:3] == ["64, 2", "128, 2", "256, 2"]
    rows = dict(table.rows)
    assert rows["64, 2"] == ("no: apart", "×0.80 (0.79–0.81)", "×0.70 (0.69–0.71)")
    assert rows["256, 4"] == ("–", "≈×1.40 (1.39–1.41) predicted", "not swept")
    assert rows["128, 8"] == ("–", "not swept", "×0.90 (0.89–0.91)")
    assert len(rows) == 9 and apart_count(table) == (3, 3)
    # one sweep against itself: every interval overlaps
    itself = speedups_side_by_side([h200, h200])
    assert apart_count(itself) == (0, 6) and {r[1][0] for r in itself.rows} == {"yes"}


def test_maps_of_other_stages_or_other_axes_are_not_set_side_by_side():
    h200 = _map("H200", "aaaaaa000000", H200)
    swapped = replace(h200, spec=replace(h200.spec, axes=tuple(reversed(h200.spec.axes))))
    other = replace(h200, spec=replace(h200.spec, comparison=parse_comparison("adam-fused", "gpt")))
    assert not same_map(h200, swapped) and not same_map(h200, other)


DATA = Path(__file__).parents[4] / "docs/data"
APEX_RUNS = [str(DATA / "h200_2026-12-05_call33_sweep_apex_gpt_2.json"),
             str(DATA / "h200_2026-12-05_call32_sweep_apex_gpt_1.json")]


def test_the_cli_sets_two_h200_runs_side_by_side_the_point_apart_first(capsys):
    """The Apex map's runs 5 and 4 on the H200 (APEX_RUNS): at batch 8 x 768, x1.0053 (1.0048-1.0058) against x0.79
    (0.65-0.97), the one point whose intervals lie apart."""
    assert cli_main(["side-by-side", *APEX_RUNS]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "sweeps side by side: B apex-fusedadam+apex-fusedln+bf16 vs A adam-fused+layernorm+bf16"
    assert [line.strip() for line in out if line.strip().startswith("at width=")] == ["at width=768",
                                                                                     "at width=1280"]
    table = out[out.index(next(line for line in out if line.startswith("each point's speedup"))) + 1:]
    assert "intervals apart at 1 of 12 points" in out[len(out) - len(table) - 1] and len(table) == 13
    assert table[1].split() == ["8,", "768", "no:", "apart", "×1.0053", "(1.0048–1.0058)", "×0.79", "(0.65–0.97)"]


def test_the_cli_names_what_cannot_be_set_side_by_side(tmp_path, capsys):
    fp8 = str(DATA / "h200_2026-12-05_call34_sweep_fp8_llama_1.json")
    assert cli_main(["side-by-side", APEX_RUNS[0], fp8]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: file='{fp8}': sweeps B adam-fused+rmsnorm+fp8-torchao+compile") and \
        "only one comparison along the same axes" in err
    assert cli_main(["side-by-side", APEX_RUNS[0]]) == 2 and "two or more" in capsys.readouterr().err
    run = str(DATA / "h200_2026-12-03_call2_seed_gpt2-small_run1.json")
    assert cli_main(["side-by-side", APEX_RUNS[0], run]) == 2 and "not a sweep's JSON" in capsys.readouterr().err
    assert cli_main(["side-by-side", APEX_RUNS[0], str(tmp_path / "missing.json")]) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_the_cli_shows_one_saved_sweep_as_its_run_printed_it(capsys):
    """A new user found no way to print one saved sweep: side-by-side refused one file. `sweep show` prints it, as
    the run's own summary (today's words), and names what it cannot read."""
    from bench_core.sweep.views.words import summary_lines
    assert cli_main(["show", APEX_RUNS[0]]) == 0
    assert capsys.readouterr().out.splitlines() == summary_lines(from_json(Path(APEX_RUNS[0]).read_text()))
    assert cli_main(["side-by-side", APEX_RUNS[0]]) == 2 and "sweep show FILE.json" in capsys.readouterr().err
    run = str(DATA / "h200_2026-12-03_call2_seed_gpt2-small_run1.json")
    assert cli_main(["show", run]) == 2 and "not a sweep's JSON" in capsys.readouterr().err
