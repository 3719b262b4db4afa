"""`python -m bench_core recommend` as a person runs it: bad input exits 2 naming the flag, nothing started; one
real tiny recommendation on CPU through the engine's worker processes, its JSON read back."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

import bench_core
from bench_core.cli import main
from bench_core.recommend.answer import Recommendation
from bench_core.recommend.history import RecommendationStore


@pytest.fixture
def nothing_starts(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("started although the input is bad")
    monkeypatch.setattr("bench_core.recommend.measure.run_all", refuse)
    monkeypatch.setattr("bench_core.recommend.search.Planner.run", refuse)


@pytest.mark.parametrize("args, flag", [
    (["--budget", "ten minutes"], "budget="),
    (["--memory", "-3"], "memory="),
    (["--memory", "lots"], "memory="),
    (["--batch-size", "8:2"], "batch_size="),
    (["--batch-size", "1:4096"], "batch_size="),
    (["--batch-size", "2:8", "--hold-tokens"], "hold_tokens="),
    (["--from", "warp-drive"], "stages="),
    (["--tokens", "0"], "tokens="),
    (["--gpu-price", "free"], "gpu_price="),
    (["--exclude", "warp"], "exclude="),
    (["--device", "tpu"], "device="),
    (["--model", "gpt-9"], "model="),
    (["--json", "/no/such/folder/r.json"], "json="),
])
def test_bad_input_exits_2_naming_the_flag_and_starts_nothing(args, flag, nothing_starts, capsys):
    assert main(["recommend", "--device", "cpu", "--model", "tiny", "--no-db", *args]) == 2
    err = capsys.readouterr().err
    assert flag in err and "Traceback" not in err


def test_the_search_probes_every_lever_package_so_none_is_left_out_as_not_probed(monkeypatch, capsys):
    """On an H100 (call 57) the CLI probed no package: FP8, Liger, TE and 8-bit Adam read "not probed" and
    were never searched."""
    from bench_core.levers.registry import LEVERS
    from bench_core.machine.probe import Probe
    asked = []

    def probe_of(refresh=False, env=None, packages=()):
        asked.append(tuple(packages))
        raise SystemExit(0)   # nothing past the probe is the point here
    monkeypatch.setattr("bench_core.recommend.cli.cached_probe", probe_of)
    with pytest.raises(SystemExit):
        main(["recommend", "--device", "cpu", "--model", "tiny", "--no-db"])
    needed = {p for lever in LEVERS.values() for p in lever.packages}
    assert needed and needed <= set(asked[0])
    assert Probe.from_dict({}).package_reason(next(iter(needed)).name).startswith("not probed")


@pytest.mark.slow
def test_a_real_tiny_recommendation_on_cpu(tmp_path):
    out, db = tmp_path / "rec.json", tmp_path / "history.db"
    proc = subprocess.run(
        [sys.executable, "-m", "bench_core", "recommend", "--device", "cpu", "--model", "tiny", "--iters", "6",
         "--exclude", "compile,fp16,adam-loop,bf16", "--budget", "60s", "--tokens", "1000000", "--json", str(out),
         "--db", str(db)], capture_output=True, text=True, timeout=300,
        cwd=Path(bench_core.__file__).resolve().parents[1])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "processes so far" in proc.stderr
    rec = Recommendation.from_json(out.read_text())
    assert Recommendation.from_json(rec.to_json()) == rec
    assert rec.recommended is not None and rec.recommended.label == "measured"
    assert rec.recommended.stage in {c.stage for c in rec.candidates}
    assert rec.speedup is not None and rec.savings is not None
    assert rec.recipe and "held at" in rec.tokens_per_step
    assert any("--exclude" in e.reason for e in rec.excluded)
    stored = RecommendationStore(str(db)).list_recommendations()
    assert len(stored) == 1 and stored[0]["recommended"] == rec.recommended.stage
    assert json.loads(out.read_text())["kind"] == "recommendation"
