"""benchmarks/alone_vs_paused.py: a stage's processes timed with the run's other processes stopped beside them
against those timed alone, per run, and the sign test over runs."""
import math
import subprocess
import sys
from dataclasses import replace

from bench_core.results.formats import to_json
from bench_core.results.records import QuietRecord
from helpers import TESTS, sample_runs

BENCHMARKS = TESTS.parent / "benchmarks"
APEX_BF16 = "apex-fusedadam+apex-fusedln+bf16"


def run_with(tmp_path, name: str, medians: tuple[float, ...], paused: tuple[int, ...]):
    """gpu_run's launch-bound Apex BF16 stage in one process per median, each window with its stopped groups."""
    run = sample_runs().gpu_run()
    stage = run.stages[3]
    stage = replace(stage, times_ms=tuple(m for m in medians for _ in range(4)), rounds=(4,) * len(medians),
                    host_ms=tuple(m * 0.97 for m in medians for _ in range(4)),
                    quiet=tuple(QuietRecord(round=i, window_s=1.0, paused_groups=g) for i, g in enumerate(paused)))
    path = tmp_path / name
    path.write_text(to_json(replace(run, stages=(*run.stages[:3], stage))))
    return str(path)


def test_each_run_counts_once_whether_its_lone_process_was_faster_than_the_others(tmp_path):
    files = [run_with(tmp_path, "a.json", (40.0, 42.0, 30.0), (7, 7, 0)),    # alone faster
             run_with(tmp_path, "b.json", (30.0, 31.0, 45.0), (7, 7, 0)),    # alone slower
             run_with(tmp_path, "c.json", (40.0, 30.0, 20.0), (8, 8, 1))]    # never alone: not counted
    out = subprocess.run([sys.executable, str(BENCHMARKS / "alone_vs_paused.py"), "--stage", APEX_BF16, *files],
                         check=True, capture_output=True, text=True, timeout=120).stdout   # as a person runs it
    assert "30.00 ms (0 stopped beside)" in out and "20.00 ms (1 stopped beside)" in out
    assert "all runs: alone faster than with stopped processes beside it in 1 of 2" in out
    assert "launch-bound runs: alone faster than with stopped processes beside it in 1 of 2" in out


def test_the_sign_test_is_the_two_sided_binomial_tail():
    cases = [(7, 9), (2, 9), (5, 10), (3, 3)]
    out = subprocess.run([sys.executable, "-c", "import alone_vs_paused as m; print(*(m.sign_test_p(w, n) for w, n in "
                          f"{cases}))"], cwd=BENCHMARKS, check=True, capture_output=True, text=True).stdout
    p79, p29, p510, p33 = map(float, out.split())
    assert p79 == 2 * (math.comb(9, 7) + math.comb(9, 8) + 1) / 2 ** 9
    assert p29 == p79   # two-sided: either direction
    assert p510 == 1.0 and p33 == 2 / 8
