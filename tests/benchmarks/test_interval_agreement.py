"""benchmarks/interval_agreement.py: how many stages of run B have their speedup inside run A's interval."""
from dataclasses import replace

import pytest

from bench_core.results.formats import to_json
from helpers import load_benchmark, sample_runs

gpu_run = sample_runs().gpu_run

agreement = load_benchmark("interval_agreement")


@pytest.fixture
def pair(tmp_path):
    """Run A: Apex ×2 (2.00–2.00) and BF16 ×5 (5.00–5.00) across 2 processes. Run B: Apex again ×2 (inside),
    BF16 at 25 ms, ×4 (outside, and its interval 4.00–4.00 does not overlap A's)."""
    a = gpu_run()
    b = replace(a, stages=(*a.stages[:3], replace(a.stages[3], times_ms=(25.0,) * 8)), run_id="b")
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path, run in zip(paths, (a, b), strict=True):
        path.write_text(to_json(run))
    return [str(p) for p in paths]


@pytest.mark.parametrize("stored", [False, True])
def test_counts_the_stages_of_b_inside_as_interval(pair, capsys, stored):
    assert agreement.main(["--stored", *pair] if stored else pair) == 0
    out = capsys.readouterr().out
    assert "1 of 2 stages: run B's median speedup inside run A's interval (50%)" in out
    assert "1 of 2 stage pairs: intervals that do not overlap" in out
    rows = [line for line in out.splitlines() if line.startswith("| a / b")]
    assert len(rows) == 2 and "| yes | yes |" in rows[0] and "| NO | NO |" in rows[1]
    (miss,) = [line for line in out.splitlines() if line.startswith("- a / b")]
    assert "`apex-fusedadam+apex-fusedln+bf16`: A: steady; baseline steady | B: steady; baseline steady" in miss
    assert ("across 2 processes" in rows[0]) is not stored


def test_a_stage_outside_is_listed_with_the_noise_each_run_recorded(tmp_path, capsys):
    """B's BF16 steps spread 25-35 ms: its noise column says so beside the miss, and the baseline's is its own."""
    a = gpu_run()
    b = replace(a, stages=(*a.stages[:3], replace(a.stages[3], times_ms=(25.0, 35.0) * 4)), run_id="b")
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path, run in zip(paths, (a, b), strict=True):
        path.write_text(to_json(run))
    assert agreement.main([str(p) for p in paths]) == 0
    (miss,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("- a / b")]
    said_b = miss.split("| B: ")[1]
    assert "p10–p90 spread" in said_b and said_b.endswith("baseline steady") and "A: steady" in miss, miss


def test_the_same_run_twice_agrees_everywhere(pair, capsys):
    assert agreement.main([pair[0], pair[0], pair[1], pair[1]]) == 0
    assert "4 of 4 stages: run B's median speedup inside run A's interval (100%)" in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [([], "give run JSON files in pairs"),
                                          (["a.json"], "give run JSON files in pairs (A B), got 1")])
def test_bad_input_is_a_message_and_exit_2(argv, message, capsys):
    assert agreement.main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_missing_file_is_a_message_and_exit_2(pair, capsys, tmp_path):
    assert agreement.main([pair[0], str(tmp_path / "gone.json")]) == 2
    assert "gone.json" in capsys.readouterr().err
