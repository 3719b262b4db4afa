"""The answer card on the pages: an example GPU run opened from History reads its vendor's word first, History's list
shows the answer in its first column, and a CPU run's result on the Benchmark page says what to do next."""
from dataclasses import replace

import pytest
from test_pages import texts, verdict_lines

from bench_core.results.answer import Worth, answer
from bench_core.results.examples import EXAMPLES, example_run
from bench_core.results.records import Status
from bench_core.results.store import Store
from bench_core.results.summary import summarize
from helpers import sample_runs, wait


def _open(at, name):
    [button] = [b for b in at.button if b.label == f"Open an example GPU run: {EXAMPLES[name].title}"]
    return button.click().run()


@pytest.mark.slow
def test_an_example_gpu_run_opens_with_its_answer_and_is_imported_once(app, app_env):
    at = _open(app("pages/history.py"), "h100-seed-A")
    assert not at.exception, at.exception
    run = example_run("h100-seed-A")
    assert at.query_params["run"] in (run.run_id, [run.run_id])
    card = answer(summarize(run))
    lines = verdict_lines(at)
    assert lines[0] == card.lines[0].markdown and lines[0].startswith("**Apex: not worth it here** — ×0.70")
    # the contributions as a table, their stage keys in the fold below it, not in the lever's words
    rows = at.dataframe[0].value
    assert list(rows.columns) == ["lever", "against", "effect", "bound", "proof"]
    assert list(rows["effect"]) == [r.effect for r in card.rows]
    assert not any("+" in cell for cell in rows["lever"])
    at = _open(at, "h100-seed-A")   # again: the run already here opens, no second copy
    assert [r["run_id"] for r in Store(str(app_env / "runs.sqlite3")).list_runs()] == [run.run_id]


def test_historys_list_shows_the_answer_first(app, app_env):
    store = Store(str(app_env / "runs.sqlite3"))
    for name in EXAMPLES:
        store.import_run(example_run(name))
    at = app("pages/history.py")
    table = at.dataframe[0].value
    assert list(table.columns)[0] == "answer"
    expected = {answer(summarize(example_run(n))).short for n in EXAMPLES}
    assert set(table["answer"]) == expected
    assert all(a.startswith(f"Apex: {Worth.NOT_WORTH_IT} (×") for a in expected)


def replay_cpu_run(run, probe, hooks):
    """Stands in for the runner: the job's stages end as sample_runs.cpu_run() measured them."""
    for stage in sample_runs().cpu_run().stages:
        run = run.with_stage(stage)
        hooks.on_stage_done(run, stage)
    return replace(run, status=Status.DONE)


def test_a_cpu_runs_result_says_what_to_do_next(app, manager, monkeypatch):
    from test_pages import CFG
    monkeypatch.setattr(manager, "_run_all", replay_cpu_run)
    stages = [s.stage for s in sample_runs().cpu_run().stages]
    wait(manager, manager.submit(CFG, stages, "native", session_id="s").job_id)
    at = app()
    [step] = [t for t in texts(at, "info") if t.startswith("**Next step:**")]
    assert "A CPU result does not carry over to a GPU" in step and "docs/CLUSTER.md" in step
    assert verdict_lines(at)[0].startswith("**Apex: not measured here** — ")
    assert {b.label for b in at.button} >= {f"Open an example GPU run: {e.title}" for e in EXAMPLES.values()}
