"""A components row is flagged noisy by the Benchmark page's rule, computed once on the row and read by the page's
table, the terminal's table, the CSV and the chart (issue 42, item 9)."""
import csv
import io
from dataclasses import replace

from bench_core.components.rows import ComponentRow, ComponentsReport, format_table, write_csv_text
from bench_core.measure import stats
from bench_core.results.figures import components_bars

# the row seen on the Components page: 23.96 ms with p10–p90 0.216–28.45 ms, 0.0 GB/s, and nothing said of it
LAYERNORM = ComponentRow("norm", "layernorm", "fp32", "ok", median_ms=23.96, p10_ms=0.216, p90_ms=28.45,
                         bytes_moved=1_000, gb_per_s=4e-5, title="LayerNorm")
STEADY = ComponentRow("optimizer", "adam", "fp32", "ok", median_ms=0.959, p10_ms=0.92, p90_ms=1.0,
                      bytes_moved=13_174_784, gb_per_s=13.7, title="Adam")


def _report(*rows):
    return ComponentsReport(model="tiny", device="cpu", config={}, rows=rows, ceilings=None, params=1,
                            rows_x_width=(256, 128), env={}, created_at="2026-12-06T00:00:00+00:00")


def test_the_rule_is_the_benchmark_pages_own():
    """spread_reason over a series' median, p10 and p90 says what noise_reason says of the series itself."""
    for times in ([1.0] * 9 + [5.0], [1.0, 1.05, 1.1, 0.95, 1.0], [0.2, 24.0, 24.0, 28.0, 30.0]):
        figures = stats.timing_stats(times)
        assert stats.spread_reason(figures.median_ms, figures.p10_ms, figures.p90_ms) == stats.noise_reason(times)


def test_a_row_spread_over_the_limit_is_noisy_and_a_steady_one_is_not():
    assert LAYERNORM.noisy is True and LAYERNORM.noise_reason.startswith("p10–p90 spread 118% of the median")
    assert STEADY.noisy is False and STEADY.noise_reason is None
    unavailable = ComponentRow("norm", "apex-fusedln", "fp32", "unavailable", reason="no CUDA", title="Apex LN")
    assert unavailable.noisy is None


def test_every_view_of_the_report_marks_the_noisy_row():
    report = _report(STEADY, LAYERNORM)
    rows = list(csv.DictReader(io.StringIO(write_csv_text(report))))
    assert [(r["name"], r["noisy"]) for r in rows] == [("adam", "False"), ("layernorm", "True")]
    table = format_table(report).splitlines()
    assert "Noise" in next(line for line in table if line.startswith("Component"))
    assert "noisy" in next(line for line in table if line.startswith("LayerNorm")) and \
        "noisy" not in next(line for line in table if line.startswith("Adam"))
    bars = components_bars(report).data[0]
    assert [t.endswith(" · noisy") for t in bars.text] == [False, True]


def test_a_stored_report_from_before_the_flag_is_judged_from_its_own_figures():
    """A report saved before noise was flagged keeps median, p10 and p90: the rule reads them back."""
    back = ComponentsReport.from_dict(_report(replace(LAYERNORM)).to_dict())
    assert back.rows[0].noisy is True
