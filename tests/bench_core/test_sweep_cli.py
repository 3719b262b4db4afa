"""`python -m bench_core sweep` as a person runs it: refusals before anything starts, and one real tiny sweep on
CPU end to end (native levers, two points, real kernel timings and real worker processes), imported back."""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import bench_core
from bench_core.cli import main
from bench_core.sweep.core.history import SweepStore

COMPARE = "adam+layernorm+fp32,adam-fused+layernorm+fp32"


@pytest.fixture
def nothing_starts(monkeypatch):
    """Any probe or sweep started is a failure: bad input must be refused before either."""
    def refuse(*args, **kwargs):
        raise AssertionError("started although the input is bad")
    monkeypatch.setattr("bench_core.machine.probe.cached_probe", refuse)
    monkeypatch.setattr("bench_core.sweep.core.runner.run_sweep", refuse)


@pytest.mark.parametrize("args, flag", [
    (["--axis", "heads=4,8"], "axis='heads'"),
    (["--axis", "width="], "axis width="),
    (["--axis", "width=64", "--budget", "ten minutes"], "budget="),
    (["--axis", "width=64,128", "--axis", "batch_size=1,2,3"], "axis=6"),   # over BENCH_MAX_SWEEP_POINTS=5
    (["--axis", "width=64", "--compare", "warp-drive"], "compare="),
    (["--axis", "width=64", "--device", "tpu"], "device="),
    (["--axis", "width=64", "--json", "/no/such/folder/s.json"], "json="),
    (["--axis", "width=64", "--family", "bert"], "family="),
])
def test_bad_input_exits_2_naming_the_flag_and_starts_nothing(args, flag, nothing_starts, capsys, monkeypatch):
    monkeypatch.setenv("BENCH_MAX_SWEEP_POINTS", "5")
    argv = ["sweep", "--device", "cpu", "--compare", COMPARE, *args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: " + flag) and "Traceback" not in err, err


@pytest.mark.parametrize("command", ["sweep", "run"])
def test_an_html_report_without_plotly_is_refused_before_anything_starts(command, nothing_starts, capsys,
                                                                         monkeypatch, tmp_path):
    """The H200 has no plotly: a 225 s sweep wrote its JSON, then ended in a traceback at the HTML."""
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "plotly" else real(name, *a))
    monkeypatch.setattr("bench_core.cli.start_spares", lambda args: (_ for _ in ()).throw(AssertionError("started")))
    argv = {"sweep": ["sweep", "--compare", COMPARE, "--axis", "width=64"], "run": ["run", "--preset", "native"]}
    assert main([*argv[command], "--device", "cpu", "--no-db", "--html", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: html=") and "plotly" in err and "Traceback" not in err, err


def test_a_stage_that_cannot_run_here_exits_2_before_any_point(capsys, monkeypatch, cpu_probe):
    """FP8 on a CPU: refused with the lever's own reason, after the probe, before the sweep starts."""
    monkeypatch.setattr("bench_core.machine.probe.cached_probe", lambda **kw: (cpu_probe, True))

    def refuse(*args, **kwargs):
        raise AssertionError("started although a stage cannot run here")
    monkeypatch.setattr("bench_core.sweep.core.runner.run_sweep", refuse)
    assert main(["sweep", "--device", "cpu", "--compare", "fp8-torchao", "--axis", "width=64", "--model", "tiny",
                 "--no-db"]) == 2
    err = capsys.readouterr().err
    assert "adam-fused+layernorm+fp8-torchao cannot run here" in err and "compute capability" in err, err


def test_a_comparison_that_runs_the_same_code_here_is_warned_of_before_the_sweep_starts(capsys, monkeypatch,
                                                                                           cpu_probe):
    """adam against adam-loop on a CPU: both run torch's for-loop Adam, so the map would hold only noise; the
    command line says so (from the registry, as the page does) before any point runs."""
    monkeypatch.setattr("bench_core.machine.probe.cached_probe", lambda **kw: (cpu_probe, True))

    class Started(Exception):
        pass

    def started(*args, **kwargs):
        raise Started
    monkeypatch.setattr("bench_core.sweep.core.runner.run_sweep", started)
    with pytest.raises(Started):
        main(["sweep", "--device", "cpu", "--compare", "adam-loop", "--axis", "width=64", "--model", "tiny",
              "--no-db"])
    err = capsys.readouterr().err
    assert "warning: On CPU, adam and adam-loop run the same" in err and "aten::_foreach_" in err, err


def test_a_missing_compare_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["sweep", "--axis", "width=64"])
    assert exc.value.code == 2 and "--compare" in capsys.readouterr().err


def test_ctrl_c_cancels_the_sweep_and_keeps_what_finished():
    """The CLI's wait: Ctrl-C (here raised in the main thread) sets the cancel and still returns the sweep's result,
    which the runner ends with every finished point; it never returns before the sweep does."""
    import _thread
    import signal
    import threading

    from rich.console import Console

    from bench_core.sweep_cli import _until_done
    cancel, ended = threading.Event(), threading.Event()

    def work():
        cancel.wait(60)
        ended.set()
        return "the sweep so far"
    # Ctrl-C as a terminal delivers it: Python's own SIGINT handler, whatever an earlier test in this process left
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.5, _thread.interrupt_main).start()
        assert _until_done(work, cancel, Console(file=open(os.devnull, "w"))) == "the sweep so far"
    finally:
        signal.signal(signal.SIGINT, previous)
    assert cancel.is_set() and ended.is_set()


@pytest.mark.slow
def test_a_real_tiny_sweep_on_cpu_end_to_end_and_its_import(tmp_path):
    """Two widths of the tiny model, adam against adam-fused: both points predicted from their kernels and
    measured by real workers; the JSON, CSV and HTML written; the history has it; the JSON imports again."""
    # the bench_core under test, also where the installed one is another checkout's
    env = {**os.environ, "PYTHONPATH": str(Path(bench_core.__file__).resolve().parents[1]),
           "BENCH_WARMUP_MIN_S": "0", "BENCH_CACHE_DIR": str(tmp_path / "cache"), "BENCH_DB": str(tmp_path / "h.db")}
    out, csv_path, html = tmp_path / "s.json", tmp_path / "s.csv", tmp_path / "s.html"
    proc = subprocess.run([sys.executable, "-m", "bench_core", "sweep", "--compare", COMPARE, "--model", "tiny",
                           "--device", "cpu", "--axis", "width=64,128", "--iters", "5", "--warmup", "1", "--quiet",
                           "--breakdown", "--json", str(out), "--csv", str(csv_path), "--html", str(html)],
                          cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["status"] == "done" and data["spec"]["b"] == "adam-fused+layernorm+fp32" and data["spec"]["breakdown"]
    assert [p["values"] for p in data["points"]] == [[["width", 64]], [["width", 128]]]
    for p in data["points"]:
        assert p["measurement"]["status"] == "ok" and p["measurement"]["speedup"] > 0
        # a CPU's timings can be noisier than a block: then the point says so instead of extrapolating noise
        if p["prediction"] is None:
            assert "faster with two blocks than with one" in p["prediction_note"]
            continue
        assert p["prediction"]["speedup"] > 0
        parts = {(t["part"], t["variant"]): t for t in p["prediction"]["timings"]["times"]}
        assert parts[("step@2", COMPARE.split(",")[1])]["ms"] > 0 and parts[("norm", "layernorm@fp32")]["calls"] == 5
    assert "speedup prediction error (rms over the points measured)" in proc.stdout
    assert "2 of 2 points measured end to end" in proc.stdout
    assert "s of it timing the breakdown's parts" in proc.stdout   # what --breakdown cost, said
    assert csv_path.read_text().count("\n") == 3 and "fig-sweep" in html.read_text()
    store = SweepStore(env["BENCH_DB"])
    (row,) = store.list_sweeps()
    assert row["sweep_id"] == data["sweep_id"] and row["measured"] == 2
    imported = subprocess.run([sys.executable, "-m", "bench_core", "import", str(out)], cwd=tempfile.gettempdir(),
                              capture_output=True, text=True, timeout=60, env=env)
    assert imported.returncode == 0 and "already exists: imported under a new id" in imported.stdout
    assert len(store.list_sweeps()) == 2


@pytest.mark.parametrize("hf, lever, a, b", [
    ("llama-3.2-1b", "liger-ln", "adam-fused+rmsnorm+bf16", "adam-fused+liger-rms+bf16"),
    ("llama-3.2-1b", "apex-fusedln", "adam-fused+rmsnorm+bf16", "adam-fused+apex-fusedrms+bf16"),
    ("gpt2", "apex-fusedrms", "adam-fused+layernorm+bf16", "adam-fused+apex-fusedln+bf16"),
])
def test_a_hugging_face_models_comparison_names_the_norm_it_has(hf, lever, a, b):
    """A lever named for the other norm is the twin for the model's own (as ladders and recommendations map it):
    read with the `hf` family's rules, `apex-fusedln` on HF Llama swapped no module at all."""
    from bench_core.sweep_cli import parser, resolve
    spec = resolve(parser().parse_args(["--hf", hf, "--compare", lever, "--axis", "batch_size=1,2", "--device", "cpu"]))
    assert (spec.comparison.a.key, spec.comparison.b.key) == (a, b)


def test_a_comparison_of_a_hugging_face_models_own_norm_with_itself_is_refused(capsys):
    assert main(["sweep", "--hf", "llama-3.2-1b", "--compare", "rmsnorm", "--axis", "batch_size=1,2",
                 "--device", "cpu"]) == 2
    assert "in the llama family both stages are adam-fused+rmsnorm+bf16" in capsys.readouterr().err


def test_a_model_factory_is_no_sweep_base(capsys, nothing_starts):
    assert main(["sweep", "--model-factory", "docs.examples.my_model:build", "--compare", COMPARE,
                 "--axis", "batch_size=1,2", "--device", "cpu"]) == 2
    assert "model_factory=" in capsys.readouterr().err


@pytest.mark.slow
def test_a_real_tiny_sweep_of_a_hugging_face_architecture(tmp_path):
    """A catalog architecture as the sweep's base, cut small, two batch sizes measured end to end on CPU: the sweep
    keeps the source, so its file says which model it mapped."""
    out = tmp_path / "hf_sweep.json"
    assert main(["sweep", "--hf", "llama-3.2-1b", "--depth", "2", "--width", "64", "--heads", "4", "--seq-len", "32",
                 "--batch-size", "2", "--vocab-size", "256", "--iters", "4", "--compare",
                 "adam+rmsnorm+fp32,adam-fused+rmsnorm+fp32", "--axis", "batch_size=1,2", "--device", "cpu",
                 "--no-db", "--quiet", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["spec"]["base"]["source"]["name"] == "llama-3.2-1b"
    assert [(p["measurement"] or {}).get("status") for p in data["points"]] == ["ok", "ok"], data["points"]
