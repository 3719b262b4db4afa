import json
import time

from bench_core.config import BenchConfig
from bench_core.levers import PRESETS
from bench_core.store import Store
from tests.bench_core.test_results import sample_run


def texts(at, kind):
    return [e.value for e in at.get(kind)]


def wait_done(manager, job_id, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        snap = manager.snapshot(job_id)
        if not snap.active:
            return snap
        time.sleep(0.2)
    raise AssertionError("job did not finish")


def test_every_page_renders_without_a_gpu(app):
    for page in (None, "pages/kernels.py", "pages/history.py", "pages/method.py"):
        at = app(page)
        assert at.title, page
    kernels = app("pages/kernels.py")
    assert any("No GPU" in c for c in texts(kernels, "caption"))
    assert any("NVIDIA apex is not installed" in m for m in texts(kernels, "markdown"))
    assert any("APEX_CUDA_EXT=1" in c for c in texts(kernels, "code"))


def test_validation_error_shows_next_to_its_field_and_queues_nothing(app, manager):
    at = app()
    at.number_input(key="cfg_width").set_value(66)
    at.number_input(key="cfg_heads").set_value(4)
    at.button[0].click().run()
    errors = texts(at, "error")
    assert any("width=66: must be divisible by heads (4)" in e for e in errors), errors
    assert manager.jobs() == []


def test_cap_violation_names_the_limit(app, manager):
    at = app()
    at.number_input(key="cfg_iters").set_value(10**6)
    at.button[0].click().run()
    assert any("iters=1000000: exceeds the limit of 2000" in e for e in texts(at, "error"))
    assert manager.jobs() == []


def test_unavailable_levers_show_their_reason(app):
    at = app()
    seed_lines = " ".join(texts(at, "markdown"))
    assert "unavailable: Apex FusedAdam runs CUDA kernels only" in seed_lines
    at.radio(key="stage_choice").set_value("custom").run()
    disabled = [c for c in at.checkbox if c.disabled]
    names = {c.label for c in disabled}
    assert {"apex-fusedadam", "apex-fusedln", "tf32"} <= names
    assert any("Apex FusedLayerNorm falls back to F.layer_norm on CPU" in c for c in texts(at, "caption"))


def test_history_lists_runs_from_the_db(app, app_env):
    store = Store(str(app_env / "runs.sqlite3"))
    run = sample_run()
    store.save_run(run)
    at = app("pages/history.py")
    table = at.dataframe[0].value
    assert run.run_id in set(table["run_id"])


def test_bad_import_is_rejected_and_nothing_is_imported(app, app_env):
    at = app("pages/history.py")
    at.text_area(key="paste_text").set_value("name,value\nx,1\n")
    [button] = [b for b in at.button if b.label == "Import pasted text"]
    button.click().run()
    assert any("Import rejected, nothing was imported: missing columns: stage" in e for e in texts(at, "error"))
    assert Store(str(app_env / "runs.sqlite3")).list_runs() == []


def test_good_import_appears_in_history(app, app_env):
    from bench_core.results import to_json
    at = app("pages/history.py")
    run = sample_run()
    at.radio(key="paste_kind").set_value("json")
    at.text_area(key="paste_text").set_value(to_json(run))
    [button] = [b for b in at.button if b.label == "Import pasted text"]
    button.click().run()
    assert any("Imported 1 run" in s for s in texts(at, "success"))
    assert run.run_id in set(at.dataframe[0].value["run_id"])


def test_finished_job_shows_charts_table_and_downloads(app, manager):
    cfg = BenchConfig(depth=1, width=32, heads=2, seq_len=16, batch_size=2, vocab_size=64, warmup=1, iters=3,
                      device="cpu")
    snap = manager.submit(cfg, PRESETS["seed"], "seed", session_id="someone-else")
    done = wait_done(manager, snap.job_id)
    assert [s.status for s in done.run.stages] == ["ok", "unavailable", "unavailable", "unavailable"]
    at = app()
    charts = at.get("plotly_chart")
    assert len(charts) >= 6
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in charts]
    assert any(t.startswith("Speedup") for t in titles) and any("Kernel proof" in t for t in titles)
    speedup = json.loads(next(c for c in charts if "Speedup" in json.loads(c.proto.spec)["layout"]["title"]["text"])
                         .proto.spec)
    assert speedup["data"][0]["text"][0] == "×1.00"
    assert at.dataframe and len(at.dataframe[0].value) == 4
    assert len(at.get("download_button")) == 2
    assert any("another viewer" in s for s in texts(at, "subheader"))


def test_a_viewer_cannot_run(app_env, monkeypatch):
    monkeypatch.setenv("BENCH_OPERATOR_TOKEN", "s3cret")
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT
    at = AppTest.from_file(f"{ROOT}/app.py", default_timeout=30).run()
    run_button = next(b for b in at.button if "Run" in b.label)
    assert run_button.disabled
    assert any("viewer" in c for c in texts(at, "caption"))
    at.text_input(key="operator_token_input").set_value("s3cret").run()
    run_button = next(b for b in at.button if "Run" in b.label)
    assert not run_button.disabled


def test_viewer_cannot_import(app_env, monkeypatch):
    monkeypatch.setenv("BENCH_OPERATOR_TOKEN", "s3cret")
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT
    at = AppTest.from_file(f"{ROOT}/app.py", default_timeout=30).run()
    at.switch_page("pages/history.py").run()
    assert any("Only operators may import runs." in c for c in texts(at, "caption"))
    assert not [b for b in at.button if b.label.startswith("Import")]


def test_a_failing_database_is_never_silent(app, manager):
    manager.persistence_error = "1 write(s) kept in memory, NOT saved to /x.sqlite3: OperationalError: disk full"
    at = app()
    assert any("NOT saved" in e for e in texts(at, "error"))
