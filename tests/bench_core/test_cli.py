"""`python -m bench_core …` as a person runs it: real processes, real files, a real history database."""
import csv
import json
import os
import subprocess
import sys
import tempfile

import pytest
from sample_runs import gpu_run

from bench_core.levers.presets import PRESETS, across_gpus
from bench_core.levers.registry import KINDS, names_of
from bench_core.levers.stage import Stage
from bench_core.measure.breakdown import CATEGORIES
from bench_core.results.formats import to_csv, to_json
from bench_core.results.store import Store

APEX_ON_CPU = "Apex FusedAdam runs CUDA kernels only (amp_C); no CPU path"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """One probe cache for the module (the first run measures, the others reuse it), and a default history
    database of its own: no test writes to the user's."""
    base = tmp_path_factory.mktemp("cli")
    return {"BENCH_CACHE_DIR": str(base / "cache"), "BENCH_DB": str(base / "default.sqlite3"),
            "XDG_DATA_HOME": str(base / "xdg")}


@pytest.fixture
def cli(home):
    def run(*args, timeout=300, **env):
        """From a neutral directory: the installed package, not a copy found via cwd."""
        return subprocess.run([sys.executable, "-m", "bench_core", *args], cwd=tempfile.gettempdir(),
                              capture_output=True, text=True, timeout=timeout, env={**os.environ, **home, **env})
    return run


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("args,message", [
    (["--width", "66", "--heads", "4"], "width=66: must be divisible by heads (4)"),
    (["--preset", "turbo"], "preset='turbo': unknown preset"),
    (["--iters", "ten"], "iters='ten': must be an integer"),
    (["--device", "cuda"], "device='cuda': no CUDA device is available"),
    (["--batch-size", "0"], "batch_size=0: must be a positive integer"),
    (["--repeats", "9"], "repeats=9: exceeds the limit of 5"),
    (["--gpus", "3"], "gpus='3': choose from 1, 2, 4, 8"),
    (["--family", "mamba"], "family='mamba': must be one of gpt, llama"),
    (["--preset", "llama-seed", "--model", "gpt2-small"], "preset='llama-seed': is the seed ladder for the llama"),
])
@pytest.mark.slow
def test_bad_input_exits_2_without_traceback(cli, tmp_path, args, message):
    db = tmp_path / "h.sqlite3"
    proc = cli("run", *args, BENCH_DB=str(db))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr + proc.stdout
    assert not db.exists()  # refused before anything was saved


@pytest.mark.slow
def test_run_writes_csv_json_html_and_lands_in_the_history(cli, tmp_path):
    out, js, html, db = tmp_path / "r.csv", tmp_path / "r.json", tmp_path / "r.html", tmp_path / "h.sqlite3"
    proc = cli("run", "--preset", "seed", "--device", "cpu", "--width", "64", "--iters", "3", "--warmup", "1",
               "--out", str(out), "--json", str(js), "--html", str(html), "--db", str(db), "--quiet")
    assert proc.returncode == 0, proc.stderr
    rows = read_csv(out)
    apex = ["apex" in r["stage"] for r in rows]  # the seed's four stages, then its native twins, which run here
    assert len(rows) == 7 and [r["status"] for r in rows] == ["unavailable" if a else "ok" for a in apex]
    assert "adam+layernorm+fp32" in proc.stdout and "\u200b" not in proc.stdout  # copies as it reads
    # each stage says why it did not run: on a CPU it is the device, before any question of installing Apex
    assert [r["reason"] for r in rows] == [APEX_ON_CPU if a else "" for a in apex] and sum(apex) == 4
    page = html.read_text().replace("<wbr>", "")  # stage names may break after '+' on a phone
    assert all(f"<td>{r['stage']}" in page for r in rows) and "Plotly.newPlot" in page  # twins: marked so
    assert json.loads(js.read_text())["run_id"] == rows[0]["run_id"]
    # the history has the run, as it finished
    run_id = rows[0]["run_id"]
    [listed] = Store(str(db)).list_runs()
    assert listed["run_id"] == run_id and listed["status"] == "done" and listed["stages"] == 7 and listed["ok"] == 3
    assert listed["imported"] == 0
    saved = Store(str(db)).load_run(run_id)
    assert len(saved.stages[0].times_ms) == 3 and saved.stages[0].profile is not None
    assert f"saved to the history: {db} (run {run_id})" in proc.stderr


@pytest.mark.slow
def test_no_db_writes_nothing(cli, tmp_path):
    default, xdg = tmp_path / "default.sqlite3", tmp_path / "xdg"
    proc = cli("run", "--preset", "seed", "--device", "cpu", "--iters", "2", "--warmup", "1", "--no-db", "--quiet",
               BENCH_DB=str(default), XDG_DATA_HOME=str(xdg))
    assert proc.returncode == 0, proc.stderr
    assert not default.exists() and not xdg.exists()
    assert "saved to the history" not in proc.stderr


@pytest.mark.slow
def test_repeats_fill_the_new_columns_without_making_up_gpu_figures(cli, home, tmp_path):
    """Two rounds on CPU, the baseline at 1 and 2 gloo processes: a non-baseline ok stage with an interval.
    No --db: the run goes to the default history ($BENCH_DB)."""
    out, js = tmp_path / "r.csv", tmp_path / "r.json"
    seed4 = ["adam+layernorm+fp32", "apex-fusedadam+layernorm+fp32", "apex-fusedadam+apex-fusedln+fp32",
             "apex-fusedadam+apex-fusedln+bf16"]  # the seed's own four, at 1 and 2 processes each
    stages = ",".join(f"{key}{gpus}" for key in seed4 for gpus in ("", "+gpus2"))
    proc = cli("run", "--stages", stages, "--device", "cpu", "--iters", "3", "--warmup", "1",
               "--repeats", "2", "--out", str(out), "--json", str(js), "--quiet")
    assert proc.returncode == 0, proc.stderr
    rows = read_csv(out)
    keys = [r["stage"] for r in rows]
    assert keys[:2] == ["adam+layernorm+fp32", "adam+layernorm+fp32+gpus2"] and len(rows) == 8
    assert [r["status"] for r in rows] == ["ok", "ok"] + ["unavailable"] * 6, [r["reason"] for r in rows]
    assert {r["baseline_stage"] for r in rows} == {"adam+layernorm+fp32"}
    assert {r["repeats"] for r in rows} == {"2"}
    for r in rows:
        # GPU figures: nothing on a CPU, never a made-up 0
        for col in ("host_ms", "gpu_kernel_ms", "kernel_share", "kernels_per_step", "energy_j_per_token", "mfu"):
            assert r[col] == "", (r["stage"], col, r[col])
        # no launch/GPU split on a CPU: the verdict says it is unknown, never gpu- or launch-bound
        assert r["bottleneck"] == "unknown", (r["stage"], r["bottleneck"])
        assert (r["noisy"] == "True") == (r["noise_reason"] != "")
    base, two = rows[0], rows[1]
    assert base["speedup"] == "1.0" and base["speedup_ci_low"] == base["speedup_ci_high"] == ""
    low, high = float(two["speedup_ci_low"]), float(two["speedup_ci_high"])
    assert 0 < low <= high
    assert all(r["speedup_ci_low"] == r["speedup_ci_high"] == "" for r in rows[2:])
    assert float(two["scaling_efficiency"]) == pytest.approx(float(two["tokens_per_s"]) /
                                                             (2 * float(base["tokens_per_s"])), rel=1e-9)
    doc = json.loads(js.read_text())
    assert [s["rounds"] for s in doc["stages"][:2]] == [[3, 3], [3, 3]]
    summary = doc["summary"]
    for row in summary[:2]:
        breakdown = row["breakdown_ms"]
        assert set(breakdown) == set(CATEGORIES) and sum(breakdown.values()) > 0, breakdown
    assert all(row["breakdown_ms"] is None for row in summary[2:])
    assert summary[0]["delta_vs_previous"] is None  # nothing before the first stage
    delta = summary[1]["delta_vs_previous"]
    assert set(delta["ms_by_category"]) <= set(CATEGORIES) and delta["text"]
    assert delta["kernels_per_step"] is None  # a CPU profile counts no kernels
    # no --db: saved to the default history
    assert [r["run_id"] for r in Store(home["BENCH_DB"]).list_runs()] == [base["run_id"]]


def test_import_exits_0_and_2_with_the_reason(cli, tmp_path):
    db = tmp_path / "h.sqlite3"
    good = tmp_path / "run.json"
    good.write_text(to_json(gpu_run()))
    proc = cli("import", str(good), "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"imported run abc123def456 into {db}"
    again = cli("import", str(good), "--db", str(db))
    assert again.returncode == 0 and "(run abc123def456 already exists: imported under a new id)" in again.stdout
    runs = Store(str(db)).list_runs()
    assert len(runs) == 2 and all(r["imported"] == 1 for r in runs)

    bad = tmp_path / "bad.csv"
    lines = to_csv(gpu_run()).splitlines()
    header = lines[0].split(",")
    cells = next(csv.reader([lines[1]]))
    cells[header.index("median_ms")] = "nan"
    bad.write_text(lines[0] + "\n" + ",".join(cells) + "\n")
    proc = cli("import", str(bad), "--db", str(db))
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("import rejected, nothing was imported: row 2, column median_ms: 'nan' is not a "
                                   "finite number")
    assert len(Store(str(db)).list_runs()) == 2

    missing = cli("import", str(tmp_path / "nope.json"), "--db", str(db))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.strip() == ("import rejected, nothing was imported: cannot read "
                                      f"{tmp_path / 'nope.json'}: No such file or directory")


def test_import_of_what_is_no_readable_file_exits_2_with_the_reason(cli, tmp_path):
    """A folder and a named pipe (whose open() would wait for a writer for ever) are refused before any read."""
    db = tmp_path / "h.sqlite3"
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for path in (tmp_path, fifo):
        proc = cli("import", str(path), "--db", str(db), timeout=60)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert proc.stderr.strip() == f"import rejected, nothing was imported: {path} is not a regular file"
    assert not db.exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file anyway")
def test_import_of_an_unreadable_file_exits_2_with_the_reason(cli, tmp_path):
    locked = tmp_path / "run.json"
    locked.write_text(to_json(gpu_run()))
    locked.chmod(0)
    proc = cli("import", str(locked), "--db", str(tmp_path / "h.sqlite3"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"import rejected, nothing was imported: cannot read {locked}: Permission denied"


def test_unwritable_output_is_refused_before_anything_runs(cli, tmp_path):
    proc = cli("run", "--device", "cpu", "--quiet", "--out", str(tmp_path / "missing-dir" / "r.csv"))
    assert proc.returncode == 2 and "out=" in proc.stderr and "does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr and "adam+" not in proc.stdout
    proc = cli("run", "--device", "cpu", "--quiet", "--db", str(tmp_path / "missing-dir" / "h.sqlite3"))
    assert proc.returncode == 2 and "db=" in proc.stderr and "does not exist" in proc.stderr


@pytest.mark.slow
def test_probe_text_and_json(cli):
    proc = cli("probe")
    assert proc.returncode == 0, proc.stderr
    assert "None" not in proc.stdout, proc.stdout
    assert "GPU: none (CPU runs only" in proc.stdout and "Apex: not installed" in proc.stdout
    proc = cli("probe", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["apex"]["status"] == "missing"


@pytest.mark.slow
def test_llama_seed_runs_the_rms_ladder_on_cpu(cli, tmp_path):
    """The llama family end to end: a real worker trains Llama with torch's RMSNorm; the Apex stages say why not."""
    out = tmp_path / "r.json"
    proc = cli("run", "--preset", "llama-seed", "--model", "llama-tiny", "--device", "cpu", "--iters", "3",
               "--warmup", "1", "--no-db", "--quiet", "--json", str(out), BENCH_WARMUP_MIN_S="0")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["config"]["family"] == "llama"
    base, *rest = data["stages"]
    assert base["key"] == "adam+rmsnorm+fp32" and base["status"] == "ok" and base["verdict"] == "verified"
    assert base["norm_class"] == "torch.nn.modules.normalization.RMSNorm" and len(base["times_ms"]) == 3
    apex = [s for s in rest if "apex" in s["key"]]
    assert len(apex) == 4 and {s["status"] for s in apex} == {"unavailable"}
    assert {s["status"] for s in rest if s not in apex} == {"ok"}  # the native twins run on a CPU
    assert apex[1]["norm"] == "apex-fusedrms"


# Kineto's own progress lines, which a profiler prints on stderr when its log level allows (forced below)
PROFILER_NOISE = ("STAGE:", "USDT:", "INFO:", "ActivityProfiler", "libkineto", "Log file:")


@pytest.fixture(scope="module")
def custom_ladder(home, tmp_path_factory):
    """The issue's command: two stage keys instead of a preset, on the tiny CPU model, with the profiler told to
    print all it can (as some torch builds do by default)."""
    out = tmp_path_factory.mktemp("stages") / "r.json"
    proc = subprocess.run([sys.executable, "-m", "bench_core", "run", "--stages",
                           "adam+layernorm+fp32,adam-fused+layernorm+fp32", "--device", "cpu", "--model", "tiny",
                           "--iters", "3", "--warmup", "1", "--no-db", "--json", str(out)],
                          cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=300,
                          env={**os.environ, **home, "BENCH_WARMUP_MIN_S": "0", "KINETO_LOG_LEVEL": "0",
                               "TORCH_CPP_LOG_LEVEL": "INFO"})
    return proc, out


@pytest.mark.slow
def test_stages_runs_the_keys_given(custom_ladder):
    proc, out = custom_ladder
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["preset"] == "custom"
    assert [(s["key"], s["status"]) for s in data["stages"]] == [("adam+layernorm+fp32", "ok"),
                                                                 ("adam-fused+layernorm+fp32", "ok")]
    assert [len(s["times_ms"]) for s in data["stages"]] == [3, 3]


def test_a_cpu_run_keeps_the_profilers_lines_off_stderr(custom_ladder):
    """The workers' profilers ran (the stages are verified), yet the user's stderr holds only the tool's lines."""
    proc, out = custom_ladder
    assert [s["verdict"] for s in json.loads(out.read_text())["stages"]] == ["verified", "verified"]
    noise = [ln for ln in proc.stderr.splitlines() if any(mark in ln for mark in PROFILER_NOISE)]
    assert noise == [], proc.stderr
    assert proc.stderr.splitlines()[0].startswith("custom · 2 stages × 1 round(s) · cpu")


@pytest.mark.parametrize("args,message", [
    (["--stages", "adam+layernorm+fp64"], "stages='adam+layernorm+fp64': 'fp64' is no lever; choose per kind: "
     "optimizer " + ", ".join(names_of("optimizer")) + "; norm " + names_of("norm")[0] + ", "),
    (["--stages", "adam+adam-fused"], "stages='adam+adam-fused': two optimizer levers (adam, adam-fused)"),
    (["--stages", "adam+layernorm+fp32", "--preset", "seed"], "give either --stages or --preset, not both"),
    (["--stages", "adam+layernorm+fp32", "--gpus", "2"], "gpus='2': with --stages each key names its own GPU"),
    (["--stages", ","], "stages=',': name at least one stage key"),
    (["--stages", "adam+rmsnorm+fp32", "--model", "tiny"], "norm='rmsnorm': rmsnorm is an RMS norm, valid only "
     "for the llama family; for gpt use layernorm"),
])
def test_bad_stage_keys_exit_2_naming_the_valid_choices(cli, tmp_path, args, message):
    db = tmp_path / "h.sqlite3"
    proc = cli("run", "--device", "cpu", *args, BENCH_DB=str(db))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr + proc.stdout
    assert not db.exists()


def test_an_unknown_key_names_every_kinds_levers(cli):
    proc = cli("run", "--device", "cpu", "--stages", "turbo")
    assert proc.returncode == 2
    for kind in KINDS:
        names = [f"gpus{n}" if kind == "gpus" else n for n in names_of(kind)]
        assert f"{kind} {', '.join(names)}" in proc.stderr


def test_every_preset_stage_round_trips_through_its_key():
    stages = {s for ladder in PRESETS.values() for s in across_gpus(ladder, names_of("gpus"))}
    assert len(stages) > 40
    for stage in stages:
        # a key leaves the family's own parts out (a Llama stage's SwiGLU): the family puts them back
        family = "llama" if stage.norm in ("rmsnorm", "apex-fusedrms", "liger-rms") else "gpt"
        assert Stage.from_key(stage.key).for_family(family) == stage
    # the kinds in any order, the baseline levers left out
    assert Stage.from_key("gpus2+bf16+adam-fused+compile") == Stage("adam-fused", "layernorm", "bf16", "compile",
                                                                     "2")
    assert Stage.from_key("liger-flce+rmsnorm").key == "adam+rmsnorm+fp32+liger-flce"


class _Stop(Exception):
    pass


@pytest.mark.parametrize("cuda,expected", [(False, "native-eager"), (True, "seed")])
def test_run_without_a_preset_takes_the_devices_default_ladder(monkeypatch, cuda, expected):
    """No --preset, no --stages: a machine without CUDA runs the native ladder without compile (native-eager), a GPU
    the seed ladder; what is launched is that preset's stages."""
    from bench_core import cli
    from bench_core.levers.presets import default_preset, preset
    from bench_core.machine.probe import Probe
    probe = Probe.from_dict({"cuda": {"available": cuda, "device_count": int(cuda)}})
    assert probe.cuda_available is cuda
    monkeypatch.setattr(cli, "cached_probe", lambda **_: (probe, True))
    monkeypatch.setattr(cli, "validate", lambda *a, **k: None)
    launched = {}

    def new_run(cfg, stages, probe, name):
        launched.update(name=name, stages=list(stages))
        raise _Stop

    monkeypatch.setattr(cli, "new_run", new_run)
    with pytest.raises(_Stop):
        cli.cmd_run(cli.parser().parse_args(["run", "--no-db", "--quiet"]))
    assert default_preset("cuda" if cuda else "cpu") == expected
    assert launched == {"name": expected, "stages": list(preset(expected))}



def test_run_help_names_the_default_ladder_per_device(capsys):
    """`run --help` prints (a field's help with "95%" once broke argparse's %-formatting) and names the defaults."""
    from bench_core import cli
    with pytest.raises(SystemExit) as done:
        cli.parser().parse_args(["run", "--help"])
    assert done.value.code == 0
    assert "seed on cuda, native-eager on cpu" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("argv,expected", [
    (["--preset", "seed"], set()),   # Apex is checked by the probe's own extension checks, not imported as a package
    (["--preset", "peers"], {"liger_kernel", "torchao", "transformer_engine"}),
    (["--stages", "adam+rmsnorm+fp32+liger-flce"], {"liger_kernel"}),
    (["--preset", "llama-seed"], set()),
])
def test_a_runs_probe_imports_only_the_kernel_packages_its_ladder_uses(monkeypatch, argv, expected):
    """Importing every kernel package was the slowest part of a cold probe (10.7 s of 26 s on the H200): a run
    asks the probe for the packages of its own stages, on either device and family."""
    from bench_core import cli
    asked = {}

    def fake_probe(**kwargs):
        asked.update(kwargs)
        raise _Stop

    monkeypatch.setattr(cli, "cached_probe", fake_probe)
    with pytest.raises(_Stop):
        cli.cmd_run(cli.parser().parse_args(["run", "--no-db", "--quiet", "--device", "cpu", *argv]))
    assert {p.name for p in asked["packages"]} == expected


@pytest.mark.slow
def test_a_runs_workers_start_with_its_probe_and_the_pool_adopts_them(monkeypatch, home):
    """The spare workers started ahead (after a probe measured, before one cached) are the processes the stages
    run in (no new start later), and none is left running after the run."""
    from bench_core import cli
    from bench_core.run import processes
    started, adopted = [], []
    real_start, real_init = processes._start_single, processes.WorkerHandle.__init__

    def start(env, warm_cuda):
        s = real_start(env, warm_cuda)
        started.append(s.proc)
        return s

    def init(self, job, env, world=1, warm_cuda=False, started=None):
        adopted.append(started is not None)
        real_init(self, job, env, world, warm_cuda, started)

    for name, value in {**home, "BENCH_WARMUP_MIN_S": "0"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(processes, "_start_single", start)
    monkeypatch.setattr(processes.WorkerHandle, "__init__", init)
    code = cli.main(["run", "--stages", "adam+layernorm+fp32", "--device", "cpu", "--model", "tiny", "--iters", "3",
                     "--warmup", "1", "--no-db", "--quiet"])
    assert code == 0
    assert adopted[0] is True and len(started) == len(adopted)
    for proc in started:  # a finished worker exits on its own, in the background; a spare never adopted is killed
        proc.wait(timeout=60)


def _closed_port():
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


WORKTREE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("args,message", [
    (["--cluster", "head"], "cluster='head': must be HOST:PORT"),
    (["--cluster", "http://head:6379"], "cluster='http://head:6379': must be HOST:PORT"),
    (["--cluster", "head:99999"], "the port 1-65535"),
    (["--cluster", f"127.0.0.1:{_closed_port()}"], "no Ray cluster answers there"),
    (["--cluster", f"ray://127.0.0.1:{_closed_port()}"], "no Ray cluster answers there"),
    (["--machine", "h200"], "machine='h200': needs --cluster ADDRESS"),
    (["--retry", "same-gpu"], "retry='same-gpu': needs --cluster ADDRESS"),
    (["--retry", "sideways"], "argument --retry: invalid choice: 'sideways'"),
])
def test_a_bad_cluster_flag_exits_2_naming_it_before_ray_is_asked(cli, tmp_path, args, message):
    db = tmp_path / "h.sqlite3"
    proc = cli("run", "--stages", "adam+layernorm+fp32", *args, BENCH_DB=str(db), PYTHONPATH=WORKTREE, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr + proc.stdout
    assert not db.exists()
