"""benchmarks/doc_tables.py: the docs' tables come from the engine's own summary texts, one row per stage."""
import json
from dataclasses import replace

import pytest

from bench_core.results.records import Status
from bench_core.results.summary import summarize
from helpers import load_benchmark, sample_runs

gpu_run = sample_runs().gpu_run

doc_tables = load_benchmark("doc_tables")


@pytest.fixture
def two_runs(tmp_path):
    run = gpu_run()
    gone = replace(run.stages[2], status=Status.UNAVAILABLE, reason="Apex: not installed", times_ms=(),
                 losses=())
    paths = []
    for n, r in enumerate((run, replace(run, stages=(*run.stages[:2], gone, run.stages[3])))):
        paths.append(tmp_path / f"run{n}.json")
        paths[-1].write_text(json.dumps(r.to_dict()))
    return [str(p) for p in paths]


def test_pair_table_has_every_stage_with_both_runs_and_why_one_did_not_run(two_runs, capsys):
    doc_tables.main(["--pair", two_runs[1], two_runs[0]])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| `")]
    summary = summarize(gpu_run())
    assert [r.split("`")[1] for r in rows] == [s.key for s in summary.stages]
    base, apex, _, bf16 = summary.stages
    assert f"{apex.timing.median_ms:.2f} ({apex.spread_text})" in rows[1]
    assert "unavailable: Apex: not installed" in rows[2]
    assert f"{bf16.bottleneck.busy_text} launch-bound" in rows[3] and bf16.mfu_text in rows[3]


def test_single_run_table_shows_memory_and_the_reason_of_a_stage_without_timings(two_runs, capsys):
    doc_tables.main([two_runs[1]])
    out = capsys.readouterr().out
    assert "| peak MiB |" in out and "| `apex-fusedadam+apex-fusedln+fp32` | unavailable: Apex: not installed" in out


def test_no_input_is_a_usage_message_not_a_traceback(capsys):
    with pytest.raises(SystemExit) as exit_:
        doc_tables.main([])
    assert exit_.value.code == 2 and "give RUN.json files" in capsys.readouterr().err


def test_twins_compare_each_vendor_lever_with_its_native_lever_in_the_same_run(tmp_path, capsys):
    from bench_core.levers.stage import Stage
    from bench_core.results.records import initial_stage
    run = gpu_run()
    ok = run.stages[3]  # an ok stage: its status, verdict and rounds
    cases = ((Stage("adam-fused", "layernorm", "bf16"), 10.0, 100.0),
             (Stage("adam-fused", "liger-ln", "bf16"), 9.0, 100.0),
             (Stage("adam-fused", "liger-ln", "bf16", head="liger-flce"), 12.5, 60.0))
    stages = tuple(replace(initial_stage(i, st, 4), status=ok.status, verdict=ok.verdict, rounds=ok.rounds,
                           times_ms=(ms,) * 8, peak_allocated_mib=mib) for i, (st, ms, mib) in enumerate(cases))
    path = tmp_path / "run.json"
    path.write_text(json.dumps(replace(run, stages=stages).to_dict()))
    doc_tables.main(["--twins", str(path)])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| `run.json`")]
    logits = run.config.tokens_per_step * run.config.vocab_size
    # one row per vendor lever whose single-lever native twin ran: Liger LN against LayerNorm, FLCE against the
    # plain head with the same Liger LN (its norm twin, native LN + FLCE, did not run)
    assert len(rows) == 2
    ln, flce = rows
    assert "`adam-fused+liger-ln+bf16` | `adam-fused+layernorm+bf16` | ×1.11" in ln and ln.endswith("| — |")
    # 9 / 12.5 ms; 40 of 100 MiB saved; per logit: the saving over tokens × vocab
    assert "| `adam-fused+liger-ln+bf16` | ×0.72 |" in flce and "100 → 60" in flce and "40 MiB (40.0%)" in flce
    assert f"{40 * 2 ** 20 / logits:.1f} B" in flce
