"""RunSummary: every derived figure once, checked against hand-computed values."""
import math
from dataclasses import replace

import pytest

from bench_core.measure.metrics import flops_per_step
from bench_core.results.records import Status
from bench_core.results.summary import summarize
from helpers import sample_runs

gpu_run = sample_runs().gpu_run


def test_speedups_baseline_and_rates_are_computed_once_and_right():
    summary = summarize(gpu_run())
    base, apex, failed, bf16 = summary.stages
    assert summary.baseline_key == "adam+layernorm+fp32" and summary.baseline_note is None
    assert base.speedup == 1.0 and base.speedup_ci is None  # the baseline is the reference, not an estimate
    assert apex.speedup == pytest.approx(2.0) and apex.speedup_ci == (pytest.approx(2.0), pytest.approx(2.0))
    assert bf16.speedup == pytest.approx(5.0)
    tokens = 2 * 32
    assert bf16.rates.tokens_per_s == pytest.approx(tokens / 0.020)
    assert bf16.rates.tflops == pytest.approx(flops_per_step(gpu_run().config) / 0.020 / 1e12)
    assert bf16.rates.mfu == pytest.approx(bf16.rates.tflops / 989.4)  # H200 SXM dense bf16
    assert summarize(summary.run) is summary  # cached on the immutable run


def test_across_processes_the_speedup_shown_lies_inside_its_interval():
    # The speedup shown is the estimate of the per-process paired ratios its interval is built around; the pooled
    # medians' ratio can lie outside that interval (rounds of unequal speed pooled). Here each process is exactly 2x
    # faster than its baseline round, but the pooled medians are a slow baseline round's and a fast stage round's:
    # 120 / 50 = 2.4.
    run = gpu_run()
    run = run.with_stage(replace(run.stages[0], rounds=(6, 6, 6), times_ms=(100.0,) * 6 + (120.0,) * 6 + (150.0,) * 6))
    run = run.with_stage(replace(run.stages[1], rounds=(13, 6, 6), times_ms=(50.0,) * 13 + (60.0,) * 6 + (75.0,) * 6))
    base, shown = summarize(run).stages[:2]
    assert base.timing.median_ms / shown.timing.median_ms == pytest.approx(2.4)
    low, high = shown.speedup_ci
    assert low <= shown.speedup <= high and shown.speedup == pytest.approx(2.0)


def test_a_failed_stage_with_timings_is_partial_not_a_result():
    failed = summarize(gpu_run()).stages[2]
    assert failed.partial and not failed.ranked
    assert failed.speedup is None and failed.rates.tokens_per_s is None and failed.rates.mfu is None


def test_bottleneck_and_delta_come_from_the_profile():
    base, apex, _, bf16 = summarize(gpu_run()).stages
    assert base.bottleneck.verdict == "gpu-bound" and base.bottleneck.busy == pytest.approx(0.99)
    assert bf16.bottleneck.verdict == "launch-bound" and bf16.bottleneck.busy == pytest.approx(0.5)
    assert apex.delta is not None and apex.delta.kernels_per_step == pytest.approx(-50)
    assert apex.delta.ms_by_category["gemm"] == pytest.approx(-20.0)
    assert bf16.delta is None  # the stage before it has no profile


def test_no_speedups_when_the_baseline_did_not_finish_ok():
    from dataclasses import replace

    from bench_core.results.records import Status
    run = gpu_run()
    run = run.with_stage(replace(run.stages[0], status=Status.OOM, reason="Tried to allocate 2 GiB"))
    summary = summarize(run)
    assert all(s.speedup is None for s in summary.stages)
    assert "baseline stage adam+layernorm+fp32 is oom" in summary.baseline_note


def test_noise_reason_says_which_rule():
    from dataclasses import replace
    run = gpu_run()
    run = run.with_stage(replace(run.stages[1], times_ms=(50.0,) * 4 + (53.0,) * 4))
    s = summarize(run).stages[1]
    assert s.noisy and "repeat medians differ by 5.8%" in s.noise_reason and "p10–p90" not in s.noise_reason


def test_energy_per_token():
    from dataclasses import replace
    run = gpu_run()
    run = run.with_stage(replace(run.stages[3], energy_j=64.0))
    assert summarize(run).stages[3].energy_j_per_token == pytest.approx(64.0 / (8 * 64))
    assert summarize(run).stages[0].energy_j_per_token is None  # no counter: empty, never estimated
    assert not math.isnan(summarize(run).stages[3].energy_j_per_token)


def test_a_graphs_stage_reports_its_reserved_memory():
    from bench_core.levers.stage import Stage
    from bench_core.results.records import initial_stage
    run = gpu_run()
    graphs = replace(initial_stage(3, Stage("adam-fused", "layernorm", "bf16", "graphs"), 4),
                     status=Status.OK, times_ms=(20.0,) * 8, peak_allocated_mib=2080.0, peak_reserved_mib=11568.0)
    run = run.with_stage(graphs)
    assert summarize(run).stages[3].peak_mem_mib == 11568.0  # the graph's private pool is reserved, not allocated
    assert summarize(run).stages[0].peak_mem_mib == 100.0


def test_figure_texts_are_written_once_and_fp8_mfu_names_its_peak():
    run = gpu_run()
    fp8 = replace(run.stages[3], stage=run.stages[3].stage.replace(precision="fp8-torchao"))
    base, apex, failed, stage = summarize(replace(run, stages=(*run.stages[:3], fp8))).stages
    # two processes: fewer than a GPU run's default, so the text says what its interval covers
    assert base.speedup_text == "×1.00" and apex.speedup_text == "×2.00 (2.00–2.00, across 2 processes)"
    assert apex.spread_text == "50.00–50.00" and failed.mfu_text is None
    assert base.mfu_text is not None and not base.mfu_text.endswith("of fp32")  # fp32 counts against fp32
    # FP8 does the same model FLOPs as BF16 and counts them against the BF16 peak: the text must say so
    assert stage.mfu_peak == "bf16" and stage.mfu_text == f"{stage.rates.mfu:.1%} of bf16"


def _rounds(run, n):
    """The same series split into n processes (rounds) per stage."""
    return replace(run, stages=tuple(replace(s, rounds=(len(s.times_ms) // n,) * n) if s.rounds else s
                                     for s in run.stages))


def test_every_interval_says_what_it_covers_and_the_speedup_text_says_so_where_it_matters():
    from bench_core.results.headline import headline
    one = summarize(_rounds(gpu_run(), 1)).stages[1]
    assert one.processes == 1 and one.interval_text == "within one process"
    assert one.speedup_text == "×2.00 (2.00–2.00, within one process)"
    four = summarize(_rounds(gpu_run(), 4))
    apex = four.stages[1]
    assert apex.processes == 4 and apex.interval_text == "across 4 processes"
    assert apex.speedup_text == "×2.00 (2.00–2.00)"   # the GPU default or more: the column says it, not the cell
    assert "(95% CI ×5.00–5.00, across 4 processes)" in " ".join(headline(four).lines)
    assert four.stages[0].interval is None and four.stages[0].processes == 4  # the baseline: no interval


def test_a_stage_whose_processes_split_in_two_groups_says_so_in_every_view():
    """Three processes at 25.6, 25.7 and 41.3 ms: one median (25.7) hides the slow one. The split is found once, in
    the summary, and read by the verdict, the table's column and the CSV, which carries the medians back in."""
    from bench_core.measure import stats
    from bench_core.results import formats
    from bench_core.results.columns import DISPLAY_COLUMNS
    from bench_core.results.headline import headline
    run = gpu_run()
    medians = (25.6, 41.3, 25.7)
    split = replace(run.stages[3], rounds=(4, 4, 4), times_ms=tuple(m for m in medians for _ in range(4)))
    summary = summarize(run.with_stage(split))
    stage = summary.stages[3]
    assert stage.round_medians == medians and stage.process_split == stats.process_split(medians)
    said = "processes split in two groups: 25.6, 25.7 | 41.3 ms"
    assert stage.process_medians_text == said
    assert f"{stage.key} — {stage.noise_reason}; {said}" in "\n".join(headline(summary).lines)
    [column] = [c for c in DISPLAY_COLUMNS if c.key == "process_medians"]
    assert column.cell(stage) == said
    row = formats.summary_rows(summary)[3]
    assert row["processes_split"] is True and row["process_medians_ms"] == "25.6;41.3;25.7"
    [back] = formats.parse_csv(formats.to_csv(summary.run).encode())
    assert summarize(back).stages[3].process_medians_text == said
    # an even spread of three processes is no split: each process's median, as measured
    even = summarize(run.with_stage(replace(split, times_ms=tuple(m for m in (25.6, 30.1, 34.8) for _ in range(4)))))
    assert even.stages[3].process_split is None
    assert even.stages[3].process_medians_text == "per process 25.6, 30.1, 34.8 ms"
