"""The sweeps table (sweep.core.history): saved, listed, loaded, never overwritten on import, in the run history's
database."""


from bench_core.sweep.core.history import SweepStore
from bench_core.sweep.core.spec import (
    parse_comparison,
)
from helpers import tiny_sweep

SCHEMA_BEFORE_CHANGE = """CREATE TABLE sweeps (
    sweep_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, compare TEXT NOT NULL, family TEXT, axes TEXT,
    device TEXT, gpu TEXT, status TEXT NOT NULL, points INTEGER, measured INTEGER, crossover TEXT,
    prediction_error REAL, imported INTEGER NOT NULL DEFAULT 0, result_json TEXT NOT NULL);"""


def test_store_saves_lists_loads_and_never_overwrites_on_import(tmp_path):
    store = SweepStore(str(tmp_path / "h.sqlite3"))
    result = tiny_sweep()
    store.save(result)
    assert store.load(result.sweep_id) == result
    (row,) = store.list_sweeps()
    assert row["points"] == 4 and row["measured"] == 2 and row["status"] == "done" and row["imported"] == 0
    assert row["crossover"] and row["crossover"].startswith("pays above width")
    new_id, renamed = store.import_sweep(result)
    assert renamed and new_id != result.sweep_id and store.load(new_id).imported
    assert len(store.list_sweeps()) == 2


def test_a_sweep_is_listed_by_what_b_changes_and_an_older_history_gains_that_column(tmp_path):
    """A phone's picker cut "adam-fused+layernorm+bf16 vs apex-fusedadam+apex-fusedln+bf16" before the lever; the
    list carries B's own levers where they differ. A history from before has the column added, empty for its rows."""
    assert parse_comparison("adam-fused+layernorm+bf16,apex-fusedadam+apex-fusedln+bf16", "gpt").change == \
        "apex-fusedadam+apex-fusedln"
    assert parse_comparison("fp8-torchao", "llama").change == "fp8-torchao"
    assert parse_comparison("liger-flce", "gpt").change == "liger-flce"
    import sqlite3
    path = str(tmp_path / "old.sqlite3")
    with sqlite3.connect(path) as db:   # the table's first version, one sweep in it
        db.executescript(SCHEMA_BEFORE_CHANGE)
        db.execute("INSERT INTO sweeps VALUES ('old', '2026-12-04', 'B vs A', 'gpt', 'width 64–128', 'cpu', 'CPU', "
                   "'done', 2, 2, NULL, NULL, 0, '{}')")
    store, new = SweepStore(path), tiny_sweep()
    store.save(new)
    assert {r["sweep_id"]: r["change"] for r in store.list_sweeps()} == {"old": None, new.sweep_id: "adam-fused"}


def test_the_run_history_and_the_sweeps_share_one_database(tmp_path):
    from bench_core.results.store import Store
    path = str(tmp_path / "h.sqlite3")
    Store(path)
    SweepStore(path).save(tiny_sweep())
    assert Store(path).list_runs() == [] and len(SweepStore(path).list_sweeps()) == 1
