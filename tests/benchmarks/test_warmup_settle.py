"""benchmarks/warmup_settle.py: per stage and process, the warm-up used, where it had settled, the spare seconds,
and the largest settle time over every process."""
from dataclasses import replace

import pytest

from bench_core.machine.conditions import Conditions
from bench_core.measure.warmup import WarmupTrace
from bench_core.results.formats import to_json
from helpers import load_benchmark, sample_runs

settle_script = load_benchmark("warmup_settle")


def trace(step_ms, clock_mhz=(), every_s=0.05):
    n = len(step_ms)
    return WarmupTrace(steps=n, seconds=n * every_s, step_ms=tuple(step_ms),
                       step_start_s=tuple(round(i * every_s, 6) for i in range(n)), clock_mhz=tuple(clock_mhz),
                       clock_s=tuple(round(i * 0.1, 6) for i in range(len(clock_mhz))))


@pytest.fixture
def run_file(tmp_path):
    """The sample run's baseline (every timed step 100 ms, so its p10-p90 band is 100-100 ms; SM clock median 1980
    MHz) with three processes: settled at step 7 (0.35 s of 1.00 s), at step 12 behind a clock ramp (0.60 s of
    1.00 s), and one never in the band. The Apex Adam stage (50 ms, no clock samples): settled at step 2."""
    run = sample_runs().gpu_run()
    base = (130.0, 120.0, 115.0, 110.0, 105.0, 103.0, 101.0) + (100.0,) * 13
    ramp = (1500, 1600, 1700, 1800, 1900, 1950) + (1980,) * 4
    warm = (trace(base, (1900, 1980, 1980, 1980)), trace(base, ramp), trace((101.0,) * 20, (1980,) * 10))
    apex = (trace((60.0, 55.0) + (50.0,) * 10),)
    stages = (replace(run.stages[0], warmups=warm, conditions=Conditions(sm_clock_mhz=(1980,) * 9)),
              replace(run.stages[1], warmups=apex), *run.stages[2:])
    path = tmp_path / "run.json"
    path.write_text(to_json(replace(run, stages=stages)))
    return str(path)


def test_prints_each_process_and_the_largest_settle_time(run_file, capsys):
    assert settle_script.main([run_file]) == 0
    out = capsys.readouterr().out
    assert "adam+layernorm+fp32: timed p10-p90 100.000-100.000 ms, SM clock median 1,980 MHz" in out
    assert "process 1: warm-up 20 steps, 1.00 s; settled after 7 steps, 0.35 s; spare 0.65 s" in out
    assert "process 2: warm-up 20 steps, 1.00 s; settled after 12 steps, 0.60 s; spare 0.40 s" in out
    assert "process 3: warm-up 20 steps, 1.00 s; NOT settled by the rule within its warm-up" in out
    assert ("process 1: warm-up 12 steps, 0.60 s; settled after 2 steps, 0.10 s (no SM clock samples: step times "
            "only); spare 0.50 s") in out
    assert f"largest settle time: 0.60 s (12 steps), adam+layernorm+fp32 process 2 in {run_file}; over 4 processes" \
        in out
    assert "1 of 4 processes had not settled within their warm-up" in out


def test_a_file_without_warm_up_records_is_a_message_and_exit_2(tmp_path, capsys):
    path = tmp_path / "old.json"
    path.write_text(to_json(sample_runs().gpu_run()))
    assert settle_script.main([str(path)]) == 2
    assert "no warm-up records" in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [([], "give at least one run JSON file"), (["gone.json"], "gone.json")])
def test_bad_input_is_a_message_and_exit_2(argv, message, capsys):
    assert settle_script.main(argv) == 2
    assert message in capsys.readouterr().err
