"""Pure figure builders: horizontal bars with full stage names, colour by meaning, nothing recomputed."""
from sample_runs import gpu_run

from bench_core.results import figures
from bench_core.results.summary import summarize


def test_speedup_bars_are_horizontal_with_full_names_intervals_and_meaningful_colours():
    fig = figures.speedup_bars(summarize(gpu_run()))
    bar = fig.data[0]
    assert bar.orientation == "h" and list(bar.y) == [s.key for s in summarize(gpu_run()).stages]
    assert bar.marker.color[1] == figures.FASTER and bar.marker.color[2] == figures.FAILED
    assert bar.x[2] == 0 and bar.text[2] == "failed (partial)"
    assert bar.error_x.array is not None


def test_failed_stage_is_left_out_of_throughput():
    fig = figures.throughput(summarize(gpu_run()))
    assert "apex-fusedadam+apex-fusedln+fp32" not in list(fig.data[0].y)


def test_comparison_lines_runs_up_by_stage_key():
    a, b = gpu_run(), gpu_run()
    fig = figures.speedup_bars([summarize(a), summarize(b)])
    bars = [t for t in fig.data if t.type == "bar"]
    assert len(bars) == 2 and list(bars[0].y) == list(bars[1].y)
    assert list(fig.layout.yaxis.categoryarray) == [s.key for s in a.stages]


def test_breakdown_stacks_categories_and_bottleneck_marks_the_threshold():
    summary = summarize(gpu_run())
    fig = figures.time_breakdown(summary)
    assert fig.layout.barmode == "stack" and {t.name for t in fig.data if t.type == "bar"} >= {"gemm", "cast/copy"}
    bars = figures.bottleneck(summary).data[0]
    assert "launch-bound" in bars.text[-1] and bars.marker.color[-1] == figures.SLOWER


def test_charts_that_do_not_apply_say_why():
    summary = summarize(gpu_run())
    assert "more than one GPU count" in figures.not_applicable("scaling", summary)
    assert figures.not_applicable("mfu", summary) is None


def test_kernel_grid_separates_pending_from_not_used():
    assert figures.CELL_COLORS["pending"] != figures.CELL_COLORS["not used"]
    fig = figures.kernel_grid(summarize(gpu_run()))
    assert all(label.split(". ", 1)[1] in [s.key for s in gpu_run().stages] for label in fig.data[0].y)


def _with_warmups(run, warmups, losses=None):
    from dataclasses import replace
    stages = tuple(replace(s, warmup_steps=w, **({"losses": series, "rounds": (len(series),)} if losses else {}))
                   for s, w, series in zip(run.stages, warmups, losses or [None] * len(warmups), strict=True))
    return replace(run, stages=stages)


def test_loss_chart_plots_every_stage_against_its_timed_steps():
    fig = figures.loss_curves(summarize(_with_warmups(gpu_run(), (3, 5, 5, 40))))
    assert [list(t.x) for t in fig.data] == [[1, 2, 3, 4], [1, 2, 3, 4], [1, 2], [1, 2, 3, 4]]
    assert "should overlay" not in fig.layout.title.text and "3, 5, 40 steps" in fig.layout.title.text


def test_parity_compares_the_same_training_step_against_a_bound_from_the_precision():
    import math

    from bench_core.results.parity import Parity, loss_parity
    run = gpu_run()
    # baseline warmed up 2 steps, the fp32 twin 3, the bf16 stage 2: the common last training step is 6
    losses = [(6.0, 5.0, 4.0, 3.0), (5.0, 4.0, 3.0, 3.0), (5.0,), (6.0, 5.0, 4.0, 3.03)]
    parity = loss_parity(summarize(_with_warmups(run, (2, 3, 2, 2), losses)))
    twin, bf16 = parity
    g, lnv = math.sqrt(2 * run.config.depth + 2), math.log(run.config.vocab_size)
    # the longest sum: softmax over 256 logits (batch 2 × 32 tokens, MLP width 256): sqrt(256)·2^-24 from FP32 sums
    acc = math.sqrt(256) * 2 ** -24
    # twin: training step 6 is the baseline's index 3 (3.0) and the twin's index 2 (3.0): equal, within fp32
    assert twin.step == 6 and twin.difference == 0 and twin.parity == Parity.WITHIN
    # warm-up's descent from ln V (none when ln V is below the first loss), the timed descent, the loss itself
    base_path, twin_path = max(0.0, lnv - 6.0) + 3.0 + 3.0, max(0.0, lnv - 5.0) + 2.0 + 3.0
    assert math.isclose(twin.bound, g * (2 ** -24 + acc) * max(base_path, twin_path) / 3.0)
    # bf16 against fp32: 1% apart at step 6, bound from bf16's u, which is above 1% for this tiny model
    assert bf16.precision == "bf16" and math.isclose(bf16.difference, 0.01)
    assert math.isclose(bf16.bound, g * (2 ** -8 + acc) * (max(0.0, lnv - 6.0) + 2.97 + 3.03) / 3.0)
    assert bf16.parity == Parity.WITHIN and "within 1% of adam+layernorm+fp32 (bound" in bf16.text
    # the same 1% is beyond the fp32 bound: other numerics
    losses[1] = (5.0, 4.0, 3.03, 3.0)
    twin = loss_parity(summarize(_with_warmups(run, (2, 3, 2, 2), losses)))[0]
    assert twin.parity == Parity.OUTSIDE and "beyond the bound" in twin.text and "for fp32" in twin.text


def _h200_parity(name):
    from pathlib import Path

    from bench_core.results import formats
    from bench_core.results.parity import loss_parity
    data = Path(__file__).parents[2] / "docs/data" / name
    return {p.key: p for p in loss_parity(summarize(formats.parse_json(data.read_bytes())[0]))}


def test_two_fp32_stages_that_only_reorder_float_operations_are_within_the_fp32_bound():
    """The H200's seed ladder with its twins (gpt2-small, 22 steps): torch Adam (foreach), Adam(fused=True) and
    Apex FusedAdam in FP32 differ by 1e-6 to 1e-5 of the loss. That is rounding: each sum rounds once a term in
    FP32, and the bound counts it (sqrt(50304)·2^-24 for the softmax). With the store's 2^-24 alone the bound was
    3.7e-7 and called all three 'other numerics'."""
    from bench_core.results.parity import Parity
    parity = _h200_parity("h200_2026-12-03_call12_seed_small_after_apex.json")
    fp32 = [p for p in parity.values() if p.precision == "fp32"]
    assert {p.key for p in fp32} == {"apex-fusedadam+layernorm+fp32", "apex-fusedadam+apex-fusedln+fp32",
                                     "adam-fused+layernorm+fp32"}
    assert all(p.parity == Parity.WITHIN for p in fp32), [p.text for p in fp32]
    assert max(p.difference for p in fp32) > 1e-6 > 3.7e-7 > 0   # beyond the old store-only bound
    assert all(p.bound < 1e-3 for p in fp32)   # still far below what a real change of numerics moves (next test)


def test_two_fp32_stages_several_percent_apart_are_beyond_the_fp32_bound():
    """An older H200 seed run (gpt2-small) whose FP32 Apex stages ended 4-6% from torch Adam: not rounding."""
    from bench_core.results.parity import Parity
    parity = _h200_parity("h200_2026-12-03_call2_seed_gpt2-small_run1.json")
    fp32 = [p for p in parity.values() if p.precision == "fp32"]
    assert len(fp32) == 2 and all(p.parity == Parity.OUTSIDE and p.difference > 0.04 for p in fp32)
    assert all("other numerics" in p.text for p in fp32)


def test_parity_needs_recorded_warmup_steps_and_says_so():
    from bench_core.results.parity import Parity, loss_parity
    parity = loss_parity(summarize(gpu_run()))
    assert {p.parity for p in parity} == {Parity.NOT_COMPARABLE}
    assert "warm-up steps not recorded" in parity[0].text
    fig = figures.loss_curves(summarize(gpu_run()))
    assert "warm-up steps not recorded" in fig.layout.annotations[0].text


def test_speedup_numbers_sit_beyond_the_error_bars_upper_end():
    fig = figures.speedup_bars(summarize(gpu_run()))
    bar, labels = fig.data[0], fig.data[1]
    for key, x, text in zip(labels.y, labels.x, labels.text, strict=True):
        i = list(bar.y).index(key)
        assert x == bar.x[i] + bar.error_x.array[i] and bar.text[i] == "" and text.strip().startswith("×")
    assert labels.textposition == "middle right" and len(labels.x) == 3
