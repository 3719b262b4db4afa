"""The CLI table, the HTML report, the CSV and the dashboard's table show the same figures for the same run,
because they all read one RunSummary."""
import csv
import io

from sample_runs import gpu_run

from bench_core.results.formats import to_csv
from bench_core.results.report import render_html
from bench_core.results.summary import summarize
from bench_core.results.table import print_table


def test_cli_html_csv_and_page_table_show_identical_figures():
    from rich.console import Console

    from dashboard.job_view import table_rows
    run = gpu_run()
    console = Console(record=True, width=250)
    print_table(summarize(run), console)
    cli = console.export_text()
    html = render_html(run)
    rows = list(csv.DictReader(io.StringIO(to_csv(run))))
    page = table_rows(summarize(run))
    for i, s in enumerate(summarize(run).stages):
        if s.timing.median_ms is None:
            continue
        median = f"{s.timing.median_ms:.2f}"
        assert median in cli and median in html
        assert float(rows[i]["median_ms"]) == s.timing.median_ms and page.loc[i, "median_ms"] == f"{median} ms"
        if s.speedup is not None:
            shown = f"×{s.speedup:.2f}"
            assert shown in cli and shown in html and page.loc[i, "speedup"].startswith(shown)
            assert float(rows[i]["speedup"]) == s.speedup
        else:
            assert rows[i]["speedup"] == "" and page.loc[i, "speedup"] == "—"
    # the failed stage's partial timings are labelled partial everywhere, and carry no speedup
    assert "failed (partial)" in cli and "failed (partial)" in html and page.loc[2, "status"] == "failed (partial)"
    assert rows[2]["partial"] == "True"
