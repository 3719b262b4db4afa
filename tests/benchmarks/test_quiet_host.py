"""benchmarks/quiet_host.py's bare loop, on a tiny CPU model, in its own process as the benchmark runs it: unpinned,
and pinned as the engine pins its timed process (every core but the first, torch's threads capped to them)."""
import json
import os
import subprocess
import sys

import pytest

from helpers import TESTS

SCRIPT = TESTS.parent / "benchmarks" / "quiet_host.py"
TINY = ["--model", "gpt2-small", "--depth", "1", "--width", "64", "--heads", "2", "--seq-len", "16",
        "--batch-size", "2", "--vocab-size", "128"]


def bare(*extra: str) -> dict:
    out = subprocess.run([sys.executable, str(SCRIPT), "bare", "--stage", "adam+layernorm+fp32", *extra, *TINY],
                         check=True, capture_output=True, text=True, timeout=300).stdout
    return json.loads(out)


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning away from the first core needs two")
def test_the_pinned_bare_loop_runs_where_the_engine_times_and_the_unpinned_one_anywhere():
    cores = sorted(os.sched_getaffinity(0))
    free, pinned = bare(), bare("--pinned")
    assert free["pinned_cores"] == [] and free["times_ms"] and free["median_ms"] > 0
    assert pinned["pinned_cores"] == cores[1:]
    assert pinned["torch_threads"] <= max(1, len(cores) - 1) and pinned["times_ms"]
