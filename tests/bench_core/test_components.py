"""The components view (optimizer step and LayerNorm alone), the measured ceilings and the machine cache, on CPU."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench_core.components import cli as components
from bench_core.components.bench import norm_levers, optimizer_levers, param_shapes
from bench_core.components.rows import (
    ComponentRow,
    ComponentsReport,
    layernorm_bytes,
    norm_shape,
    numel,
    optimizer_step_bytes,
    rmsnorm_bytes,
)
from bench_core.config.bench_config import WORKLOADS, BenchConfig
from bench_core.machine import cache as machine_cache
from bench_core.machine import ceilings
from bench_core.models.families import param_count

ROOT = Path(__file__).resolve().parents[2]
TINY = BenchConfig(**WORKLOADS["tiny"], device="cpu")


def _env(**extra) -> dict:
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))


# ---------------------------------------------------------------- counting, by hand
def test_adam_moves_28_bytes_per_fp32_parameter():
    from bench_core.levers.builders import fp32_moment
    # param read 4 + write 4, grad read 4, exp_avg read 4 + write 4, exp_avg_sq read 4 + write 4
    assert optimizer_step_bytes([1], fp32_moment) == 4 + 4 + 4 + 4 + 4 + 4 + 4 == 28
    assert optimizer_step_bytes([600, 400], fp32_moment) == 28_000
    assert optimizer_step_bytes([param_count(TINY)], fp32_moment) == 28 * 470_528
    # bf16 param and grad, fp32 moments (Apex's layout): 2 + 2 + 2 + 4·4
    assert optimizer_step_bytes([1], fp32_moment, dtype_bytes=2) == 22
    # a moment of one byte per element: 12 + 4·1
    assert optimizer_step_bytes([10], lambda n: n) == 160


@pytest.mark.slow
def test_each_optimizer_row_counts_its_own_levers_state_bytes(monkeypatch):
    """An optimizer row's bytes are its lever's: param and grad traffic, and the lever's moments over the model's
    tensors. Adam given one-byte moments (as an 8-bit state keeps) must be charged 16 bytes per parameter, not 28."""
    import dataclasses

    import torch

    from bench_core.components import bench
    from bench_core.machine.probe import cached_probe
    one_byte = dataclasses.replace(bench.LEVERS["adam"], moment_bytes=lambda n: n)
    monkeypatch.setitem(bench.LEVERS, "adam", one_byte)
    monkeypatch.setattr(bench, "optimizer_levers", lambda: ["adam"])
    rows = bench.optimizer_rows(torch, TINY, "cpu", 1, 2, cached_probe()[0], None)
    assert rows[0].status == "ok", rows[0].reason
    assert rows[0].bytes_moved == (12 + 4) * param_count(TINY)
    assert "adam: 16 bytes per parameter" in bench.step_bytes_note([numel(s) for s in param_shapes(TINY)])


def test_layernorm_bytes_by_hand():
    # rows 2, width 3, fp32, counted one tensor at a time:
    fwd = 6 * 4 + 2 * 3 * 4 + 6 * 4 + 2 * 2 * 4        # read x, read gamma+beta, write y, write mean+rstd
    bwd = 6 * 4 + 6 * 4 + 2 * 2 * 4 + 3 * 4 + 6 * 4 + 2 * 3 * 4  # dy, x, mean+rstd, gamma, write dx, dgamma+dbeta
    assert fwd + bwd == 212 == layernorm_bytes(2, 3, dtype_bytes=4)
    # bf16 activations, fp32 statistics and parameters: only the 5 R·W terms (x, y, dy, x, dx) halve
    assert layernorm_bytes(2, 3, dtype_bytes=2) == 212 - 5 * 6 * 2
    assert norm_shape(TINY) == (4 * 64, 128)
    # RMSNorm: no mean and no beta. fwd: x, gamma, y, rstd; bwd: dy, x, rstd, gamma, dx, dgamma
    assert rmsnorm_bytes(2, 3) == 6 * 4 + 3 * 4 + 6 * 4 + 2 * 4 + 6 * 4 + 6 * 4 + 2 * 4 + 3 * 4 + 6 * 4 + 3 * 4


def test_gemm_flops_and_copy_bytes_by_hand():
    assert ceilings.gemm_flops(2, 3, 4) == 48          # 2·3 outputs, each 4 multiplies and 4 adds
    assert ceilings.gemm_flops(8192, 8192, 8192) == 2 * 8192 ** 3
    assert ceilings.copy_bytes(2 * 1024 ** 3) == 4 * 1024 ** 3   # read once, written once


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_param_shapes_sum_to_param_count(name):
    cfg = BenchConfig(**WORKLOADS[name])
    assert sum(numel(s) for s in param_shapes(cfg)) == param_count(cfg)


@pytest.mark.parametrize("family", ["gpt", "llama"])
def test_param_shapes_match_the_real_model(family):
    import torch

    from bench_core.levers.stage import Stage
    from bench_core.models.families import build_model
    from bench_core.run.step import model_parts
    cfg = BenchConfig(depth=3, width=48, heads=4, seq_len=16, batch_size=2, vocab_size=100, family=family)
    torch.manual_seed(0)
    model = build_model(cfg, model_parts(Stage(), family))  # on the CPU, for real (param_shapes: meta device)
    assert [tuple(p.shape) for p in model.parameters()] == param_shapes(cfg)
    assert norm_levers(cfg) == (["layernorm", "apex-fusedln", "liger-ln"] if family == "gpt"
                                else ["rmsnorm", "apex-fusedrms", "liger-rms"])


# ---------------------------------------------------------------- the rows on CPU
@pytest.fixture(scope="module")
def cpu_report():
    return components.run(TINY, "cpu", repeats=20, warmup=2, model="tiny")


def _fused_adam_on_cpu() -> bool:
    import torch
    p = torch.nn.Parameter(torch.randn(4))
    p.grad = torch.randn(4)
    try:
        torch.optim.Adam([p], fused=True).step()
        return True
    except Exception:
        return False


def _assert_measured(row: ComponentRow):
    assert row is not None
    assert row.status == "ok", row.reason
    assert row.median_ms > 0 and row.p10_ms <= row.median_ms <= row.p90_ms
    assert row.bytes_moved > 0 and row.gb_per_s > 0
    assert row.copy_fraction is None and row.kernels_per_call is None   # no ceiling and no GPU kernels on CPU
    assert row.proof == "verified", row.reason


@pytest.mark.slow
def test_a_row_per_registry_optimizer_lever_that_runs_its_own_code_here(cpu_report):
    """On a CPU torch's default Adam is the for-loop (foreach kernels are CUDA's): adam and adam-loop are one row,
    which names the other (the registry's rule, levers.same_code), not "Adam · for-loop" beside "Adam (for-loop)"."""
    from bench_core.levers.registry import LEVERS
    rows = [r for r in cpu_report.rows if r.view == "optimizer"]
    assert optimizer_levers() == [n for n, lv in LEVERS.items() if lv.kind == "optimizer"]
    assert [r.name for r in rows] == [n for n in optimizer_levers() if n != "adam-loop"]
    assert {"adam", "adam-fused", "apex-fusedadam"} <= {r.name for r in rows}
    assert all(r.title == LEVERS[r.name].title for r in rows)
    adam = cpu_report.row("optimizer", "adam")
    assert adam.runs_as == "for-loop" and "Adam (for-loop) (`adam-loop`) runs this same code on CPU" in adam.reason


def test_every_components_row_is_a_distinct_thing(cpu_report):
    """No two measured rows build the same class and run it the same way at the same precision (as their traces
    show), and no two rows read alike."""
    from bench_core.levers.registry import LEVERS
    things = [(r.view, r.dtype, getattr(LEVERS.get(r.name), "expected_class", r.name), r.runs_as)
              for r in cpu_report.rows if r.status == "ok"]
    assert len(things) == len(set(things)), things
    labels = [r.label for r in cpu_report.rows]
    assert len(labels) == len(set(labels)), labels


def test_cpu_optimizer_rows(cpu_report):
    r = cpu_report
    assert r.device == "cpu" and r.model == "tiny" and r.params == param_count(TINY) and r.ceilings is None
    row = r.row("optimizer", "adam")
    _assert_measured(row)
    assert row.bytes_moved == optimizer_step_bytes([param_count(TINY)], lambda n: 4 * n)   # fp32 moments
    assert row.gb_per_s == pytest.approx(row.bytes_moved / row.median_ms / 1e6)
    assert not any(n.startswith("aten::_foreach_") for n in row.kernel_names)
    fused = r.row("optimizer", "adam-fused")
    if _fused_adam_on_cpu():
        _assert_measured(fused)
        assert any(n.startswith("aten::_fused_adam") for n in fused.kernel_names)
    else:
        assert fused.status == "unavailable" and "fused=True" in fused.reason


def _norm_traffic(kind: str, rows: int, width: int, autocast: bool) -> int:
    """The bytes of every tensor torch's own LayerNorm / RMSNorm forward and backward ops read or write at this
    shape, in the dtype the norm computes in (read from torch under autocast): a count independent of the
    report's formula, its shapes from torch's meta kernels. The backward's bias argument is not read (dbeta is a
    sum of dy), so it is not counted."""
    import torch
    aten = torch.ops.aten
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        probe = torch.nn.functional.layer_norm if kind == "layernorm" else torch.nn.functional.rms_norm
        dtype = probe(torch.randn(2, width), (width,)).dtype
    x = torch.empty(rows, width, dtype=dtype, device="meta")
    w, b = torch.empty(width, device="meta"), torch.empty(width, device="meta")
    if kind == "layernorm":
        y, mean, rstd = aten.native_layer_norm(x, [width], w, b, 1e-5)
        dy = torch.empty_like(y)
        grads = aten.native_layer_norm_backward(dy, x, [width], mean, rstd, w, b, [True, True, True])
        touched = (x, w, b, y, mean, rstd) + (dy, x, mean, rstd, w) + tuple(grads)
    else:
        y, rstd = aten._fused_rms_norm(x, [width], w, 1e-5)
        dy = torch.empty_like(y)
        grads = aten._fused_rms_norm_backward(dy, x, [width], rstd, w, [True, True])
        touched = (x, w, y, rstd) + (dy, x, rstd, w) + tuple(grads)
    return sum(t.numel() * t.element_size() for t in touched)


def test_cpu_layernorm_rows(cpu_report):
    rows, width = TINY.batch_size * TINY.seq_len, TINY.width      # every token of a step, at the model's width
    assert cpu_report.rows_x_width == (rows, width)
    for dtype in ("fp32", "bf16-autocast"):
        row = cpu_report.row("norm", "layernorm", dtype)
        _assert_measured(row)
        assert row.bytes_moved == _norm_traffic("layernorm", rows, width, autocast=dtype == "bf16-autocast")


def test_cpu_apex_and_compiled_rows_are_unavailable_with_a_reason(cpu_report):
    for view, name, dtype in (("optimizer", "apex-fusedadam", "fp32"), ("norm", "apex-fusedln", "fp32"),
                              ("norm", "apex-fusedln", "bf16-autocast"), ("norm", "liger-ln", "fp32"),
                              ("norm", "layernorm-compiled", "fp32")):
        row = cpu_report.row(view, name, dtype)
        assert row.status == "unavailable" and row.reason and row.median_ms is None, row
    assert "CPU" in cpu_report.row("optimizer", "apex-fusedadam").reason
    assert "CUDA only" in cpu_report.row("norm", "layernorm-compiled").reason


@pytest.mark.slow
def test_unavailable_rows_give_the_levers_own_reason(cpu_report):
    from bench_core.levers.registry import LEVERS
    from bench_core.levers.stage import Stage
    from bench_core.machine.probe import cached_probe
    probe = cached_probe()[0]
    for kind, name in (("optimizer", "apex-fusedadam"), ("optimizer", "zero-adam"), ("norm", "apex-fusedln")):
        view = "optimizer" if kind == "optimizer" else "norm"
        assert cpu_report.row(view, name).reason == LEVERS[name].requires(probe, "cpu", Stage(**{kind: name}))


@pytest.mark.slow
def test_llama_rows_are_rmsnorm_rows():
    cfg = BenchConfig(**{**WORKLOADS["llama-tiny"], "depth": 1}, device="cpu")
    report = components.run(cfg, "cpu", repeats=3, warmup=1, model="llama-tiny")
    norms = [r for r in report.rows if r.view == "norm"]
    assert [r.name for r in norms if r.dtype == "fp32"] == ["rmsnorm", "apex-fusedrms", "liger-rms",
                                                           "rmsnorm-compiled"]
    rows, width = cfg.batch_size * cfg.seq_len, cfg.width
    assert report.rows_x_width == (rows, width)
    for dtype in ("fp32", "bf16-autocast"):
        row = report.row("norm", "rmsnorm", dtype)
        _assert_measured(row)
        assert row.bytes_moved == _norm_traffic("rmsnorm", rows, width, autocast=dtype == "bf16-autocast")
        assert row.title == "RMSNorm"
    assert report.params == param_count(cfg) and report.row("optimizer", "adam").status == "ok"


def test_report_round_trips_and_flattens(cpu_report):
    data = json.loads(json.dumps(cpu_report.to_dict()))
    assert ComponentsReport.from_dict(data) == cpu_report
    flat = cpu_report.to_csv_rows()
    # each optimizer lever, adam-loop one row with adam on a CPU; the family's norm levers + compiled, x2 dtypes
    optimizers = [n for n in optimizer_levers() if n != "adam-loop"]
    assert len(flat) == len(cpu_report.rows) == len(optimizers) + (len(norm_levers(TINY)) + 1) * 2
    assert {"model", "device", "view", "name", "dtype", "status", "median_ms", "gb_per_s"} <= set(flat[0])
    assert any("28 bytes per parameter" in n for n in cpu_report.notes)


# ---------------------------------------------------------------- command line
@pytest.mark.slow
def test_cli_json_parses_and_writes_csv(tmp_path, capsys):
    out = tmp_path / "rows.csv"
    code = components.main(["--model", "tiny", "--device", "cpu", "--json", "-", "--repeats", "3", "--warmup", "1",
                            "--out", str(out), "--no-db"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == "tiny" and data["device"] == "cpu"
    rows = {(r["name"], r["dtype"]): r for r in data["rows"]}
    assert rows[("adam", "fp32")]["status"] == "ok" and rows[("adam", "fp32")]["median_ms"] > 0
    assert out.read_text().splitlines()[0].startswith("model,device,params")
    assert len(out.read_text().splitlines()) == 1 + len(data["rows"])


@pytest.mark.slow
def test_cli_json_path_writes_the_file_and_it_imports(tmp_path, capsys):
    path, db = tmp_path / "components.json", tmp_path / "runs.sqlite3"
    code = components.main(["--model", "tiny", "--device", "cpu", "--json", str(path), "--repeats", "2",
                            "--warmup", "0", "--no-db"])
    assert code == 0 and not capsys.readouterr().out.lstrip().startswith("{")   # the table, not the JSON
    data = json.loads(path.read_text())
    rows = [n for n in optimizer_levers() if n != "adam-loop"] + [None] * (len(norm_levers(TINY)) + 1) * 2
    assert data["model"] == "tiny" and len(data["rows"]) == len(rows)   # adam-loop one row with adam on a CPU
    proc = subprocess.run([sys.executable, "-m", "bench_core", "import", str(path), "--db", str(db)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=_env())
    assert proc.returncode == 0, proc.stderr
    from bench_core.results.store import Store
    listed = Store(str(db)).list_components()
    assert len(listed) == 1 and listed[0]["model"] == "tiny" and listed[0]["report_id"] in proc.stdout
    assert ComponentsReport.from_dict(Store(str(db)).load_components(listed[0]["report_id"])) == \
        ComponentsReport.from_dict(data)
    assert Store(str(db)).list_runs() == []                                       # not a run


def test_a_bad_components_json_is_rejected_with_the_reason(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rows_x_width": [1, 2], "model": "tiny"}))
    proc = subprocess.run([sys.executable, "-m", "bench_core", "import", str(bad), "--db", str(tmp_path / "x.db")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=_env())
    assert proc.returncode == 2 and "not a components report: no device, rows, created_at" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_components_help_names_the_command():
    proc = subprocess.run([sys.executable, "-m", "bench_core", "components", "--help"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, env=_env())
    assert proc.returncode == 0 and "python -m bench_core components" in proc.stdout


@pytest.mark.parametrize("args,field", [
    (["--model", "gpt5"], "model"),
    (["--device", "tpu"], "device"),
    (["--repeats", "many"], "repeats"),
    (["--repeats", "0"], "repeats"),
    (["--out", "/no/such/folder/rows.csv"], "out"),
    (["--json", "/no/such/folder/r.json"], "json"),
    (["--bogus"], "--bogus"),
])
def test_cli_bad_input_exits_2_with_one_line(args, field):
    proc = subprocess.run([sys.executable, "-m", "bench_core.components.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=_env())
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "Traceback" not in proc.stderr, proc.stderr


# ---------------------------------------------------------------- machine cache
def test_fingerprint_is_fast_stable_and_torch_free():
    code = ("import sys, time; from bench_core.machine import cache as m; m.environment_fingerprint(); "
            "t = time.perf_counter(); fp = m.environment_fingerprint(); ms = (time.perf_counter() - t) * 1e3; "
            "print(fp, ms, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env=_env()).stdout.split()
    assert out[0] == machine_cache.environment_fingerprint()
    assert float(out[1]) < 50 and out[2] == "False"


def test_fingerprint_changes_with_the_environment(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    before = machine_cache.environment_fingerprint()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert machine_cache.environment_fingerprint() != before
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(machine_cache, "_version", lambda name: "9.9" if name == "torch" else None)
    assert machine_cache.environment_fingerprint() != before


def test_cache_round_trip_and_misses(tmp_path, monkeypatch):
    fp = machine_cache.environment_fingerprint()
    assert machine_cache.load("probe", fp) is None
    assert machine_cache.save("probe", fp, {"a": 1})
    assert machine_cache.load("probe", fp) == {"a": 1}
    assert machine_cache.load("probe", "0" * 20) is None             # another environment
    assert machine_cache.load("ceilings", fp) is None                # another kind
    path = Path(os.environ["BENCH_CACHE_DIR"]) / f"probe-{fp}.json"
    path.write_text("{not json")
    assert machine_cache.load("probe", fp) is None                   # corrupt: a miss, no exception
    assert machine_cache.save("probe", fp, {"a": 2}) and machine_cache.load("probe", fp) == {"a": 2}
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("BENCH_CACHE_DIR", str(blocker / "sub"))     # cannot be created: save says False
    assert machine_cache.save("probe", fp, {"a": 3}) is False
    assert machine_cache.load("probe", fp) is None
    assert machine_cache.save("../evil", fp, {}) is False


def test_cache_dir_order(monkeypatch):
    monkeypatch.setenv("BENCH_CACHE_DIR", "/x/bench")
    assert machine_cache.cache_dir() == "/x/bench"
    monkeypatch.delenv("BENCH_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/y")
    assert machine_cache.cache_dir() == os.path.join("/y", "bench_core")


# ---------------------------------------------------------------- ceilings: cache and "measure again"
class _FakeCuda:
    @staticmethod
    def is_available():
        return True


class _FakeTorch:
    cuda = _FakeCuda()


def test_ceilings_cached_until_measured_again(monkeypatch):
    calls = []

    def fake_measure(torch):
        calls.append(time.time())
        return ceilings.Ceilings(700.0 + len(calls), 50.0, 4300.0, "method", "2026-01-01T00:00:00+00:00", "GPU")

    monkeypatch.setattr(ceilings, "measure", fake_measure)
    first = ceilings.cached_or_measure(_FakeTorch())
    assert first.bf16_tflops == 701.0 and not first.from_cache
    again = ceilings.cached_or_measure(_FakeTorch())
    assert again.bf16_tflops == 701.0 and again.from_cache and len(calls) == 1
    fresh = ceilings.cached_or_measure(_FakeTorch(), refresh=True)
    assert fresh.bf16_tflops == 702.0 and len(calls) == 2
    assert ceilings.cached_or_measure(_FakeTorch()).bf16_tflops == 702.0
    assert ceilings.Ceilings.from_dict(fresh.to_dict()) == fresh


def test_no_ceilings_without_cuda():
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert ceilings.cached_or_measure(torch) is None
    assert "median" in ceilings.method_text() and "allow_tf32=False" in ceilings.method_text()


def test_bound_splits_rows_at_the_stage_busy_threshold():
    from bench_core.measure.breakdown import BUSY_THRESHOLD

    def row(kernel_ms, median_ms):
        return ComponentRow("layernorm", "x", "fp32", "ok", median_ms=median_ms, kernel_ms=kernel_ms)

    assert row(None, 0.2).bound is None and row(None, 0.2).kernel_share is None     # CPU: no kernel time
    assert row(BUSY_THRESHOLD, 1.0).bound == "gpu-bound"                          # the threshold itself is busy
    assert row(BUSY_THRESHOLD - 1e-9, 1.0).bound == "launch-bound"                # the stages' word for it
    assert row(1.2, 1.0).kernel_share == 1.0                                          # clipped: one call's jitter
    # Recorded on the H200 (docs/data/h200_2026-12-03_call2_components_gpt2-small_run1.json): LayerNorm fp32
    # 0.090 ms of kernels in a 0.256 ms call; torch fused Adam 1.013 ms of kernels in 1.027 ms.
    assert row(0.090, 0.256).bound == "launch-bound" and row(1.013, 1.027).bound == "gpu-bound"


def test_cpu_rows_have_no_bound(cpu_report):
    assert all(r.bound is None for r in cpu_report.rows)
    assert {"kernel_share", "bound"} <= set(cpu_report.to_csv_rows()[0])
