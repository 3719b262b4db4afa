import csv
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "bench_core", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("args,message", [
    (["--width", "66", "--heads", "4"], "width=66: must be divisible by heads (4)"),
    (["--preset", "turbo"], "preset='turbo': unknown preset"),
    (["--iters", "ten"], "iters='ten': must be an integer"),
    (["--device", "cuda"], "device='cuda': no CUDA device is available"),
    (["--batch-size", "0"], "batch_size=0: must be a positive integer"),
])
def test_bad_input_exits_2_without_traceback(args, message):
    proc = cli("run", *args)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr + proc.stdout


def test_run_writes_csv_json_and_html(tmp_path):
    out, js, html = tmp_path / "r.csv", tmp_path / "r.json", tmp_path / "r.html"
    proc = cli("run", "--preset", "seed", "--device", "cpu", "--width", "64", "--iters", "3", "--warmup", "1",
               "--out", str(out), "--json", str(js), "--html", str(html), "--quiet")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(out.open()))
    assert [r["status"] for r in rows] == ["ok", "unavailable", "unavailable", "unavailable"]
    assert "adam+layernorm+fp32" in proc.stdout and "NVIDIA apex is not installed" not in rows[0]["reason"]
    assert html.read_text().count("plotly") > 3


def test_unwritable_output_is_refused_before_anything_runs(tmp_path):
    proc = cli("run", "--device", "cpu", "--quiet", "--out", str(tmp_path / "missing-dir" / "r.csv"))
    assert proc.returncode == 2 and "out=" in proc.stderr and "does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr and "adam+layernorm" not in proc.stdout


def test_probe_json():
    proc = cli("probe", "--json")
    assert proc.returncode == 0 and '"apex"' in proc.stdout
