"""History's import, as a new user meets it: a sweep's CSV export, and a run saved while it was going."""
from pathlib import Path

from bench_core.results.formats import to_json
from bench_core.results.records import Status
from bench_core.results.store import Store
from helpers import sample_runs

SWEEP_CSV = Path(__file__).parents[2] / "docs/data/h200_2026-12-04_call22_sweep_apex_gpt_1.csv"


def paste(at, kind, text):
    at.radio(key="paste_kind").set_value(kind)
    at.text_area(key="paste_text").set_value(text)
    [button] = [b for b in at.button if b.label == "Import pasted text"]
    return button.click().run()


def test_a_sweep_csv_is_named_a_sweep_export(app, app_env):
    at = paste(app("pages/history.py"), "csv", SWEEP_CSV.read_text())
    [error] = [e.value for e in at.get("error")]
    assert "this is a sweep's CSV export" in error and "missing columns" not in error, error
    assert Store(str(app_env / "runs.sqlite3")).list_runs() == []


def test_a_run_saved_in_progress_imports_its_finished_stages_and_names_the_rest(app, app_env):
    run = sample_runs().in_progress_run()
    at = paste(app("pages/history.py"), "json", to_json(run))
    [success] = [s.value for s in at.get("success")]
    assert "Imported 1 run" in success and not at.get("error")
    assert f"stage 3 ({run.stages[2].key}) is interrupted: the file was saved while the run was in progress: " \
           "this stage was still running" in success
    [row] = Store(str(app_env / "runs.sqlite3")).list_runs()
    assert row["status"] == Status.INTERRUPTED and row["ok"] == 2
    assert row["run_id"] == run.run_id
