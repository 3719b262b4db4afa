"""Files a run import must read for what they are: a sweep's CSV export (named as one, not 'missing columns'), and
a run saved while it was going (its finished stages imported, the unfinished ones kept as interrupted, named)."""
import json
from pathlib import Path

import pytest
from sample_runs import gpu_run, in_progress_run

from bench_core.results import formats
from bench_core.results.formats import ImportRejected, parse_csv, parse_json, to_csv, to_json
from bench_core.results.records import Status
from bench_core.results.store import Store
from bench_core.sweep.core.records import from_json
from bench_core.sweep.views.rows import to_csv as sweep_csv

SWEEP = Path(__file__).parents[2] / "docs/data/h200_2026-12-04_call29_sweep_apex_gpt_1.json"


def test_a_sweep_csv_is_named_as_a_sweep_export():
    with pytest.raises(ImportRejected) as info:
        parse_csv(sweep_csv(from_json(SWEEP.read_bytes())).encode())
    text = str(info.value)
    assert "this is a sweep's CSV export" in text and "sweep --json" in text and "Sweep page" in text
    assert "missing columns" not in text


def test_the_sweep_csv_mark_is_the_sweeps_own_field():
    """formats cannot import the sweep package (it stands above results): the field it looks for is the sweep's."""
    from bench_core.sweep.views.rows import CSV_FIELDS
    assert formats.SWEEP_ID in CSV_FIELDS and formats.is_sweep_csv(CSV_FIELDS)


def test_a_run_csv_missing_columns_still_says_which():
    with pytest.raises(ImportRejected, match="missing columns: stage"):
        parse_csv(b"name,value\nx,1\n")


@pytest.mark.parametrize("parse,write", [(parse_json, to_json), (parse_csv, to_csv)], ids=["json", "csv"])
def test_a_run_saved_in_progress_imports_its_finished_stages(parse, write):
    [run] = parse(write(in_progress_run()).encode())
    assert [s.status for s in run.stages] == [Status.OK, Status.OK, Status.INTERRUPTED, Status.INTERRUPTED]
    assert run.status == Status.INTERRUPTED   # nothing here will finish it: never shown as running
    running, pending = run.stages[2], run.stages[3]
    assert running.reason == ("the file was saved while the run was in progress: this stage was still running, "
                              "so it has no result")
    assert "this stage had not started" in pending.reason
    note = formats.incomplete_note(run)
    assert note is not None
    assert f"stage 3 ({running.key}) is interrupted: the file was saved while the run was in progress" in note
    assert f"stage 4 ({pending.key}) is interrupted" in note and note.endswith("2 finished stages imported")
    assert formats.incomplete_note(gpu_run()) is None


def test_an_unknown_status_is_still_refused():
    doc = json.loads(to_json(in_progress_run()))
    doc["stages"][2]["status"] = ["running"]
    with pytest.raises(ImportRejected, match=r"stage 2, field status: unknown status \['running'\]"):
        parse_json(json.dumps(doc).encode())


def test_an_imported_in_progress_run_is_not_marked_interrupted_again(tmp_path):
    """The store marks unfinished runs interrupted after a restart: an imported one already is, with its reason."""
    store = Store(str(tmp_path / "runs.sqlite3"))
    [run] = parse_json(to_json(in_progress_run()).encode())
    run_id, _ = store.import_run(run)
    assert store.mark_interrupted() == []
    loaded = store.load_run(run_id)
    assert loaded.status == Status.INTERRUPTED and "was still running" in loaded.stages[2].reason
