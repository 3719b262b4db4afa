"""A run's JSON keeps the summary rows of the engine that wrote it; what is shown is computed again from the raw
series (on import and on read), never read from those rows."""
import json
from pathlib import Path

from bench_core.results.formats import parse_json
from bench_core.results.store import Store
from bench_core.results.summary import summarize

ROOT = Path(__file__).parents[1]
# A run written by an older estimator: its stored eager FP8 row reads 0.4857, outside its own interval, so a
# figure read from the file instead of recomputed would show.
STALE_RUN = ROOT / "docs/data/h200_2026-12-04_call21_peers_llama-1b_agree_1.json"
FP8 = "adam-fused+rmsnorm+fp8-torchao"


def _stored_row() -> dict:
    return next(r for r in json.loads(STALE_RUN.read_text())["summary"] if r["stage"] == FP8)


def test_the_file_s_stored_row_is_stale_so_the_test_below_can_tell():
    row = _stored_row()
    assert not row["speedup_ci_low"] <= row["speedup"] <= row["speedup_ci_high"]


def test_an_imported_run_shows_each_speedup_inside_its_own_interval_recomputed_from_the_series(tmp_path):
    [run] = parse_json(STALE_RUN.read_bytes())
    store = Store(str(tmp_path / "h.sqlite3"))
    new_id, _ = store.import_run(run)
    for shown in (run, store.load_run(new_id)):
        stages = {s.key: s for s in summarize(shown).stages}
        fp8 = stages[FP8]
        assert fp8.speedup_ci and fp8.speedup_ci[0] <= fp8.speedup <= fp8.speedup_ci[1]
        assert fp8.speedup != _stored_row()["speedup"]
        for s in stages.values():
            if s.speedup_ci:
                assert s.speedup_ci[0] <= s.speedup <= s.speedup_ci[1], s.key
