"""The SQLite history: a real file, real writes; imports never overwrite what is there."""
from dataclasses import replace

from bench_core.results.formats import parse_json, to_json
from bench_core.results.records import Status
from bench_core.results.store import Store
from bench_core.results.summary import summarize
from helpers import sample_runs

gpu_run = sample_runs().gpu_run


def test_save_load_round_trip_keeps_every_series(tmp_path):
    store = Store(str(tmp_path / "h.sqlite3"))
    run = gpu_run()
    store.save_run(run)
    back = store.load_run(run.run_id)
    assert back.stages == run.stages and back.config == run.config and back.machine.gpu_name == "NVIDIA H200"
    assert summarize(back).stages[1].speedup == summarize(run).stages[1].speedup


def test_reimporting_an_existing_run_never_overwrites_it(tmp_path):
    store = Store(str(tmp_path / "h.sqlite3"))
    run = gpu_run()
    store.save_run(run)
    imported = replace(parse_json(to_json(run).encode())[0], stages=tuple(
        replace(s, times_ms=()) for s in run.stages))  # a tampered copy with no series
    new_id, renamed = store.import_run(imported)
    assert renamed and new_id != run.run_id
    assert store.load_run(run.run_id).stages[0].times_ms == run.stages[0].times_ms  # the original is intact
    assert store.load_run(new_id).imported
    assert store.count_stage_rows(run.run_id) == 4


def test_best_speedup_counts_only_ok_proven_stages_measured_here(tmp_path):
    store = Store(str(tmp_path / "h.sqlite3"))
    run = gpu_run()
    fallback = run.with_stage(replace(run.stages[3], verdict="fallback"))  # the ×5 stage is not Apex after all
    store.save_run(fallback)
    assert store.list_runs()[0]["best_speedup"] == 2.0
    store.import_run(replace(run, run_id="other"))  # an imported ×5 is not this machine's figure
    rows = {r["run_id"]: r for r in store.list_runs()}
    assert rows["other"]["best_speedup"] is None and rows["other"]["failed"] == 1


def test_interrupted_runs_are_marked(tmp_path):
    store = Store(str(tmp_path / "h.sqlite3"))
    run = replace(gpu_run(), status=Status.RUNNING)
    run = run.with_stage(replace(run.stages[3], status=Status.RUNNING))
    store.save_run(run)
    assert store.mark_interrupted() == [run.run_id]
    back = store.load_run(run.run_id)
    assert back.status == Status.INTERRUPTED and back.stages[3].status == Status.INTERRUPTED
