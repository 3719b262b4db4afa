"""The dashboard's pages under Streamlit's AppTest: a real JobManager, real CPU stages, a temp DB."""
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import dashboard.session
from bench_core.config.bench_config import FIELD_LABELS, BenchConfig
from bench_core.levers.presets import PRESETS, default_preset
from bench_core.levers.stage import Stage
from bench_core.results.formats import to_json
from bench_core.results.records import Status
from bench_core.results.store import Store
from bench_core.service.jobs import NotAllowed
from helpers import sample_run, sample_runs, wait, wait_for

CFG = BenchConfig(depth=1, width=32, heads=2, seq_len=16, batch_size=2, vocab_size=64, warmup=1, iters=3,
                  device="cpu")


def texts(at, kind):
    return [e.value for e in at.get(kind)]


def walk(node):
    for child in getattr(node, "children", {}).values():
        yield child
        yield from walk(child)


def block(at, key):
    """The st.container(key=...) block of the page."""
    found = [n for n in walk(at.main) if type(n).__name__ == "Block"
             and (getattr(n, "key", None) == key or str(getattr(n, "key", None) or "").startswith(key + "_"))]
    assert len(found) == 1, f"{len(found)} blocks with key {key!r}"
    return found[0]


def verdict_lines(at):
    return [n.value for n in walk(block(at, "verdict")) if type(n).__name__ == "Markdown"]


def doctor_lines(at):
    """The Kernels page's Apex build doctor, one markdown line a check."""
    return [n.value for n in walk(block(at, "doctor")) if type(n).__name__ == "Markdown"]


def figure(at, title_start):
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        if spec["layout"].get("title", {}).get("text", "").startswith(title_start):
            return spec
    raise AssertionError(f"no chart titled {title_start!r}")


def run_button(at):
    [button] = [b for b in at.button if b.label == "Run"]
    return button


def select_history_rows(at, rows):
    """What clicking the row checkboxes of the History table does: the dataframe's selection state."""
    at.session_state["runs"] = {"selection": {"rows": list(rows), "columns": []}}
    return at.run()


def test_every_page_renders_without_a_gpu(app):
    for page in (None, "pages/components.py", "pages/kernels.py", "pages/history.py", "pages/method.py"):
        at = app(page)
        assert at.title, page
    kernels = app("pages/kernels.py")
    captions = " ".join(texts(kernels, "caption"))
    assert "No GPU" in captions
    assert "there is nothing to build Apex for here" in captions  # no install commands that cannot apply
    assert not [c for c in texts(kernels, "code") if "APEX_CUDA_EXT=1" in c]
    assert any("not installed — and Apex's kernels need a CUDA build of torch" in m for m in texts(kernels, "markdown"))
    assert [b.label for b in kernels.button if b.label == "Probe again"] == ["Probe again"]  # an operator
    doctor = doctor_lines(kernels)  # the Apex build doctor: a line a check, its finding and fix under its name
    [torch] = [line for line in doctor if line.startswith(":red[**FAIL**] **torch** — ")]  # a CPU torch: no Apex
    assert "is a CPU build" in torch and "**Fix:** install a CUDA build of torch" in torch
    # each mark a word in a colour, readable without an emoji font; no build advised where nothing is to be built
    assert all(line.split(" ", 1)[0] in (":green[**PASS**]", ":orange[**WARN**]", ":red[**FAIL**]")
               for line in doctor), doctor
    assert not any("make apex" in line for line in doctor), doctor
    assert "python -m bench_core apex doctor" in captions


def test_kernels_page_gives_the_one_apex_command_on_a_gpu_without_apex(app_env, monkeypatch, root):
    from bench_core.machine.probe import Probe
    gpu = Probe.from_dict({"torch": "2.11.0+cu130", "cuda_runtime": "13.0", "nvcc": {"version": "13.0"},
                           "cuda": {"available": True, "name": "NVIDIA H200", "capability": [9, 0]},
                           "apex": {"status": "missing", "extensions": {}}})
    monkeypatch.setattr(dashboard.session, "PROBE_OVERRIDE", gpu)
    at = AppTest.from_file(str(root / "app.py"), default_timeout=90).run()
    at.switch_page("pages/kernels.py").run()
    assert not at.exception, at.exception
    assert "make apex    # or: APEX_SRC=/path/to/apex make apex" in texts(at, "code")
    assert ":green[**PASS**] **GPU** — NVIDIA H200 (compute capability 9.0)" in doctor_lines(at)


def test_validation_error_shows_under_its_field_and_clears_once_fixed(app, manager):
    at = app()
    assert not run_button(at).disabled
    at.text_input(key="cfg_width").set_value("66")
    at.text_input(key="cfg_heads").set_value("4").run()
    # under the field: the error is the element right after the Width input, in the same column
    column = next(n for n in walk(at.main) if hasattr(n, "children") and any(
        getattr(c, "key", None) == "cfg_width" for c in n.children.values()))
    children = list(column.children.values())
    after = children[[getattr(c, "key", None) for c in children].index("cfg_width") + 1]
    assert type(after).__name__ == "Error" and after.value == "Width = 66: must be divisible by heads (4)"
    assert texts(at, "error") == ["Width = 66: must be divisible by heads (4)"]
    assert run_button(at).disabled and manager.jobs() == []
    at.text_input(key="cfg_width").set_value("64").run()
    assert texts(at, "error") == [] and not run_button(at).disabled
    assert manager.jobs() == []


@pytest.mark.parametrize("field,value,message", [
    ("iters", "1000000", "Timed iterations = 1000000: exceeds the limit of 2000"),
    ("depth", "two", "Depth (layers) = two: must be an integer"),
    ("batch_size", "", "Batch size: is empty: enter a number"),
    ("depth", "0", "Depth (layers) = 0: must be a positive integer"),
])
def test_a_bad_field_names_the_limit_and_nothing_runs(app, manager, field, value, message):
    at = app()
    box = at.text_input(key=f"cfg_{field}")
    assert box.label == FIELD_LABELS[field]
    box.set_value(value).run()
    assert message in texts(at, "error")
    assert run_button(at).disabled
    assert manager.jobs() == [] and manager.store.list_runs() == []


def test_a_cpu_machine_starts_on_a_ladder_that_runs_there(app):
    """No CUDA: the CPU's default ladder is offered first, no GPU-count picker, the caption names the CPU timer."""
    at = app()
    assert at.radio(key="stage_choice").value == default_preset("cpu")
    assert not [m for m in at.multiselect if m.key == "gpu_counts"]
    captions = " ".join(texts(at, "caption"))
    assert "timed with time.perf_counter" in captions and "CUDA events" not in captions
    assert "seed ladder runs 3 of its 7 stages" in " ".join(texts(at, "info"))
    lines = [ln for ln in texts(at, "markdown") if ln[:1].isdigit()]
    assert [ln.split("`")[1] for ln in lines] == [s.key for s in PRESETS[default_preset("cpu")]]


def test_unavailable_levers_show_their_reason(app):
    at = app()
    at.radio(key="stage_choice").set_value("seed").run()
    seed_lines = " ".join(texts(at, "markdown"))
    assert "unavailable: Apex FusedAdam runs CUDA kernels only" in seed_lines
    at.radio(key="stage_choice").set_value("custom").run()
    assert "apex-fusedadam" not in at.radio(key="lever_optimizer").options
    assert "apex-fusedln" not in at.radio(key="lever_norm").options
    assert "tf32" not in at.radio(key="lever_precision").options
    assert "graphs" not in at.radio(key="lever_compile").options
    captions = texts(at, "caption")
    for line in ("apex-fusedadam: Apex FusedAdam runs CUDA kernels only (amp_C); no CPU path",
                 "apex-fusedln: Apex FusedLayerNorm falls back to F.layer_norm on CPU",
                 "tf32: TF32 (a tensor-core mode) needs a CUDA device",
                 "graphs: CUDA graphs capture GPU work: needs a CUDA device"):
        assert line in captions, captions


def test_the_llama_family_takes_the_rms_ladder_and_refuses_layernorm(app):
    at = app()
    at.radio(key="stage_choice").set_value("seed").run()
    at.selectbox(key="cfg_family").set_value("llama").run()
    seed_lines = " ".join(texts(at, "markdown"))
    assert "`adam+rmsnorm+fp32` — runs here" in seed_lines and "apex-fusedrms" in seed_lines
    assert "layernorm" not in seed_lines
    at.radio(key="stage_choice").set_value("custom").run()
    assert at.radio(key="lever_norm").options == ["rmsnorm"]  # LayerNorm levers are the other family's
    captions = texts(at, "caption")
    assert "layernorm: layernorm is a LayerNorm, valid only for the gpt family; for llama use rmsnorm" in captions
    assert "liger-flce: Liger-Kernel (Triton) needs a CUDA device" in captions
    at.selectbox(key="size_preset").set_value("llama-small").run()  # a size sets its family too
    assert at.selectbox(key="cfg_family").value == "llama" and at.text_input(key="cfg_vocab_size").value == "32000"


def test_the_custom_ladder_holds_stage_keys_as_the_cli_takes_them(app):
    """A stage added lever by lever is kept as its key, the one `run --stages` and the CSV use."""
    at = app()
    at.radio(key="stage_choice").set_value("custom").run()
    at.radio(key="lever_optimizer").set_value("adam-fused").run()
    at.radio(key="lever_precision").set_value("bf16").run()
    next(b for b in at.button if b.label == "Add stage to the ladder").click().run()
    assert at.session_state["custom_ladder"] == ["adam-fused+layernorm+bf16"]
    assert any(line.startswith("1. `adam-fused+layernorm+bf16`") for line in texts(at, "markdown"))


def test_history_lists_runs_from_the_db(app, app_env):
    store = Store(str(app_env / "runs.sqlite3"))
    run = sample_run()
    store.save_run(run)
    at = app("pages/history.py")
    table = at.dataframe[0].value
    assert run.run_id in set(table["run_id"])


@pytest.mark.slow
def test_a_cli_run_lands_in_the_history_page(app, app_env):
    db = app_env / "runs.sqlite3"
    proc = subprocess.run([sys.executable, "-m", "bench_core", "run", "--preset", "seed", "--device", "cpu",
                           "--iters", "2", "--warmup", "1", "--quiet"], cwd=tempfile.gettempdir(),
                          capture_output=True, text=True, timeout=300, env={**os.environ, "BENCH_DB": str(db)})
    assert proc.returncode == 0, proc.stderr
    [row] = Store(str(db)).list_runs()
    at = app("pages/history.py")
    table = at.dataframe[0].value
    listed = table[table["run_id"] == row["run_id"]]
    assert len(listed) == 1 and listed.iloc[0]["status"] == "done" and listed.iloc[0]["preset"] == "seed"
    stored = Store(str(db)).load_run(row["run_id"])
    ran = sum(s.status == Status.OK for s in stored.stages)  # the seed's native twins run on a CPU, its Apex stages not
    assert ran == 3 and listed.iloc[0]["gpu"] == "CPU" and listed.iloc[0]["ok"] == ran


def test_bad_import_is_rejected_and_nothing_is_imported(app, app_env):
    at = app("pages/history.py")
    at.text_area(key="paste_text").set_value("name,value\nx,1\n")
    [button] = [b for b in at.button if b.label == "Import pasted text"]
    button.click().run()
    assert any("Import rejected, nothing was imported: missing columns: stage" in e for e in texts(at, "error"))
    assert Store(str(app_env / "runs.sqlite3")).list_runs() == []


def test_good_import_appears_in_history(app, app_env):
    at = app("pages/history.py")
    run = sample_run()
    at.radio(key="paste_kind").set_value("json")
    at.text_area(key="paste_text").set_value(to_json(run))
    [button] = [b for b in at.button if b.label == "Import pasted text"]
    button.click().run()
    assert any("Imported 1 run" in s for s in texts(at, "success"))
    assert run.run_id in set(at.dataframe[0].value["run_id"])


def test_an_imported_sweep_is_linked_to_its_map(app, app_env):
    """A sweep's JSON imports on History, and the message links to the Sweep page showing it (a new user imported
    one and found no way there)."""
    at = app("pages/history.py")
    at.radio(key="paste_kind").set_value("json")
    sweep = Path(__file__).parents[2] / "docs" / "data" / "h200_2026-12-04_call29_sweep_apex_gpt_1.json"
    at.text_area(key="paste_text").set_value(sweep.read_text())
    [button] = [b for b in at.button if b.label == "Import pasted text"]
    button.click().run()
    assert any("[sweep 4ce754672c94](/sweep?sweep=4ce754672c94)" in s for s in texts(at, "success")), \
        texts(at, "success")


@pytest.mark.slow
def test_finished_cpu_seed_run_shows_its_verdict_charts_table_and_downloads(app, manager):
    snap = manager.submit(CFG, PRESETS["seed"], "seed", session_id="someone-else")
    done = wait(manager, snap.job_id, timeout=300)
    assert [s.status for s in done.run.stages] == [Status.OK] + [Status.UNAVAILABLE] * 3
    at = app()
    charts = at.get("plotly_chart")
    assert len(charts) >= 6
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in charts]
    assert any("Kernel proof" in t for t in titles)
    speedup = figure(at, "Speedup")
    labels = [text for trace in speedup["data"] if trace.get("type") == "scatter" for text in trace.get("text") or []]
    assert labels[0].strip() == "×1.00"  # the baseline's number, drawn beside its bar (beyond any error bar)
    assert speedup["data"][0]["y"] == [s.key for s in PRESETS["seed"]]
    assert at.dataframe and len(at.dataframe[0].value) == 4
    assert [b.label for b in at.get("download_button")] == ["Download CSV", "Download JSON", "Download HTML report"]
    assert any("another viewer" in s for s in texts(at, "subheader"))
    # the verdict, in words: what ran, and why the Apex stages did not, with a way to a ladder that runs here
    lines = verdict_lines(at)
    assert lines[0].startswith("**Apex: not measured here** — ") and lines[1] == "#### Verdict"
    assert any(line.startswith("- Only the baseline **adam+layernorm+fp32** gave a result here (") and
               line.endswith("ms a step): there is nothing to compare it with.") for line in lines), lines
    assert "- Did not run: 3 of 4 stages (Apex needs a CUDA GPU and a CUDA build of torch)." in lines
    [switch] = [b for b in at.button if b.label == "Switch to the native ladder (runs on this CPU)"]
    switch.click().run()
    assert at.radio(key="stage_choice").value == "native"
    assert "adam-fused+layernorm+bf16+graphs" in " ".join(texts(at, "markdown"))


@pytest.mark.slow
def test_a_run_with_a_failed_stage_says_so_in_its_verdict(app, manager, monkeypatch):
    monkeypatch.setenv("BENCH_TEST_FAULT", "exit3@adam-fused+layernorm+fp32")  # the worker's environment
    snap = manager.submit(CFG, [Stage(), Stage("adam-fused")], "custom", session_id="s")
    done = wait(manager, snap.job_id, timeout=300)
    assert [s.status for s in done.run.stages] == [Status.OK, Status.FAILED]
    at = app()
    lines = verdict_lines(at)
    assert "- Failed: adam-fused+layernorm+fp32 (failed: worker exited with code 3)." in lines, lines
    assert not any("adam-fused+layernorm+fp32" in line for line in lines if "Fastest" in line)
    speedup = figure(at, "Speedup")
    assert speedup["data"][0]["text"][1] == "failed" and speedup["data"][0]["x"][1] == 0
    assert speedup["data"][0]["hovertext"][1] == "worker exited with code 3"


def grid_marks(at):
    return {mark for row in figure(at, "Kernel proof")["data"][0]["text"] for mark in row}


def test_an_imported_gpu_run_is_never_shown_as_verified_here(app, app_env, manager, monkeypatch):
    gpu_run = sample_runs().gpu_run()
    # The same run id, measured and not imported, drawn first from another history in this process: the server
    # shares built figures between viewers, and the imported run must not be given that run's "✓".
    elsewhere = str(app_env / "elsewhere.sqlite3")
    Store(elsewhere).save_run(gpu_run)
    monkeypatch.setenv("BENCH_DB", elsewhere)
    st.cache_resource.clear()
    assert "✓" in grid_marks(select_history_rows(app("pages/history.py"), [0]))
    monkeypatch.setenv("BENCH_DB", str(app_env / "runs.sqlite3"))
    st.cache_resource.clear()
    message = manager.import_file("h200.json", to_json(gpu_run).encode())
    assert message == "Imported 1 run(s) from h200.json: run abc123def456."
    at = app("pages/history.py")
    table = at.dataframe[0].value
    assert list(table["run_id"]) == ["abc123def456"] and bool(table.iloc[0]["imported"])
    assert table.iloc[0]["best_speedup"] is None or table.iloc[0]["best_speedup"] != table.iloc[0]["best_speedup"]
    at = select_history_rows(at, [0])
    assert not at.exception, at.exception
    [stages] = [d.value for d in at.dataframe if "verdict" in d.value.columns]   # after the contributions' table
    verdicts = list(stages["verdict"])
    assert verdicts == ["imported: verified on NVIDIA H200"] * 2 + ["—"] + ["imported: verified on NVIDIA H200"]
    shown = [*texts(at, "markdown"), *texts(at, "caption"), *verdicts, *[e.label for e in at.get("expandable")]]
    assert not [t for t in shown if "verified" in t and "imported: verified on NVIDIA H200" not in t], shown
    lines = verdict_lines(at)
    assert any(line.startswith("- Fastest: **apex-fusedadam+apex-fusedln+bf16** at 20.00 ms a step, ×5.00")
               for line in lines), lines
    # the kernel grid marks what was seen there as imported, never as used here
    marks = grid_marks(at)
    assert "✓ (imported)" in marks and "✓" not in marks


def test_two_runs_compared_in_history_line_up_by_stage(app, app_env):
    store = Store(str(app_env / "runs.sqlite3"))
    first, second = sample_run(), sample_runs().gpu_run()
    store.save_run(first)
    store.save_run(second)
    at = select_history_rows(app("pages/history.py"), [0, 1])
    assert not at.exception, at.exception
    speedup = figure(at, "Speedup")
    keys = [s.key for s in PRESETS["seed"]]
    assert [trace["y"] for trace in speedup["data"] if trace.get("type") == "bar"] == [keys, keys]
    assert speedup["layout"]["yaxis"]["categoryarray"] == keys


def test_a_viewer_cannot_run(app_env, monkeypatch, root):
    monkeypatch.setenv("BENCH_OPERATOR_TOKEN", "s3cret")
    at = AppTest.from_file(str(root / "app.py"), default_timeout=90).run()
    assert run_button(at).disabled
    assert any("viewer" in c for c in texts(at, "caption"))
    at.text_input(key="operator_token_input").set_value("s3cret").run()
    assert not run_button(at).disabled


def test_a_viewer_cannot_import_or_probe_again_even_past_the_page(app_env, monkeypatch, root, manager):
    monkeypatch.setenv("BENCH_OPERATOR_TOKEN", "s3cret")
    at = AppTest.from_file(str(root / "app.py"), default_timeout=90).run()
    at.switch_page("pages/history.py").run()
    assert any("Only operators may import runs." in c for c in texts(at, "caption"))
    assert not [b for b in at.button if b.label.startswith("Import")]
    at.switch_page("pages/kernels.py").run()
    assert not [b for b in at.button if b.label == "Probe again"]
    # the page hides the buttons; the manager refuses on its own
    with pytest.raises(NotAllowed):
        manager.import_file("run.json", to_json(sample_run()).encode(), role="viewer")
    with pytest.raises(NotAllowed):
        manager.reprobe(role="viewer")
    assert manager.store.list_runs() == []


@pytest.mark.slow
def test_a_failing_database_is_never_silent(app, app_env, manager):
    """A real write failure: another connection holds the database's write lock while a run is submitted."""
    path = str(app_env / "runs.sqlite3")
    blocker = sqlite3.connect(path)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        at = app()
        for name, value in {"depth": "1", "width": "32", "heads": "2", "seq_len": "16", "batch_size": "2",
                            "vocab_size": "64", "warmup": "1", "iters": "3"}.items():
            at.text_input(key=f"cfg_{name}").set_value(value)
        at.radio(key="stage_choice").set_value("seed")   # the CPU default is native: this test reads seed's stages
        at.run()
        run_button(at).click().run()
        [job] = manager.jobs()
        banner = [e for e in texts(at, "error") if e.startswith("Saving to the history database failed")]
        assert banner and f"NOT saved to {path}: OperationalError: database is locked" in banner[0], texts(at, "error")
    finally:
        blocker.rollback()
        blocker.close()
    done = wait(manager, job.job_id, timeout=300)
    assert done.status == Status.DONE
    # the lock is gone: the next write replayed what was kept (the run's final state is written just after the
    # job is marked done), and the banner is gone with the error
    wait_for(lambda: Store(path).load_run(job.job_id).status == Status.DONE, timeout=30, what="the final write")
    assert manager.persistence_error is None
    # the seed ladder on a CPU: its baseline and the two PyTorch twins run, the Apex stages cannot
    assert [s.status for s in Store(path).load_run(job.job_id).stages] == \
        [Status.OK] + [Status.UNAVAILABLE] * 3 + [Status.OK, Status.UNAVAILABLE, Status.OK]
    at.run()
    assert not [e for e in texts(at, "error") if e.startswith("Saving to the history database failed")]


class FakeCluster:
    """An executor with machines, as the Ray executor lists them (no Ray here)."""
    name, concurrent = "fake", True

    def __init__(self, nodes):
        self._nodes = nodes

    def nodes(self, wait_s=0.0):
        return self._nodes

    def node_probe(self, node):
        return None


def test_the_machines_page_lists_each_node_with_its_probe_and_the_form_picks_among_them(app, manager, cpu_probe,
                                                                                       monkeypatch):
    from bench_core.cluster.nodes import EVERY_GPU_TYPE, Node, Retry
    from bench_core.machine.probe import Probe
    h200 = Probe.from_dict({"cuda": {"available": True, "name": "NVIDIA H200", "device_count": 8,
                                     "total_bytes": 141 * 2**30}, "driver": "580.1", "torch": "2.11.0",
                            "apex": {"status": "genuine"}})
    nodes = [Node("1", "h200-box", "10.0.0.1", True, 8, "H200", busy=True, probe=h200),
             Node("2", "cpu-box", "10.0.0.2", True, 0, probe=cpu_probe),
             Node("3", "l40s", "10.0.0.3", False, 1, "L40S")]
    monkeypatch.setattr(manager, "executor", FakeCluster(nodes))
    at = app("pages/machines.py")
    table = at.dataframe[0].value
    assert list(table["machine"]) == ["h200-box", "cpu-box", "l40s"]
    assert list(table["state"]) == ["busy", "free", "lost"]
    assert table.loc[0, "GPU"] == "NVIDIA H200" and table.loc[0, "Apex"] == "genuine"
    assert table.loc[1, "GPU"] == "CPU only" and table.loc[2, "GPU"] == "probing…"
    at.switch_page("pages/benchmark.py").run()
    picker = at.multiselect(key="machines_choice")
    assert picker.options == [EVERY_GPU_TYPE, "h200-box", "cpu-box"] and picker.value == [EVERY_GPU_TYPE]
    assert not at.checkbox(key="retry_on_lost").value and not [r for r in at.radio if r.key == "retry_where"]
    at.checkbox(key="retry_on_lost").check().run()
    assert at.radio(key="retry_where").options == [Retry.SAME_GPU.label, Retry.ANY.label]
    submitted = []
    monkeypatch.setattr(manager, "submit", lambda *a, **k: submitted.append(k) or SimpleNamespace(job_id="j"))
    at.radio(key="retry_where").set_value(Retry.ANY)
    at.multiselect(key="machines_choice").set_value(["cpu-box"]).run()
    run_button(at).click().run()
    assert [(k["machine"], k["retry"]) for k in submitted] == [("cpu-box", Retry.ANY)]


def test_without_a_cluster_the_form_has_no_machine_picker(app):
    at = app()
    assert not [m for m in at.multiselect if m.key == "machines_choice"]
    assert not [c for c in at.checkbox if c.key == "retry_on_lost"]
    at.switch_page("pages/machines.py").run()
    assert any("No cluster configured" in c.value for c in at.caption)
