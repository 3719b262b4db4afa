"""`run --quiet` on a lent machine: a line per stage round as it ends, and files that hold every finished round
even when the run is killed."""
import csv
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

import bench_core
from bench_core.results.records import RunResult
from bench_core.results.summary import summarize

A, B, C = "adam+layernorm+fp32", "adam-fused+layernorm+fp32", "adam-loop+layernorm+fp32"
APEX = "apex-fusedadam+layernorm+fp32"   # unavailable on a CPU
ROUND = re.compile(r"^\[ *\d+\.\d s\] (\S+) round (\d+)/(\d+): (\w+)(.*)$")


@pytest.fixture
def env(tmp_path):
    """The bench_core these tests import (a worktree's, where it is not the installed one), in every process."""
    return {**os.environ, "BENCH_CACHE_DIR": str(tmp_path / "cache"), "BENCH_WARMUP_MIN_S": "0",
            "XDG_DATA_HOME": str(tmp_path / "xdg"), "PYTHONPATH": os.path.dirname(os.path.dirname(bench_core.__file__))}


def command(stages, *args):
    return [sys.executable, "-m", "bench_core", "run", "--stages", ",".join(stages), "--device", "cpu",
            "--model", "tiny", "--iters", "3", "--warmup", "1", "--no-db", "--quiet", *args]


@pytest.mark.slow
def test_quiet_prints_one_line_per_stage_round_as_the_summary_reads_it(env, tmp_path):
    """Two rounds, the second backwards; C fails in its first round (and is not run again), Apex cannot run."""
    out = tmp_path / "r.json"
    proc = subprocess.run(command([A, B, C, APEX], "--repeats", "2", "--json", str(out)), cwd=tempfile.gettempdir(),
                          capture_output=True, text=True, timeout=300, env={**env, "BENCH_TEST_FAULT": f"exit3@{C}"})
    assert proc.returncode == 0, proc.stderr
    run = RunResult.from_dict(json.loads(out.read_text()))
    summary = summarize(run)
    lines = proc.stdout.splitlines()
    start = lines.index(f"[   0.0 s] {APEX}: unavailable: {run.stages[3].reason}")
    rounds = [ROUND.match(line) for line in lines[start + 1:start + 6]]
    assert all(rounds), lines
    got = [(m[1], int(m[2]), int(m[3]), m[4]) for m in rounds if m]
    assert got == [(A, 1, 2, "ok"), (B, 1, 2, "ok"), (C, 1, 2, "failed"), (B, 2, 2, "ok"), (A, 2, 2, "ok")]
    assert not any(ROUND.match(line) for line in lines[start + 6:])  # nothing more: C is not run again
    for m in rounds:
        assert m is not None
        stage = next(s for s in run.stages if s.key == m[1])
        number = int(m[2])
        if m[4] == "failed":
            assert m[5] == f": {stage.reason}" and stage.reason.startswith("worker exited with code 3")
            continue
        median = summary.stage(stage.index).round_medians[number - 1]
        warmup = stage.warmups[number - 1].seconds
        assert m[5] == (f", {stage.rounds[number - 1]} steps, median {median:,.2f} ms, warm-up {warmup:.1f} s")


@pytest.mark.slow
def test_a_killed_run_leaves_files_with_the_rounds_that_finished(env, tmp_path):
    """B hangs, so the run never ends on its own: once A's line is out, the whole process group is killed."""
    out, js = tmp_path / "r.csv", tmp_path / "r.json"
    proc = subprocess.Popen(command([A, B], "--out", str(out), "--json", str(js)), cwd=tempfile.gettempdir(),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
                            env={**env, "BENCH_TEST_FAULT": f"hang@{B}"})
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or ()], daemon=True).start()
    seen, deadline = [], time.monotonic() + 240
    try:
        while not any(line.startswith(f"{A} round 1/1: ok") for line in seen) and time.monotonic() < deadline:
            try:
                seen.append(lines.get(timeout=1).split("] ", 1)[-1])
            except queue.Empty:
                assert proc.poll() is None, seen  # the run must still be going: B hangs
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert any(line.startswith(f"{A} round 1/1: ok") for line in seen), seen
    assert sorted(os.listdir(tmp_path)) == ["cache", "r.csv", "r.json"]  # no .tmp left behind
    doc = json.loads(js.read_text())
    run = RunResult.from_dict(doc)
    assert run.status == "running" and [s.key for s in run.stages] == [A, B]
    assert run.stages[0].status == "ok" and len(run.stages[0].times_ms) == 3 and run.stages[0].rounds == (3,)
    assert not run.stages[1].finished and not run.stages[1].times_ms
    assert [s["median_ms"] for s in doc["summary"]][1] is None and doc["summary"][0]["median_ms"] > 0
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["stage"], r["status"]) for r in rows] == [(A, "ok"), (B, run.stages[1].status.value)]
