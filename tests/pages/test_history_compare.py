"""History's compare view says in words which stages two runs agree on (issue 42, item 6)."""
from dataclasses import replace

from test_pages import block, select_history_rows, walk

from bench_core.results.store import Store
from helpers import sample_runs


def _markdown(at, key):
    return [n.value for n in walk(block(at, key)) if type(n).__name__ == "Markdown"]


def test_two_selected_runs_get_a_sentence_naming_the_stage_that_differs(app, app_env):
    a = sample_runs().gpu_run()
    b = replace(a, stages=(*a.stages[:3], replace(a.stages[3], times_ms=(25.0,) * 8)), run_id="b0b0b0b0",
                created_at="2026-12-02T11:00:00+00:00")
    store = Store(str(app_env / "runs.sqlite3"))
    store.save_run(a)
    store.save_run(b)
    at = select_history_rows(app("pages/history.py"), [0, 1])
    assert not at.exception, at.exception
    lines = _markdown(at, "agreement")
    assert len(lines) == 1, lines
    assert "1 of 2 stages agree (their 95% intervals overlap); Apex FusedAdam · Apex FusedLayerNorm · BF16 differs" \
        in lines[0] and "launch-bound in both" in lines[0], lines


def test_one_selected_run_has_nothing_to_agree_with(app, app_env):
    Store(str(app_env / "runs.sqlite3")).save_run(sample_runs().gpu_run())
    at = select_history_rows(app("pages/history.py"), [0])
    assert not at.exception, at.exception
    try:
        block(at, "agreement")
    except AssertionError as exc:
        assert "0 blocks" in str(exc)
    else:
        raise AssertionError("a single run showed an agreement block")
