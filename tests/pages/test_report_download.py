"""The HTML report, downloadable from each run's page: the same report as `python -m bench_core run --html`
(tests/bench_core/results/test_report.py checks its content), built only when the button is pressed."""
from bench_core.results.formats import to_json
from helpers import sample_runs


def test_a_run_in_history_offers_its_html_report(app, manager):
    run = sample_runs().gpu_run()
    manager.import_file("h200.json", to_json(run).encode())
    at = app("pages/history.py")
    at.session_state["runs"] = {"selection": {"rows": [0], "columns": []}}
    at.run()
    assert not at.exception, at.exception
    labels = [b.label for b in at.download_button]
    assert labels == ["Download CSV", "Download JSON", "Download HTML report"], labels
    # deferred: the report (every chart, plotly.js inlined) is rendered on a click, not on each rerun
    assert at.download_button[2].proto.deferred_file_id
