"""The HTML report: one shared, compressed plotly.js bundle, readable names, units."""

from bench_core.results.report import render_html
from helpers import sample_runs

gpu_run = sample_runs().gpu_run


def test_report_is_small_and_carries_one_plotly_bundle():
    text = render_html(gpu_run())
    assert len(text.encode()) < 1_000_000  # the full plotly.js alone is 4.7 MB
    assert text.count("DecompressionStream") == 1 and text.count("Plotly.newPlot") == 1


def test_report_table_has_full_stage_names_and_units():
    text = render_html(gpu_run())
    for key in (s.key for s in gpu_run().stages):   # whole, with a break opportunity after each '+'
        assert f"<td>{key.replace('+', '+<wbr>')}</td>" in text
    assert "100.00 ms" in text and "×2.00" in text and "100 MiB" in text and "2.9e+04" not in text
