"""Pure figure builders: horizontal bars with full stage names, colour by meaning, nothing recomputed."""
import dataclasses

import pytest

from bench_core.results import chart_layout, figures
from bench_core.results.summary import summarize
from helpers import ROOT, plain_title, sample_runs

gpu_run = sample_runs().gpu_run


def test_speedup_bars_are_horizontal_with_full_names_intervals_and_meaningful_colours():
    fig = figures.speedup_bars(summarize(gpu_run()))
    bar = fig.data[0]
    assert bar.orientation == "h" and list(bar.y) == [s.key for s in summarize(gpu_run()).stages]
    assert bar.marker.color[1] == chart_layout.FASTER and bar.marker.color[2] == chart_layout.FAILED
    assert bar.x[2] == 0 and bar.text[2] == "failed (partial)"


def test_speedup_error_bars_end_at_the_intervals_bounds():
    """Rounds that disagree (Apex Adam 45 then 60 ms: a wide, lopsided interval): each bar's ends are its bounds."""
    run = gpu_run()
    noisy = dataclasses.replace(run.stages[1], times_ms=(45.0,) * 4 + (60.0,) * 4)
    summary = summarize(run.with_stage(noisy))
    bar = figures.speedup_bars(summary).data[0]
    for i, s in enumerate(summary.stages):
        lo, hi = bar.error_x.arrayminus[i], bar.error_x.array[i]
        if s.speedup_ci is None:
            assert lo == hi == 0
            continue
        low, high = s.speedup_ci
        assert bar.x[i] - lo == pytest.approx(min(low, bar.x[i]))
        assert bar.x[i] + hi == pytest.approx(max(high, bar.x[i]))
    low, high = summary.stages[1].speedup_ci
    assert high - bar.x[1] != pytest.approx(bar.x[1] - low), "a lopsided interval, or swapped ends would pass"


def test_the_speedup_title_says_what_its_intervals_cover():
    """gpu_run's stages ran in 2 processes: the subtitle says so (it said 'bootstrap' of every interval); a run
    whose intervals differ in scope sends the reader to each bar's hover."""
    run = gpu_run()
    assert "95% interval across 2 processes" in figures.speedup_bars(summarize(run)).layout.title.text
    one = dataclasses.replace(run.stages[1], rounds=(8,))
    mixed = figures.speedup_bars(summarize(run.with_stage(one))).layout.title.text.replace(
        f"{chart_layout.SUB_CLOSE}<br>{chart_layout.SUB_OPEN}", " ")
    assert "each bar's scope in its hover" in mixed and "bootstrap" not in mixed


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
    bars = {t.name: t for t in figures.bottleneck(summary).data}
    launch = bars["launch-bound"]
    assert list(launch.y) == ["apex-fusedadam+apex-fusedln+bf16"] and launch.marker.color == chart_layout.SLOWER
    assert bars["gpu-bound"].marker.color == chart_layout.FASTER


def test_breakdown_subtitle_names_the_devices_time_before_any_stage_is_profiled():
    """A live CPU run's chart says "CPU op self time" from its first frame, not "GPU kernel time" until a profile
    comes back (the title read the first profile's source only)."""
    from dataclasses import replace
    run = gpu_run()
    unprofiled = tuple(replace(s, profile=None) for s in run.stages)
    for device, says, never in (("cpu", "CPU op self time", "GPU kernel time"),
                                ("cuda", "GPU kernel time", "CPU op self time")):
        title = figures.time_breakdown(summarize(replace(run, device=device, stages=unprofiled))).layout.title.text
        assert says in title and never not in title, (device, title)


def test_charts_that_do_not_apply_say_why():
    summary = summarize(gpu_run())
    assert "more than one GPU count" in figures.not_applicable("scaling", summary)
    assert figures.not_applicable("mfu", summary) is None


def test_kernel_grid_separates_pending_from_not_used():
    assert chart_layout.CELL_COLORS["pending"] != chart_layout.CELL_COLORS["not used"]
    fig = figures.kernel_grid(summarize(gpu_run()))
    assert all(label.split(". ", 1)[1] in [s.key for s in gpu_run().stages] for label in fig.data[0].y)


def _with_warmups(run, warmups, losses=None):
    from dataclasses import replace
    stages = tuple(replace(s, warmup_steps=w, **({"losses": series, "rounds": (len(series),)} if losses else {}))
                   for s, w, series in zip(run.stages, warmups, losses or [None] * len(warmups), strict=True))
    return replace(run, stages=stages)


def test_loss_chart_plots_every_stage_at_its_training_steps():
    """Drawn by timed step, stages that warmed up 3 and 40 steps sat apart by that offset and read as a loss gap;
    each loss is drawn at its training step, and equal curves differ in dash so the one beneath shows."""
    fig = figures.loss_curves(summarize(_with_warmups(gpu_run(), (3, 5, 5, 40))))
    assert [list(t.x) for t in fig.data] == [[4, 5, 6, 7], [6, 7, 8, 9], [6, 7], [41, 42, 43, 44]]
    assert fig.layout.xaxis.title.text == "training step" and "after its warm-up" in plain_title(fig)
    assert len({t.line.dash for t in fig.data}) == len(fig.data)


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

    from bench_core.results import formats
    from bench_core.results.parity import loss_parity
    data = ROOT / "docs/data" / name
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
    assert "warm-up steps not recorded" in fig.layout.annotations[0].text.replace("<br>    ", " ")


def test_speedup_numbers_sit_beyond_the_error_bars_upper_end():
    fig = figures.speedup_bars(summarize(gpu_run()))
    bar, labels = fig.data[0], fig.data[1]
    for key, x, text in zip(labels.y, labels.x, labels.text, strict=True):
        i = list(bar.y).index(key)
        assert x == bar.x[i] + bar.error_x.array[i] and bar.text[i] == "" and text.strip().startswith("×")
    assert labels.textposition == "middle right" and len(labels.x) == 3


def _title_px(fig):
    lines = fig.layout.title.text.split("<br>")
    sub, title = chart_layout.SUB_PX, chart_layout.TITLE_PX
    return chart_layout.MODEBAR_PX + sum(sub if line.startswith(chart_layout.SUB_OPEN) else title for line in lines)


def test_busy_labels_are_whole_and_the_verdict_is_a_legend_entry():
    """'100% · gpu-b' was cut at a phone's edge: the bar says its share alone, inside a bar long enough to hold it
    or beyond a short one with the rest of the axis free; the verdict is the bar's colour, named in the legend."""
    from dataclasses import replace
    run = gpu_run()
    low = replace(run.stages[3], profile=replace(run.stages[3].profile, trace_busy=0.1, gpu_kernel_ms=2.0))
    summary = summarize(run.with_stage(low))
    fig = figures.bottleneck(summary)
    assert {t.name for t in fig.data} == {"gpu-bound", "launch-bound"} and all(t.showlegend for t in fig.data)
    assert list(fig.layout.xaxis.range) == [0, 100]
    for t in fig.data:
        for x, text, where in zip(t.x, t.text, t.textposition, strict=True):
            assert text == f"{round(x)}%", text   # the share alone, a whole word
            assert (where == "inside") == (x >= chart_layout.BUSY_TEXT_INSIDE)
            if where == "outside":   # the rest of the axis is the label's: at least 3/4 of the plot
                assert 100 - x >= 75
            else:   # inside: 4 characters fit in the bar's share of the narrowest plot area
                assert len(text) * chart_layout.CHAR_PX + 6 <= x / 100 * chart_layout.phone_plot_px(fig)
    assert all("bound" in h for t in fig.data for h in t.hovertext)


def test_every_chart_keeps_its_legend_at_the_foot_and_its_title_clear_of_the_plot():
    """At 390 px a legend above the plot wrapped into the title: legends sit at the figure's foot, with a row an
    entry reserved under the axis title, and the top margin holds every line of the wrapped title."""
    summary = summarize(gpu_run())
    for name, build in figures.ALL_FIGURES.items():
        fig = build(summary)
        legend = fig.layout.legend
        assert (legend.yref, legend.y, legend.yanchor) == ("container", 0, "bottom"), name
        entries = chart_layout.legend_entries(fig)
        assert fig.layout.margin.b >= 50 + entries * chart_layout.LEGEND_ROW_PX or name == "kernels", name
        if name == "kernels":
            assert entries == len(figures.CELL_STATES) and fig.layout.margin.b >= entries * chart_layout.LEGEND_ROW_PX
        assert fig.layout.margin.t >= _title_px(fig), name
        for line in fig.layout.title.text.split("<br>"):
            plain = line.removeprefix(chart_layout.SUB_OPEN).removesuffix(chart_layout.SUB_CLOSE)
            sub = line.startswith(chart_layout.SUB_OPEN)
            assert len(plain) <= (chart_layout.SUB_CHARS if sub else chart_layout.TITLE_CHARS), \
                line


def test_bar_labels_have_room_on_a_phone_and_stage_names_break_after_plus():
    summary = summarize(gpu_run())
    for name in ("speedup", "throughput", "mfu", "memory", "roofline"):
        fig = figures.ALL_FIGURES[name](summary)
        plot_px = chart_layout.phone_plot_px(fig)
        top = fig.layout.xaxis.range[1]
        for t in fig.data:
            if t.text is None or isinstance(t.text, str) or t.textposition == "inside":
                continue
            errors = t.error_x.array if t.type == "bar" and t.error_x.array is not None else [0] * len(t.x)
            for x, e, text in zip(t.x, errors, t.text, strict=True):
                if x and text:   # the label's pixels fit between the bar's (or error bar's) end and the edge
                    assert (top - x - e) / top * plot_px >= len(text) * chart_layout.CHAR_PX, (name, text)
        ticks = list(fig.layout.yaxis.ticktext)
        assert all(len(line) <= chart_layout.STAGE_CHARS for tick in ticks for line in tick.split("<br>")), ticks
        assert [t.replace("<br>", "") for t in ticks] == list(fig.layout.yaxis.tickvals)


def test_a_stage_label_of_three_lines_gets_the_height_it_needs():
    """Two runs side by side label each bar "key · run": "apex-fusedadam+ / apex-fusedln+ / fp32 · cd08cc" took three
    lines in a row of two's height and ran into its neighbours (docs' bottleneck PNG). Rows of two-line labels keep
    their height; rows of three get a 14 px line each more."""
    from bench_core.results.chart_layout import LABEL_LINE_PX, ROW_PX, break_stage, figure_height, label_room
    three = break_stage("apex-fusedadam+apex-fusedln+fp32 · cd08cc")
    assert three.count("<br>") == 2
    two = break_stage("adam-fused+layernorm+fp32 · 11612b")
    assert two.count("<br>") == 1 and label_room([two] * 9, figure_height(9)) == 0
    room = label_room([two] * 8 + [three], figure_height(9))
    assert room == 9 * (3 * LABEL_LINE_PX + 6 - ROW_PX)   # each of the 9 rows to 3 lines' pitch
    # and every chart gets it: the same bars, one label longer, are drawn that much taller
    import plotly.graph_objects as go
    keys = [f"adam-fused+layernorm+fp32 · {i:06d}" for i in range(9)]
    short, tall = go.Figure(go.Bar(x=[1] * 9, y=keys)), go.Figure(go.Bar(x=[1] * 9, y=[*keys[:8], "apex-fusedadam+"
                                                                                        "apex-fusedln+fp32 · cd08cc"]))
    chart_layout.finish_figure(short, "t", figure_height(9))
    chart_layout.finish_figure(tall, "t", figure_height(9))
    assert tall.layout.height - short.layout.height == room


def test_a_cpu_bar_longer_than_its_step_says_why():
    """On a CPU the op time summed over threads, on profiled steps, outran the 12.37 ms step (35.1 ms) with no word
    (a new user's pass): the chart marks each step and says why, from the summary's own figures."""
    cpu_run = sample_runs().cpu_run
    summary = summarize(cpu_run())
    fig = figures.time_breakdown(summary)
    title = plain_title(fig)
    assert "| = measured step time" in title
    assert ("a bar past its | is no contradiction: op time is summed over every thread that ran ops, on the profiled "
            "steps, which the profiler slows (adam-fused+layernorm+bf16: 35.1 ms of ops in a 12.37 ms step)") in title
    bf16 = summary.stages[2]   # the figures are the summary's, computed there once
    assert bf16.cpu_ops_ms == pytest.approx(35.1) and bf16.cpu_ops_over_step == pytest.approx(35.1 / 12.37)
    steps = [t for t in fig.data if t.type == "scatter"]
    assert [t.x[0] for t in steps] == [s.timing.median_ms for s in summary.stages]
    under = dataclasses.replace(cpu_run(), stages=cpu_run().stages[:2])   # every bar inside its step: no note
    assert "no contradiction" not in plain_title(figures.time_breakdown(summarize(under)))
    gpu = plain_title(figures.time_breakdown(summarize(gpu_run())))
    assert "no contradiction" not in gpu and summarize(gpu_run()).stages[0].cpu_ops_over_step is None
