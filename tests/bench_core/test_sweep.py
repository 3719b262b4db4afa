"""The sweep's engine on CPU: the grid and its family rules, the crossover on synthetic data with a known answer,
the predictor's arithmetic against hand-computed cases, the budget planner, storage and import, the map's traces
and the command line's refusals. The real end-to-end sweep is in test_sweep_cli.py."""
import json
import math
import os
import shutil
import threading
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest

from bench_core.config.bench_config import BenchConfig, ConfigError
from bench_core.config.settings import Limits
from bench_core.levers.stage import Stage
from bench_core.machine.probe import Probe
from bench_core.models.families import architecture, mlp_hidden
from bench_core.results.chart_layout import LAYOUT, LEGEND_ROW_PX
from bench_core.results.records import Status
from bench_core.sweep import plan
from bench_core.sweep.crossover import Crossover, Direction, Estimate, crossover, speedup_text
from bench_core.sweep.errors import error_figures, step_time_error
from bench_core.sweep.figures import sweep_figure
from bench_core.sweep.history import SweepStore
from bench_core.sweep.predict import block_gemms, predict, predict_stage
from bench_core.sweep.records import (
    PointMeasurement,
    PointPrediction,
    PointResult,
    Source,
    SweepResult,
    crossovers,
    from_json,
    is_sweep_json,
    prediction_error,
    to_json,
)
from bench_core.sweep.rows import csv_rows, shown_rows, shown_text_rows
from bench_core.sweep.runner import SweepHooks, run_sweep
from bench_core.sweep.spec import (
    Axis,
    SweepSpec,
    check,
    grid,
    parse_axes,
    parse_budget,
    parse_comparison,
)
from bench_core.sweep.terminal import summary_lines
from bench_core.sweep.timings import KernelTime, Part, PointTimings
from helpers import plain_title, step_timings

FP32 = Stage("adam-fused", "layernorm", "fp32")
BF16 = Stage("adam-fused", "layernorm", "bf16")
NO_GPU = Probe.from_dict({})   # a machine without CUDA; the fakes below run nothing on it
GPT2_SMALL = BenchConfig(depth=12, width=768, heads=12, seq_len=1024, batch_size=8, vocab_size=50304)


# ---------------------------------------------------------------- the grid and its input
def test_grid_varies_the_first_axis_fastest_and_heads_follow_the_width():
    points = grid((Axis("width", (256, 512)), Axis("batch_size", (4, 8))), GPT2_SMALL)
    assert [p.values for p in points] == [(("width", 256), ("batch_size", 4)), (("width", 512), ("batch_size", 4)),
                                          (("width", 256), ("batch_size", 8)), (("width", 512), ("batch_size", 8))]
    assert [(p.config.width, p.config.heads, p.config.batch_size) for p in points] == [
        (256, 4, 4), (512, 8, 4), (256, 4, 8), (512, 8, 8)]     # head size 64, as the base's 768/12
    assert all(p.config.depth == 12 and p.config.seq_len == 1024 for p in points)


def test_the_mlp_width_is_the_familys_own_at_each_point():
    llama = BenchConfig(family="llama", depth=2, width=768, heads=12, seq_len=64, batch_size=2, vocab_size=512)
    points = grid((Axis("width", (768, 2048)),), llama)
    assert [mlp_hidden(p.config) for p in points] == [2048, 5632]   # 2/3 of 4·d, rounded up to 256
    gpt = grid((Axis("width", (256,)),), GPT2_SMALL)[0]
    assert mlp_hidden(gpt.config) == 1024


def test_a_point_that_breaks_a_family_rule_is_refused_by_its_axis_values():
    llama = BenchConfig(family="llama", depth=2, width=64, heads=4, seq_len=64, batch_size=2, vocab_size=512)
    ok = SweepSpec(parse_comparison("adam-fused", "llama"), llama, (Axis("width", (64, 128)),), None)
    assert len(check(ok, Limits(), False, {"cpu": None})) == 2
    odd = BenchConfig(family="llama", depth=2, width=60, heads=4, seq_len=64, batch_size=2, vocab_size=512)
    bad = SweepSpec(ok.comparison, odd, (Axis("width", (60,)),), None)   # head size 15: rotary needs an even one
    with pytest.raises(ConfigError, match="even head size") as err:
        check(bad, Limits(), False, {"cpu": None})
    assert err.value.field == "axis (width=60)"
    indivisible = SweepSpec(parse_comparison("adam-fused", "gpt"), GPT2_SMALL, (Axis("width", (200,)),), None)
    with pytest.raises(ConfigError) as err:       # 200 // 64 = 3 heads, and 200 is not divisible by 3
        check(indivisible, Limits(), False, {"cpu": None})
    # said as the sweep's user set it: heads follow the width at the base's head size, 768 / 12 = 64
    assert err.value.field == "axis width" and err.value.value == 200
    assert "must be a multiple of the head size 64 (the base shape's width 768 / heads 12" in str(err.value)


def test_too_many_points_are_refused_before_anything_runs():
    spec = SweepSpec(parse_comparison("adam-fused", "gpt"), GPT2_SMALL,
                     parse_axes(["width=256,512,768", "batch_size=1,2"]), None)
    with pytest.raises(ConfigError, match="6 points exceed the limit of 5"):
        check(spec, Limits(max_sweep_points=5), False, {"cpu": None})


@pytest.mark.parametrize("text, values", [("width=1024,256,512", (256, 512, 1024)), ("width=256:2048:x2", (256, 512,
                         1024, 2048)), ("batch_size=4:16:+4", (4, 8, 12, 16)), ("seq_len = 128", (128,))])
def test_axis_values_as_lists_or_ranges(text, values):
    assert parse_axes([text])[0].values == values


@pytest.mark.parametrize("texts, field, words", [
    (["heads=4,8"], "axis", "unknown axis"), (["width="], "axis width", "at least one value"),
    (["width=a,b"], "axis width", "positive integers"), (["width=0,64"], "axis width", "positive integers"),
    (["width=64,64"], "axis width", "twice"), (["width=512:256:x2"], "axis width", "START <= STOP"),
    (["width=64", "width=128"], "axis", "named twice"), (["width=64", "depth=2", "seq_len=64"], "axis", "at most 2"),
    ([], "axis", "one or two axes"), (["width"], "axis", "NAME=VALUES")])
def test_bad_axes_name_the_flag(texts, field, words):
    with pytest.raises(ConfigError, match=words) as err:
        parse_axes(texts)
    assert err.value.field == field


@pytest.mark.parametrize("text, seconds", [("10m", 600), ("90s", 90), ("1h30m", 5400), ("45", 45), (None, None),
                                           ("", None)])
def test_budget(text, seconds):
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["ten minutes", "10x", "0", "0m", "5m10"])
def test_bad_budget(text):
    with pytest.raises(ConfigError) as err:
        parse_budget(text)
    assert err.value.field == "budget"


def test_a_lever_is_compared_with_the_lever_it_replaces_in_the_familys_form():
    fp8 = parse_comparison("fp8-torchao", "llama")
    assert (fp8.a.key, fp8.b.key) == ("adam-fused+rmsnorm+bf16", "adam-fused+rmsnorm+fp8-torchao")
    flce = parse_comparison("liger-flce", "gpt")
    assert (flce.a.head, flce.b.head) == ("ce", "liger-flce")
    compiled = parse_comparison("compile", "gpt")           # a native lever: against its kind's baseline
    assert (compiled.a.compile, compiled.b.compile) == ("eager", "compile")
    keys = parse_comparison("adam-fused+layernorm+bf16+compile,adam-fused+layernorm+fp8-torchao+compile", "gpt")
    assert keys.b.precision == "fp8-torchao" and keys.a.compile == keys.b.compile == "compile"


@pytest.mark.parametrize("text, words", [("", "name a lever"), ("warp-drive", "unknown lever"),
                                         ("adam", "baseline"), ("a,b,c", "exactly two"),
                                         ("adam+layernorm+fp32,adam+layernorm+fp32", "the same"),
                                         ("adam+layernorm+fp32,adam+layernorm+fp32+gpus2", "one-GPU")])
def test_bad_comparisons(text, words):
    with pytest.raises(ConfigError, match=words) as err:
        parse_comparison(text, "gpt")
    assert err.value.field == "compare"


# ---------------------------------------------------------------- the crossover
def _line(f, xs, spread):
    return [Estimate(x, f(x), f(x) / spread, f(x) * spread) for x in xs]


def test_crossover_of_a_known_line_and_its_interval():
    """speedup = w/1000: ×1.00 at 1000; the upper bounds (×1.1) cross at 1000/1.1, the lower ones at 1100. Nothing
    was measured between 500 and 2000, so the interval is never narrower than those two; with points at 950 and
    1050 around the crossing, the bounds' own crossings are the interval."""
    found = crossover("width", _line(lambda w: w / 1000, [250, 500, 2000, 4000], 1.1))
    assert found is not None and found.direction == Direction.PAYS_ABOVE
    assert found.value == pytest.approx(1000)
    assert (found.low, found.high) == (500, 2000)
    # x2, x4 lie above their intervals; the text says how much it pays
    assert found.pays and \
        found.text == "pays above width ≈ 1,000 (500–2,000): ×4.00 (3.64–4.40) at best, at width=4,000"
    assert Crossover.from_dict(found.to_dict()) == found
    dense = crossover("width", _line(lambda w: w / 1000, [250, 950, 1050, 4000], 1.1))
    assert dense is not None and dense.low == pytest.approx(1000 / 1.1) and dense.high == pytest.approx(1100)


def test_a_crossing_between_two_swept_values_spans_them():
    """Call 33's Apex map at width 768: ×0.75 (0.69–0.82) at batch 4 and ×1.005 (1.005–1.006) at 8 read
    "≈ 7.9 (7.8–7.9)", as if batch 7 were known not to pay; the step turns from the host's pace to the GPU's
    somewhere between 4 and 8, and nothing between them ran."""
    points = [Estimate(2, 0.63, 0.57, 0.71), Estimate(4, 0.75, 0.69, 0.82), Estimate(8, 1.005, 1.005, 1.006),
              Estimate(16, 1.0, 0.99, 1.01)]
    found = crossover("batch_size", points)
    assert found is not None and 4 < found.value < 8 and (found.low, found.high) == (4, 8)
    assert "batch_size ≈ 7.9 (4–8)" in found.text


def test_a_small_gain_is_said_with_its_interval_and_an_old_file_still_reads():
    """Call 29's Apex map at width 768: its batch-32 point ×1.01 is faster beyond its interval, so the lever "pays";
    the sentence carries that point's interval, and the other axis's value comes after the crossing, not inside
    the axis's name. A file from before kept only the best speedup, a bare number: it reads without it."""
    points = [Estimate(8, 0.59, 0.47, 0.69), Estimate(16, 0.997, 0.97, 1.02), Estimate(32, 1.0098, 1.0041, 1.0155)]
    found = crossover("batch_size", points)
    assert found is not None and found.pays
    found = replace(found, fixed="width=768")
    assert found.text.startswith("pays above batch_size ≈ ") and \
        found.text.endswith(" at width=768: ×1.010 (1.004–1.016) at best, at batch_size=32")
    # a best point that was only predicted says so (call 25's FP8 map: ×1.44 at width 4,096, never run)
    guessed = crossover("batch_size", [*points[:2], replace(points[2], measured=False)])
    assert guessed is not None and ": ×1.010 (1.004–1.016) at best, predicted, at batch_size=32" in guessed.text
    assert Crossover.from_dict(guessed.to_dict()) == guessed
    old = {k: v for k, v in found.to_dict().items() if k != "fixed"} | {"axis": "batch_size at width=768",
                                                                        "best": 1.0098}
    assert Crossover.from_dict(old).best is None and "at best" not in Crossover.from_dict(old).text


def test_a_crossing_never_reads_as_sitting_on_its_own_bound():
    """Call 29's crossing at width 768, 15.99 (15.58–25.49), read "≈ 16 (16–25)": a decimal more where a bound
    rounds to the crossing, none otherwise."""
    near = Crossover("batch_size", 15.985, 15.576, 25.486, Direction.PAYS_ABOVE, pays=False)
    assert "batch_size ≈ 16.0 (15.6–25.5)" in near.text
    assert "batch_size ≈ 19 (8–31)" in replace(near, value=18.88, low=7.72, high=30.72).text
    assert "batch_size ≈ 16.0 (at most 16.4)" in replace(near, low=None, high=16.4).text


def test_a_speedup_without_spread_does_not_read_as_certain():
    """A launch-bound prediction from older files kept no host rounds: its interval is one number, said as such."""
    assert speedup_text(0.75, 0.75, 0.75) == "×0.75 (no spread measured)"
    # a bound that rounds to 1.00 but is not 1 gets a third digit: faster beyond its interval must not read as a tie
    assert speedup_text(1.0098, 1.0041, 1.0155) == "×1.010 (1.004–1.016)"
    assert speedup_text(0.997, 0.97, 1.02) == "×1.00 (0.97–1.02)"
    assert speedup_text(1.0, 1.0, 1.05) == "×1.00 (1.00–1.05)"


def test_a_crossing_no_point_of_its_line_measured_says_so():
    """Call 30's FP8 map, predicted only: its crossing at width ≈ 1,846 (1,821–1,914) came from predictions alone,
    its narrow interval the shallow steps' spread, not a measurement's."""
    result = _result()
    unmeasured = replace(result, points=tuple(replace(p, measurement=None) for p in result.points))
    assert all(c.predicted_only and c.text.startswith("predicted only (no point on this line measured): ")
               for c in crossovers(unmeasured))
    # on a map, the line is named: beside "1 of 8 points measured" the sweep's other lines may hold that point
    (row,) = crossovers(unmeasured)
    assert replace(row, fixed="batch_size=2").text.startswith("predicted only (no point at batch_size=2 measured): ")
    assert crossovers(unmeasured) and not any(c.predicted_only for c in crossovers(result))


def test_a_lever_that_only_reaches_parity_is_not_said_to_pay():
    """The H200's Apex map at width 768 (call 23): x0.68 and x0.59 where the host sets the pace, then x1.00 (0.97-1.02)
    and x1.00 (0.99-1.01) where the GPU does. The log-speedup crosses x1.00 between batch 16 and 32, but no point
    past it is faster beyond its interval: the lever stops costing, it does not pay."""
    points = [Estimate(4, 0.68, 0.46, 0.96), Estimate(8, 0.59, 0.47, 0.69), Estimate(16, 0.997, 0.97, 1.02),
              Estimate(32, 1.002, 0.99, 1.01)]
    found = crossover("batch_size", points)
    assert found is not None and found.direction == Direction.PAYS_ABOVE and not found.pays
    assert found.text.startswith("reaches ×1.00 above batch_size ≈ ") and "measurably faster" in found.text
    assert Crossover.from_dict(found.to_dict()) == found


def test_crossover_of_a_lever_that_pays_below():
    found = crossover("batch_size", _line(lambda b: 8 / b, [1, 2, 4, 16, 32], 1.25))
    assert found is not None and found.direction == Direction.PAYS_BELOW
    assert found.value == pytest.approx(8) and (found.low, found.high) == (4, 16)   # bounds 6.4–10, inside them


def test_a_crossing_interval_beyond_the_swept_values_is_open():
    found = crossover("width", _line(lambda w: w / 1000, [500, 2000], 3.0))
    assert found is not None and found.value == pytest.approx(1000)
    assert found.low is None and found.high is None and not found.located
    # an interval open at both ends places the crossing nowhere: the sentence says so instead of a bold "≈ 1,000"
    # and gives it no value: "reaches ×1.00 above batch_size ≈ 12 (not located…)" named a place, the last swept one
    assert found.text.startswith("reaches ×1.00 somewhere along width (not located: its interval spans every swept "
                                 "value)") and "≈" not in found.text
    # one side open: the upper bounds (×1.5) cross at 667; the lower ones (w / 1,500) stay below ×1.00 to 1,400
    half = crossover("width", _line(lambda w: w / 1000, [600, 700, 1200, 1400], 1.5))
    assert half is not None and half.located and half.low == pytest.approx(1000 / 1.5) and half.high is None
    assert "width ≈ 1,000 (at least 667)" in half.text


def test_no_crossover_when_every_point_is_on_one_side():
    assert crossover("width", _line(lambda w: 1 + w / 1000, [256, 512, 1024], 1.05)) is None
    assert crossover("width", _line(lambda w: 0.5, [256, 512, 1024], 1.05)) is None   # intervals short of ×1.00


def test_a_line_below_one_whose_intervals_come_to_hold_it_reaches_one():
    """Call 32's Apex map at width 768: ×0.79 (0.65–0.97) at batch 8, then ×0.9997 (0.996–1.004) and ×0.998
    (0.99–1.01); every point below ×1.00, so no point crossed, and the map said "no crossover" beside cells
    reading ×1.00. The upper bounds cross ×1.00 between 8 and 16: it reaches ×1.00 there, and pays nowhere."""
    points = [Estimate(4, 0.72, 0.66, 0.78), Estimate(8, 0.79, 0.65, 0.97), Estimate(16, 0.9997, 0.996, 1.004),
              Estimate(32, 0.998, 0.99, 1.01)]
    found = crossover("batch_size", points)
    assert found is not None and not found.pays and (found.low, found.high) == (8, 16) and 8 < found.value < 16
    assert found.text.startswith("reaches ×1.00 above batch_size ≈ ") and found.text.endswith(
        "(8–16); no point past it measurably faster")


# ---------------------------------------------------------------- the predictor's arithmetic
COMPILED = BF16.replace(compile="compile")


def _step(stage, one, two, spread=0.1):
    """A stage's shallow steps, hand-set: (kernel ms, kernels, host ms) with one block and with two."""
    return tuple(KernelTime(part, stage.key, ms, ms * (1 - spread), ms * (1 + spread), k, 1, kernel_ms=ms,
                            host_ms=host) for part, (ms, k, host) in ((Part.STEP_1, one), (Part.STEP_2, two)))


def _timings(depth=12, launch_us=10.0):
    """FP32: 3 ms of kernels with one block (100 kernels, 1 ms to issue), 5 ms with two (160, 1.6 ms): a block
    adds 2 ms, 60 kernels and 0.6 ms of host. BF16: 1.5 ms, then 2.5. Compiled BF16: 1.2, then 2.0 ms, 40 kernels a
    block. A noisy stage: faster with two blocks than with one."""
    return PointTimings(_step(FP32, (3.0, 100, 1.0), (5.0, 160, 1.6)) + _step(BF16, (1.5, 100, 1.0), (2.5, 160, 1.6))
                        + _step(COMPILED, (1.2, 50, 0.3), (2.0, 90, 0.4))
                        + _step(FP32.replace(optimizer="adam"), (3.0, 100, 1.0), (2.9, 160, 1.6)), launch_us, depth)


def test_a_stage_is_its_shallow_steps_extrapolated_in_depth():
    a = predict_stage(_timings(), FP32)
    # one block, then 11 more at what the second added: 3 + 11·2 ms, 100 + 11·60 kernels; the host at its 0.01 ms
    # a kernel (2.6 ms over 260 kernels) for each
    assert a.gpu_ms == pytest.approx(25.0) and a.kernels == 760 and a.host_ms == pytest.approx(7.6)
    assert a.step_ms == pytest.approx(25.0) and a.bound.value == "gpu-bound"
    # the shallow steps' p10/p90 spread (10%) carried to the step
    assert (a.gpu_low_ms, a.gpu_high_ms) == (pytest.approx(22.5), pytest.approx(27.5))
    assert predict_stage(_timings(depth=1), FP32).gpu_ms == pytest.approx(3.0)


def test_the_speedup_and_its_interval_from_two_predictions():
    p = predict(_timings(), FP32, BF16)
    # BF16: 1.5 + 11·1 = 12.5 ms against FP32's 25
    assert p.b.step_ms == pytest.approx(12.5) and p.speedup == pytest.approx(2.0)
    assert p.low == pytest.approx(25 * 0.9 / (12.5 * 1.1)) and p.high == pytest.approx(25 * 1.1 / (12.5 * 0.9))


def test_a_slow_host_makes_the_stage_launch_bound():
    """The host's time is the step's own measured time to issue (Apex's launch-bound BF16 stage on the H200: the
    host, not the GPU, set its pace). Hand-set: 2 ms of host a block against 1 ms of kernels."""
    slow = PointTimings(_step(BF16, (1.5, 100, 2.5), (2.5, 160, 4.5)), 10.0, 12)
    b = predict_stage(slow, BF16)
    # 760 kernels at the shallow steps' 7 ms of host over their 260 kernels
    assert b.host_ms == pytest.approx(760 * 7.0 / 260) and b.gpu_ms == pytest.approx(12.5)
    assert b.step_ms == pytest.approx(760 * 7.0 / 260) and b.bound.value == "launch-bound"


def test_the_host_goes_with_the_kernels_so_its_noise_is_not_multiplied_by_the_blocks():
    """Two measurements of the same shallow steps, the second block's host time 0.5 ms apart (noise): extrapolating
    the host's own difference would put 11 x 0.5 ms between the predictions; per kernel, 760 x 0.5 / 260."""
    quiet = predict_stage(PointTimings(_step(BF16, (1.5, 100, 2.5), (2.5, 160, 4.5)), 10.0, 12), BF16)
    noisy = predict_stage(PointTimings(_step(BF16, (1.5, 100, 2.5), (2.5, 160, 5.0)), 10.0, 12), BF16)
    assert noisy.host_ms - quiet.host_ms == pytest.approx(760 * 0.5 / 260)   # 1.46 ms, not 5.5


def test_a_launch_bound_prediction_spans_its_hosts_fastest_and_slowest_rounds():
    """The host's rounds, hand-set: one block 2.5 ms (fastest 2.0, slowest 3.5), two blocks 4.5 (4.0, 6.0). BF16 is
    launch-bound (760 kernels over the shallow steps' 260), FP32 GPU-bound: its interval is its kernels' 10%."""
    host_range = {Part.STEP_1: (2.0, 3.5), Part.STEP_2: (4.0, 6.0)}
    slow = tuple(replace(t, host_low_ms=host_range[t.part][0], host_high_ms=host_range[t.part][1])
                 for t in _step(BF16, (1.5, 100, 2.5), (2.5, 160, 4.5)))
    timings = PointTimings(_step(FP32, (3.0, 100, 1.0), (5.0, 160, 1.6)) + slow, 10.0, 12)
    b = predict_stage(timings, BF16)
    per_kernel = (6.0 / 260, 7.0 / 260, 9.5 / 260)   # the rounds' fastest, median and slowest over 260 kernels
    assert (b.host_low_ms, b.host_ms, b.host_high_ms) == pytest.approx(tuple(760 * r for r in per_kernel))
    p = predict(timings, FP32, BF16)
    assert p.speedup == pytest.approx(25.0 / (760 * 7.0 / 260))
    assert p.low == pytest.approx(22.5 / (760 * 9.5 / 260)) and p.high == pytest.approx(27.5 / (760 * 6.0 / 260))
    # without kept rounds (older files) the host is its median: the interval is the kernels' alone
    old = predict(PointTimings(_step(FP32, (3.0, 100, 1.0), (5.0, 160, 1.6)) + _step(BF16, (1.5, 100, 2.5),
                                                                                      (2.5, 160, 4.5)), 10.0, 12),
                  FP32, BF16)
    assert old.low == pytest.approx(22.5 / (760 * 7.0 / 260)) and old.high == pytest.approx(27.5 / (760 * 7.0 / 260))


def test_the_gpu_time_is_the_wall_time_where_the_gpu_set_the_pace_and_the_traced_kernels_where_the_host_did():
    gpu_paced = KernelTime(Part.STEP_1, "k", 10.3, 10.2, 10.4, 127, 1, kernel_ms=10.6, host_ms=6.7)
    host_paced = replace(gpu_paced, ms=8.0, kernel_ms=3.0, host_ms=7.9)
    assert gpu_paced.gpu_bound and gpu_paced.gpu_ms == 10.3   # the median of many calls, not the one traced call
    assert not host_paced.gpu_bound and host_paced.gpu_ms == 3.0
    assert replace(gpu_paced, kernel_ms=None).gpu_ms == 10.3   # a CPU: ops run as they are called


def test_a_compiled_stage_is_its_own_compiled_step():
    c = predict_stage(_timings(), COMPILED)
    assert c.gpu_ms == pytest.approx(1.2 + 11 * 0.8) and c.kernels == 50 + 11 * 40
    assert c.host_ms == pytest.approx(490 * 0.7 / 140)   # the compiled step's own issue time, per kernel


def test_a_step_without_a_measured_issue_time_is_counted_at_the_enqueue_cost():
    """Older timings, or a part whose host time was not taken: its kernels at the host's enqueue cost."""
    t = PointTimings(tuple(replace(x, host_ms=0.0) for x in _step(BF16, (1.5, 100, 0), (2.5, 160, 0))), 10.0, 12)
    assert predict_stage(t, BF16).host_ms == pytest.approx((100 + 11 * 60) * 10 / 1000)


def test_a_step_not_timed_or_timed_faster_with_more_blocks_leaves_no_prediction():
    from bench_core.sweep.predict import MissingTiming
    with pytest.raises(MissingTiming, match="fp8-torchao"):
        predict_stage(_timings(), BF16.replace(precision="fp8-torchao"))
    with pytest.raises(MissingTiming, match="faster with two blocks"):
        predict_stage(_timings(), FP32.replace(optimizer="adam"))
    with pytest.raises(MissingTiming):   # a file from before whole steps were timed
        predict_stage(replace(_timings(), depth=0), FP32)


def test_a_compiled_stage_names_the_compiled_variants_of_what_torch_compile_traces():
    from bench_core.sweep.predict import breakdown_parts, stage_parts
    fp8 = BF16.replace(precision="fp8-torchao", compile="compile")
    assert dict(breakdown_parts(fp8)) == {
        Part.GEMM: "fp8+compile", Part.ATTENTION: "bf16", Part.NORM: "layernorm@bf16+compile",
        Part.ACTIVATION: "gelu@bf16+compile", Part.LOSS: "ce@bf16+compile", Part.OPTIMIZER: "adam-fused"}
    eager = dict(breakdown_parts(BF16.replace(precision="fp8-torchao")))
    assert eager[Part.GEMM] == "fp8" and eager[Part.NORM] == "layernorm@bf16"
    # a CUDA graph replays eager kernels: its parts are the eager ones
    assert dict(breakdown_parts(BF16.replace(compile="graphs"))) == dict(breakdown_parts(BF16))
    # the prediction's own parts: the whole step at one block and at two, named by the stage's key
    assert stage_parts(fp8)[:2] == [(Part.STEP_1, fp8.key), (Part.STEP_2, fp8.key)]


def test_the_timing_process_times_each_stage_in_its_familys_form():
    """A stage key leaves out llama's own SwiGLU (a plain lever), so a timing process that rebuilt stages from
    their keys timed GELU and left every llama point without a prediction ('activation swiglu@fp32 was not timed
    here', H200 call 20). The real `python -m bench_core.sweep.kernels` process, on a tiny llama on CPU."""
    from bench_core.sweep.runner import predict_in_process
    # wide enough that a block is a clear share of the step (at width 32 it was 0-40% of it, within the CPU's noise)
    base = BenchConfig(family="llama", depth=1, width=128, heads=4, seq_len=64, batch_size=2, vocab_size=512,
                       device="cpu")
    comparison = parse_comparison("adam-fused+rmsnorm+fp32,adam-fused+rmsnorm+bf16", "llama")
    points = grid((Axis("width", (128,)),), base)
    ((_, timings, missing),) = list(predict_in_process(points, comparison, "cpu", threading.Event(),
                                                       breakdown=True))
    assert missing == () and timings is not None
    assert timings.find(Part.ACTIVATION, "swiglu@fp32") and timings.find(Part.ACTIVATION, "swiglu@bf16")
    assert timings.find(Part.ACTIVATION, "gelu@fp32") is None
    assert all(timings.find(part, stage.key) for part in (Part.STEP_1, Part.STEP_2)
               for stage in (comparison.a, comparison.b))


@pytest.mark.skipif(not (shutil.which("c++") or shutil.which("g++")),
                    reason="inductor's CPU backend needs a C++ compiler (the probe reports compile unusable here)")
def test_a_compiled_stages_parts_are_timed_compiled():
    """A compiled stage's parts timed eagerly count its fused work unfused (FP8's casts above all). The real
    timing code on a tiny llama on CPU: its steps and each traced part of its breakdown run as torch.compile's
    graphs."""
    import torch

    from bench_core.sweep.kernels import time_point
    cfg = BenchConfig(family="llama", depth=1, width=32, heads=2, seq_len=16, batch_size=1, vocab_size=64,
                      device="cpu")
    eager = Stage("adam-fused", "rmsnorm", "bf16").for_family("llama")
    compiled = eager.replace(compile="compile")
    graphs = torch._dynamo.utils.counters["stats"]
    before = graphs["unique_graphs"]
    timings, missing = time_point(cfg, (compiled,), "cpu", warmup=1, repeats=2, breakdown=True)
    assert missing == ()
    assert {t.variant for t in timings.times} == {compiled.key, "bf16+compile", "bf16", "rmsnorm@bf16+compile",
                                                  "swiglu@bf16+compile", "ce@bf16+compile", "adam-fused"}
    # both shallow steps compiled as the worker compiles the model, and the GEMMs, norm, SwiGLU and loss each
    # traced (their backward graphs come with them)
    assert graphs["unique_graphs"] - before >= 6


def test_each_part_is_warmed_once_and_the_profiler_is_told_to_let_go(monkeypatch):
    """A part's warm-up runs once, before its host timing and its timed calls (it ran twice); and the timing
    process asks Kineto to tear CUPTI down after each profile, so no profile slows the next part's launches (the
    H200's enqueue probe read 14.3 us a kernel after profiles, 10.3 before any)."""
    from bench_core.sweep import kernels
    calls: list[int] = []

    def counted(*args, **kwargs):
        calls.append(0)
        index = len(calls)

        def fn() -> None:
            calls[index - 1] += 1
        return fn
    monkeypatch.setattr(kernels, "part_fn", counted)
    monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
    cfg = BenchConfig(depth=1, width=32, heads=2, seq_len=16, batch_size=1, vocab_size=64, device="cpu")
    timings, missing = kernels.time_point(cfg, (BF16,), "cpu", warmup=2, repeats=3, breakdown=True)
    assert missing == () and len(timings.times) == len(calls) == 8
    assert calls == [2 + 3 + 1] * 8        # warm-up, timed calls, the one profiled call
    assert os.environ["TEARDOWN_CUPTI"] == "1"
    # what the breakdown cost the point, on a clock that moves 1 s a reading: its six parts' seconds, not the steps'
    ticks = iter(range(1000))
    monkeypatch.setattr(kernels, "time", SimpleNamespace(perf_counter=lambda: float(next(ticks))))
    calls.clear()
    timings, _ = kernels.time_point(cfg, (BF16,), "cpu", warmup=2, repeats=3, breakdown=True)
    assert timings.breakdown_s == 6.0
    assert [t.wall_s for t in timings.times] == [1.0] * 8   # and each part keeps its own, the steps' too
    monkeypatch.setattr(kernels, "time", time)
    # without the breakdown asked for, only what the prediction is made of: the two shallow steps
    calls.clear()
    timings, _ = kernels.time_point(cfg, (BF16,), "cpu", warmup=2, repeats=3)
    assert [(t.part, t.variant) for t in timings.times] == [(Part.STEP_1, BF16.key), (Part.STEP_2, BF16.key)]
    assert calls == [2 + 3 + 1] * 2


def test_a_compiled_gemm_returns_its_products():
    """A compiled function's unused results are dropped: the block's GEMMs must be its outputs, or compiled
    GEMMs would time nothing (on CPU they read 0.03 ms against 0.37 eager before they were returned)."""
    import torch

    from bench_core.sweep.builders import gemm_fn
    cfg = BenchConfig(family="llama", depth=1, width=32, heads=2, seq_len=16, batch_size=2, vocab_size=64,
                      device="cpu")
    gen = torch.Generator().manual_seed(0)
    out = gemm_fn(torch, cfg, "cpu", "bf16", gen, compiled=False)()
    m, d = 32, 32
    # per layer: forward (M, N), dX (M, K), dW (N, K) in fp32
    assert [tuple(t.shape) for t in out[:3]] == [(m, 3 * d), (m, d), (3 * d, d)] and out[2].dtype == torch.float32
    assert len(out) == 3 * len(block_gemms(architecture(cfg))) == 15


def test_block_gemms_follow_the_family():
    gpt = BenchConfig(family="gpt", width=768, heads=12)
    llama = BenchConfig(family="llama", width=2048, heads=32)
    assert block_gemms(architecture(gpt)) == [(768, 2304), (768, 768), (768, 3072), (3072, 768)]
    assert block_gemms(architecture(llama)) == [(2048, 6144), (2048, 2048), (2048, 5632), (2048, 5632),
                                                (5632, 2048)]


# ---------------------------------------------------------------- the planner
def test_without_a_calibrated_error_points_run_nearest_one_first_and_unpredicted_first_of_all():
    cands = [plan.Candidate(0, 2.0), plan.Candidate(1, 1.02), plan.Candidate(2, None), plan.Candidate(3, 0.5),
             plan.Candidate(4, 0.9)]
    assert plan.order(cands, None) == [2, 1, 4, 0, 3]
    assert not any(plan.decided(c, None) for c in cands)


def test_a_calibrated_error_decides_the_far_points():
    assert plan.calibrated_error([0.1]) is None
    error = plan.calibrated_error([0.1, -0.1])
    assert error == pytest.approx(0.1)
    far, near = plan.Candidate(0, 2.0, 1.9, 2.1), plan.Candidate(1, 1.1, 1.05, 1.15)
    spread = (math.log(2.1) - math.log(1.9)) / (2 * 1.96)
    assert plan.doubt(far, error) == pytest.approx(math.log(2.0) / math.sqrt(spread ** 2 + 0.01))
    assert plan.decided(far, error) and not plan.decided(near, error)


def test_the_budget_stops_the_next_point_when_a_typical_point_no_longer_fits():
    cands = [plan.Candidate(0, 1.1), plan.Candidate(1, 3.0)]
    assert plan.next_point(cands, None, 1.0, []) == 0          # the first point's cost is unknown: it runs
    assert plan.next_point(cands, None, 20.0, [30.0]) is None   # 30 s a point, 20 s left
    assert plan.next_point(cands, None, 40.0, [30.0]) == 0
    assert plan.next_point(cands, None, None, [30.0] * 50) == 0   # no budget: every point runs
    assert plan.next_point([], None, None, []) is None
    assert plan.eta_s(3, 50.0, [30.0]) == 50.0 and plan.eta_s(3, None, [30.0]) == 90.0


# ---------------------------------------------------------------- the runner, with fake kernels and runs
def _optimizer_timings(a_ms, b_ms):
    """adam's step a_ms, adam-fused's b_ms: the predicted speedup of adam-fused over adam is a_ms / b_ms."""
    return step_timings({"adam+layernorm+fp32": a_ms, "adam-fused+layernorm+fp32": b_ms})


def _spec(budget=None, widths=(64, 128, 256, 512)):
    base = BenchConfig(depth=1, width=64, heads=2, seq_len=16, batch_size=2, vocab_size=128, device="cpu")
    return SweepSpec(parse_comparison("adam+layernorm+fp32,adam-fused+layernorm+fp32", "gpt"), base,
                     (Axis("width", widths),), budget)


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _fake_run(speedups, predicted, clock, cost_s=60.0, measured=None):
    def predict_points(points, comparison, device, cancel):
        for p in points:
            yield p.index, _optimizer_timings(predicted[p.index], 1.0), ()

    def measure_point(cfg, comparison, probe, hooks):
        clock.t += cost_s
        index = (64, 128, 256, 512).index(cfg.width)
        if measured is not None:
            measured.append(index)
        s = speedups[index]
        return PointMeasurement(Status.OK, None, s, s / 1.05, s * 1.05, "across 3 processes", 10.0 * s, 10.0,
                                "gpu-bound", 100.0, 80.0, cost_s)
    return predict_points, measure_point


def test_the_budget_measures_the_points_in_doubt_and_keeps_the_rest_predicted():
    clock, measured = _Clock(), []
    predicted = [0.5, 0.95, 1.3, 2.5]          # point 1 is nearest ×1.00, then point 2
    fake_predict, fake_measure = _fake_run([0.55, 0.97, 1.2, 2.4], predicted, clock, measured=measured)
    result = run_sweep(_spec(budget=150.0), [*_points(_spec())], NO_GPU,
                       SweepHooks(clock=clock, predict_points=fake_predict, measure_point=fake_measure))
    assert measured == [1, 2]                 # 60 s each: a third would not fit in the 30 s left
    assert [p.source for p in result.points] == [Source.PREDICTED, Source.MEASURED, Source.MEASURED,
                                                 Source.PREDICTED]
    assert result.status == Status.DONE and "2 points kept their prediction" in " ".join(result.notes)
    assert result.points[1].prediction_error == pytest.approx(0.97 / 0.95 - 1)
    assert prediction_error(result) == pytest.approx(math.expm1(math.sqrt(
        (math.log(0.97 / 0.95) ** 2 + math.log(1.2 / 1.3) ** 2) / 2)))
    assert result.points[2].measurement.peak_change == pytest.approx(-0.2)
    # each stage's step time, predicted (adam: the predicted figure, adam-fused: 1 ms) against measured (10·s, 10)
    assert result.points[1].step_errors == pytest.approx((0.95 / 9.7 - 1, 1 / 10 - 1))
    assert result.points[0].step_errors is None        # predicted only
    assert result.points[1].prediction.a_gpu_ms == pytest.approx(0.95)   # the GPU's share, kept beside the step
    errors = [0.95 / 9.7 - 1, -0.9, 1.3 / 12 - 1, -0.9]
    steps = step_time_error(result)
    assert steps.points == 2 and steps.worst == pytest.approx(0.95 / 9.7 - 1)
    assert steps.rms == pytest.approx(math.expm1(math.sqrt(sum(math.log1p(e) ** 2 for e in errors) / 4)))
    assert "over both stages' steps at 2 GPU-bound points" in steps.text
    # the worst is the largest factor off, as the rms weighs it: never below the rms, and said as that factor
    assert math.exp(abs(math.log1p(steps.worst))) - 1 >= steps.rms
    assert f"worst {steps.worst:+.1%} (off by ×{1 / (1 + steps.worst):.2f}" in steps.text
    # a launch-bound point's time is the host's: it is not counted
    host = result.with_point(replace(result.points[2], measurement=replace(result.points[2].measurement,
                                                                            bound="launch-bound")))
    assert step_time_error(host).points == 1
    # and is stated apart, so the page's "worst" is never beaten by a figure further down its table
    launch = step_time_error(host, "launch-bound")
    assert launch.points == 1 and "over both stages' steps at 1 launch-bound point" in launch.text
    assert any(e.label.startswith("step-time prediction error at launch-bound") and e.text == launch.text
               for e in error_figures(host))
    assert not any("launch-bound" in e.label for e in error_figures(result))
    # every view words both errors from one place: the figures here, the reason where no point has both
    rms, step, _, _ = error_figures(result)
    assert rms.found and rms.text == f"{prediction_error(result):.1%}" and step.text == steps.text
    unmeasured = error_figures(replace(result, points=tuple(replace(p, measurement=None) for p in result.points)))
    assert [(e.found, e.text) for e in unmeasured] == [(False, "no point was both predicted and measured"),
                                                        (False, "no GPU-bound point was both predicted and "
                                                                "measured"),
                                                        (False, "no point was both predicted and measured"),
                                                        (False, "needs 3 measured points")]

    row = csv_rows(result)[1]
    assert row["a_step_error"] == pytest.approx(errors[0]) and row["measured_b_ms"] == 10.0
    # the shown table: the axis under its own name, then the answer
    shown = shown_rows(result)[1]
    assert list(shown)[:3] == ["width", "speedup (B over A)", "source"] and shown["width"] == 128
    # as text, the page's and the report's alike: a percent signed to one decimal, a missing figure "–"
    texts = shown_text_rows(result)
    assert texts[1]["width"] == "128" and texts[1]["A step error"] == f"{errors[0]:+.1%}"
    assert texts[0]["measured"] == "–" and texts[0]["speedup (B over A)"].startswith("×")
    (c,) = crossovers(result)                 # 0.97 at 128 (measured), 1.2 at 256 (measured)
    assert c.value == pytest.approx(math.exp(math.log(128) + (-math.log(0.97)) * math.log(2) /
                                             (math.log(1.2) - math.log(0.97))))


def test_a_step_error_splits_into_kernels_the_parts_miss_and_the_gpus_idle():
    """Predicted 100 ms (90 of kernels) against a measured 110 ms step with 100 ms of kernels: the step is 9.1%
    short, of which the kernels 10% short; the rest is time the GPU idled."""
    pred = PointPrediction(2.0, 1.9, 2.1, 100.0, 50.0, "gpu-bound", PointTimings((), 0.0), 90.0, 45.0, 30.0, 40.0)
    meas = PointMeasurement(Status.OK, speedup=2.0, low=1.9, high=2.1, a_ms=110.0, b_ms=55.0, bound="gpu-bound",
                            a_kernel_ms=100.0, b_kernel_ms=50.0, a_host_ms=25.0, b_host_ms=50.0)
    point = PointResult(0, (("width", 64),), pred, None, meas)
    assert point.step_errors == pytest.approx((100 / 110 - 1, 50 / 55 - 1))
    assert point.kernel_errors == pytest.approx((-0.1, -0.1))
    assert replace(point, prediction=replace(pred, a_gpu_ms=None)).kernel_errors is None   # an older file
    assert replace(point, measurement=replace(meas, b_kernel_ms=None)).kernel_errors is None  # CPU: no trace
    sweep = SweepResult(_spec(), "cuda", "GPU", (point,))
    row = csv_rows(from_json(to_json(sweep)))[0]
    assert row["a_kernel_error"] == pytest.approx(-0.1) and row["measured_b_kernel_ms"] == 50.0
    # the host's share: predicted 30 and 40 ms to issue a step against 25 and 50 measured
    assert point.host_errors == pytest.approx((0.2, -0.2))
    assert row["a_host_error"] == pytest.approx(0.2) and row["measured_b_host_ms"] == 50.0
    assert replace(point, prediction=replace(pred, b_host_ms=None)).host_errors is None   # an older file, or a CPU
    # and its peak memory: predicted 900 and 700 MiB against 1,000 measured for each
    peaks = replace(point, prediction=replace(pred, a_peak_mib=900.0, b_peak_mib=700.0),
                    measurement=replace(meas, a_peak_mib=1000.0, b_peak_mib=1000.0))
    assert peaks.peak_errors == pytest.approx((-0.1, -0.3))
    assert csv_rows(replace(sweep, points=(peaks,)))[0]["b_peak_error"] == pytest.approx(-0.3)


def test_how_often_the_predictions_own_interval_held_the_measurement():
    """Hand-set: width 128 predicted ×1.10 (1.00–1.20), measured ×1.00, on its edge: held; width 512 predicted
    ×2.20 (2.00–2.40), measured ×2.60: missed, and named. The sweep's widened interval is not the judge: it is
    fitted to these very errors."""
    from bench_core.sweep.errors import coverage
    result = _result()
    last = result.points[3]
    result = result.with_point(replace(last, measurement=replace(last.measurement, speedup=2.6)))
    assert [p.paired.inside if p.paired else None for p in result.points] == [None, True, None, False]
    held = coverage(result)
    assert held.found and held.text == "1 of 2 measured points; missed at width=512: measured ×2.60, predicted " \
        "×2.20 (2.00–2.40)"
    assert held in error_figures(result)
    # a prediction kept without spread (call 29's launch-bound ones) holds nothing: not counted, said apart
    second = result.points[1]
    flat = result.with_point(replace(second, prediction=replace(second.prediction, low=1.1, high=1.1)))
    assert coverage(flat).text == "0 of 1 measured points (1 more predicted without an interval, not counted); " \
        "missed at width=512: measured ×2.60, predicted ×2.20 (2.00–2.40)"
    last = flat.points[3]
    both = flat.with_point(replace(last, prediction=replace(last.prediction, low=2.2, high=2.2)))
    assert not coverage(both).found and coverage(both).text == "no prediction had an interval"


def test_the_shown_interval_is_judged_out_of_sample():
    """Hand-computed: log errors -4.3%, +22.3%, 0 (measured ×2.00, ×1.00, ×0.50 against predicted ×2.088 (1.9–2.3),
    ×0.80 (0.7–0.9), ×0.50 (0.4–0.6)). Each point widened by the other two's rms: ×2.00 inside 1.51–2.89, ×1.00
    outside 0.70–0.92, ×0.50 inside 0.34–0.73. Two points leave one with a single other: too few to estimate."""
    from bench_core.sweep.errors import held_out_count
    from bench_core.sweep.records import Paired
    pairs = [Paired(2.0, 95 / 45.5, 1.9, 2.3), Paired(1.0, 0.8, 0.7, 0.9), Paired(0.5, 0.5, 0.4, 0.6)]
    assert held_out_count(pairs) == (2, 3)
    assert held_out_count(pairs[:2]) is None
    # widened by all three errors, the ×1.00 point would be judged by an interval its own 22% error had widened
    assert plan.widened(plan.Candidate(1, 0.8, 0.7, 0.9), plan.calibrated_error(
        [math.log(p.measured / p.predicted) for p in pairs]))[1] > 1.0


def test_a_breakdown_part_not_timed_leaves_the_prediction_and_a_step_not_timed_takes_it():
    """The prediction is made of the stages' whole steps: a part of the breakdown that could not run here (a vendor's
    kernel under compile, say) does not take it away; a step that could not run does, and the note says why."""
    steps = _optimizer_timings(2.0, 1.0)
    no_b = PointTimings(tuple(t for t in steps.times if t.variant != "adam-fused+layernorm+fp32"), 0.0, 1)
    timed = {64: (steps, ("gemm fp8: RuntimeError: no FP8 here",)), 128: (no_b, ("step@1 adam-fused+layernorm+fp32: "
                                                                               "OutOfMemoryError",))}

    clock = _Clock()

    def predict_points(points, comparison, device, cancel):
        for p in points:
            clock.t += 1.0   # predicting spends the whole budget: nothing runs end to end
            yield (p.index, *timed[p.config.width])
    result = run_sweep(_spec(budget=2.0, widths=(64, 128)), _points(_spec(widths=(64, 128))), NO_GPU,
                       SweepHooks(clock=clock, predict_points=predict_points,
                                  measure_point=lambda *a: pytest.fail("a spent budget measures nothing")))
    first, second = result.points
    assert first.prediction.speedup == pytest.approx(2.0) and first.prediction_note is None
    assert second.prediction is None
    assert "was not timed here" in second.prediction_note and "OutOfMemoryError" in second.prediction_note
    # what predicting took is kept with the sweep (1 s a point here), so a file holds its own cost
    assert result.predict_s == pytest.approx(2.0) and "predicting took 2 s" in result.notes
    assert from_json(to_json(result)).predict_s == pytest.approx(2.0)
    # with the breakdown asked for, the note says what it cost: 1.25 s the first point's parts took
    timed = {w: (replace(t, breakdown_s=1.25) if t else t, m) for w, (t, m) in timed.items()}
    with_parts = run_sweep(replace(_spec(budget=2.0, widths=(64, 128)), breakdown=True),
                           _points(_spec(widths=(64, 128))), NO_GPU,
                           SweepHooks(clock=clock, predict_points=predict_points,
                                      measure_point=lambda *a: pytest.fail("a spent budget measures nothing")))
    # the point whose prediction fell (its step not timed) took its timings with it: only the first is counted
    assert "predicting took 2 s, 1 s of it timing the breakdown's parts" in with_parts.notes
    assert from_json(to_json(with_parts)).points[0].prediction.timings.breakdown_s == 1.25
    # the full-depth steps' cost is said once, at the point they were timed, though every point keeps them (call
    # 34's FP8 prediction took 404 s and no file said where)
    full = KernelTime(Part.STEP_FULL, "adam+layernorm+fp32", 5.0, 5.0, 5.0, 10, 1, wall_s=0.75)
    first_t, first_m = timed[64]
    timed[64] = (replace(first_t, times=(*first_t.times, full), full_here=True), first_m)
    timed[128] = (replace(timed[128][0], times=(*timed[128][0].times, full)), timed[128][1])
    with_full = run_sweep(_spec(budget=2.0, widths=(64, 128)), _points(_spec(widths=(64, 128))), NO_GPU,
                          SweepHooks(clock=clock, predict_points=predict_points,
                                     measure_point=lambda *a: pytest.fail("a spent budget measures nothing")))
    assert "predicting took 2 s, 1 s of it timing the full-depth steps (once a sweep)" in with_full.notes
    assert from_json(to_json(with_full)).points[0].prediction.timings.find(Part.STEP_FULL, full.variant).wall_s == 0.75


def test_the_budget_holds_while_predicting_between_points_and_inside_one():
    """A 2 s budget and points that take 1 s each to predict: the timing stops after two, and the other two are
    neither predicted nor measured, each saying why. A point whose timing outlasts the budget is stopped inside it:
    its timing process is told to stop (here a fake that waits to be told)."""
    clock, closed = _Clock(), []

    def predict_points(points, comparison, device, cancel):
        try:
            for p in points:
                clock.t += 1.0
                yield p.index, _optimizer_timings(2.0, 1.0), ()
        finally:
            closed.append(True)   # the timing process is killed when its points stop being read
    result = run_sweep(_spec(budget=2.0), _points(_spec()), NO_GPU, SweepHooks(
        clock=clock, predict_points=predict_points, measure_point=lambda *a: pytest.fail("the budget is spent")))
    assert [p.prediction is not None for p in result.points] == [True, True, False, False] and closed
    assert {p.prediction_note for p in result.points[2:]} == {"the 2 s budget ran out while predicting"}
    assert "0 of 4 points measured end to end, 2 predicted only, 2 not run (the budget ran out)" in result.notes
    assert "2 points kept their prediction: the 2 s budget was spent predicting, before any point could run" in \
        result.notes

    def stuck(points, comparison, device, cancel):
        clock.t += 5.0                     # the first point's compile outlasts the budget...
        assert cancel.wait(10), "the budget's watcher never stopped the timing"
        return                             # ...and the process, told to stop, yields nothing more
        yield
    clock.t = 0.0
    stopped = run_sweep(_spec(budget=2.0), _points(_spec()), NO_GPU, SweepHooks(
        clock=clock, predict_points=stuck, measure_point=lambda *a: pytest.fail("the budget is spent")))
    assert all(p.prediction is None and "budget ran out while predicting" in p.prediction_note
               for p in stopped.points) and stopped.status == Status.DONE


def test_a_point_the_budget_left_unpredicted_says_so_once():
    """The terminal read "not predicted: not predicted: the 2 s budget ran out while predicting": the note is the
    reason alone, under "why not predicted" on the page and after "not predicted:" in the terminal; a file saved
    with the old note reads the same."""
    clock = _Clock()

    def predict_points(points, comparison, device, cancel):
        for p in points:
            clock.t += 1.0
            yield p.index, _optimizer_timings(2.0, 1.0), ()
    result = run_sweep(_spec(budget=2.0), _points(_spec()), NO_GPU, SweepHooks(
        clock=clock, predict_points=predict_points, measure_point=lambda *a: pytest.fail("the budget is spent")))
    lines = [line for line in summary_lines(result) if "budget ran out while predicting" in line]
    assert len(lines) == 2 and all(line.count("not predicted") == 1 for line in lines), lines
    assert all(line.endswith("; not predicted: the 2 s budget ran out while predicting") for line in lines)
    assert {r["why not predicted"] for r in shown_text_rows(result)[2:]} == {
        "the 2 s budget ran out while predicting"}
    old = json.loads(to_json(result))
    for point in old["points"][2:]:
        point["prediction_note"] = "not predicted: the 2 s budget ran out while predicting"
    assert summary_lines(from_json(json.dumps(old).encode())) == summary_lines(result)


def test_without_a_budget_every_point_runs_and_a_cancel_keeps_what_finished():
    clock = _Clock()
    fake_predict, fake_measure = _fake_run([0.55, 0.97, 1.2, 2.4], [0.5, 0.95, 1.3, 2.5], clock)
    everything = run_sweep(_spec(), _points(_spec()), NO_GPU,
                           SweepHooks(clock=clock, predict_points=fake_predict, measure_point=fake_measure))
    assert all(p.measured for p in everything.points)
    cancel = threading.Event()

    def measure_then_cancel(cfg, comparison, probe, hooks):
        cancel.set()                           # the user cancels while the first point runs; it still finishes
        return fake_measure(cfg, comparison, probe, hooks)
    cancelled = run_sweep(_spec(), _points(_spec()), NO_GPU,
                          SweepHooks(clock=clock, cancel=cancel, predict_points=fake_predict,
                                     measure_point=measure_then_cancel))
    assert cancelled.status == Status.CANCELLED and sum(p.measured for p in cancelled.points) == 1


def _points(spec):
    return grid(spec.axes, spec.base)


# ---------------------------------------------------------------- records, storage, import, figures
def _result(two_axes=False):
    spec = _spec()
    if two_axes:
        spec = SweepSpec(spec.comparison, spec.base, (Axis("width", (64, 128)), Axis("batch_size", (2, 4))), None)
    points = []
    for i, point in enumerate(grid(spec.axes, spec.base)):
        s = 0.5 * (i + 1)
        pred = PointPrediction(s * 1.1, s, s * 1.2, 2.0, 2.0 / s, "gpu-bound", _optimizer_timings(s, 1.0))
        meas = PointMeasurement(Status.OK, None, s, s * 0.9, s * 1.1, "within one process", 20.0, 20.0 / s,
                                "unknown", 100.0, 70.0, 12.5) if i % 2 else None
        points.append(PointResult(point.index, point.values, pred, None, meas))
    return SweepResult(spec, "cpu", "CPU", tuple(points), Status.DONE, notes=("a note",))


def test_json_round_trip_and_csv_rows():
    result = _result()
    text = to_json(result)
    assert is_sweep_json(text) and not is_sweep_json('{"stages": []}') and not is_sweep_json(bytes([255]))
    assert from_json(text) == result
    rows = csv_rows(result)
    assert [r["source"] for r in rows] == ["predicted", "measured", "predicted", "measured"]
    assert rows[1]["speedup"] == 1.0 and rows[1]["predicted_speedup"] == pytest.approx(1.1)
    assert rows[1]["peak_mem_change"] == pytest.approx(-0.3) and rows[0]["peak_mem_change"] is None
    assert rows[1]["memory_source"] == "measured" and rows[1]["predicted_peak_mem_change"] is None


def test_store_saves_lists_loads_and_never_overwrites_on_import(tmp_path):
    store = SweepStore(str(tmp_path / "h.sqlite3"))
    result = _result()
    store.save(result)
    assert store.load(result.sweep_id) == result
    (row,) = store.list_sweeps()
    assert row["points"] == 4 and row["measured"] == 2 and row["status"] == "done" and row["imported"] == 0
    assert row["crossover"] and row["crossover"].startswith("pays above width")
    new_id, renamed = store.import_sweep(result)
    assert renamed and new_id != result.sweep_id and store.load(new_id).imported
    assert len(store.list_sweeps()) == 2


def test_a_sweep_is_listed_by_what_b_changes_and_an_older_history_gains_that_column(tmp_path):
    """A phone's picker cut "adam-fused+layernorm+bf16 vs apex-fusedadam+apex-fusedln+bf16" before the lever; the
    list carries B's own levers where they differ. A history from before has the column added, empty for its rows."""
    assert parse_comparison("adam-fused+layernorm+bf16,apex-fusedadam+apex-fusedln+bf16", "gpt").change == \
        "apex-fusedadam+apex-fusedln"
    assert parse_comparison("fp8-torchao", "llama").change == "fp8-torchao"
    assert parse_comparison("liger-flce", "gpt").change == "liger-flce"
    import sqlite3
    path = str(tmp_path / "old.sqlite3")
    with sqlite3.connect(path) as db:   # the table's first version, one sweep in it
        db.executescript(SCHEMA_BEFORE_CHANGE)
        db.execute("INSERT INTO sweeps VALUES ('old', '2026-12-04', 'B vs A', 'gpt', 'width 64–128', 'cpu', 'CPU', "
                   "'done', 2, 2, NULL, NULL, 0, '{}')")
    store, new = SweepStore(path), _result()
    store.save(new)
    assert {r["sweep_id"]: r["change"] for r in store.list_sweeps()} == {"old": None, new.sweep_id: "adam-fused"}


SCHEMA_BEFORE_CHANGE = """CREATE TABLE sweeps (
    sweep_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, compare TEXT NOT NULL, family TEXT, axes TEXT,
    device TEXT, gpu TEXT, status TEXT NOT NULL, points INTEGER, measured INTEGER, crossover TEXT,
    prediction_error REAL, imported INTEGER NOT NULL DEFAULT 0, result_json TEXT NOT NULL);"""


def test_the_run_history_and_the_sweeps_share_one_database(tmp_path):
    from bench_core.results.store import Store
    path = str(tmp_path / "h.sqlite3")
    Store(path)
    SweepStore(path).save(_result())
    assert Store(path).list_runs() == [] and len(SweepStore(path).list_sweeps()) == 1


def test_the_line_draws_measured_filled_predicted_hollow_and_the_crossover_band():
    fig = sweep_figure(_result())
    by_name = {t.name: t for t in fig.data}
    assert by_name["measured end to end"].marker.symbol == "circle"
    assert by_name["predicted from kernels"].marker.symbol == "circle-open"
    assert list(by_name["measured end to end"].x) == [128, 512]
    (cross,) = [t for t in fig.data if t.name.startswith("crossover")]
    c = crossovers(_result())[0]
    assert list(cross.x) == [pytest.approx(c.value)]
    bands = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(bands) == 1 and bands[0].x0 == pytest.approx(c.low if c.low is not None else 64)
    # the crossing's sentence in its hover, a short legend entry (the sentence ran off a phone's legend)
    assert cross.name == "crossover, its interval shaded" and cross.hovertext[0] == f"crossover: {c.text}"
    # speedups as ratios, on a log axis; ticks at the swept values, not a log axis's "2 3 … 9"
    assert fig.layout.yaxis.type == "log" and list(fig.layout.xaxis.tickvals) == [64, 128, 256, 512]
    # named as speedups, each once (plotly's own read "2, 10, 5, 2, 1"), over the points' intervals (×0.5 to ×2.2)
    assert list(fig.layout.yaxis.ticktext) == ["×0.5", "×0.7", "×1", "×1.4", "×2"]
    # a narrow range gets a finer ladder (a CPU line from ×1.02 to ×1.07 had one tick), thinned with ×1 kept
    from bench_core.sweep.figures import MAX_TICKS, speedup_ticks
    assert speedup_ticks(1.0, 1.1) == [1.0, 1.05, 1.1] and speedup_ticks(0.97, 1.06) == [0.98, 1.0, 1.02, 1.04, 1.06]
    assert all(3 <= len(speedup_ticks(lo, hi)) <= MAX_TICKS and (not lo <= 1 <= hi or 1.0 in speedup_ticks(lo, hi))
               for lo, hi in [(0.05, 9.0), (0.3, 3.0), (0.59, 1.03), (1.2, 1.5), (0.98, 1.07)])
    assert fig.layout.xaxis.range[0] < math.log10(64) and fig.layout.xaxis.range[1] > math.log10(512)


def test_sweeps_of_one_comparison_from_two_gpus_share_a_line_chart():
    from dataclasses import replace

    from bench_core.sweep.compare import same_map
    from bench_core.sweep.figures import sweep_line
    when = "2026-12-05T04:07:12+00:00"
    h200, a100 = replace(_result(), gpu="NVIDIA H200", sweep_id="aaaaaa000000", created_at=when), \
        replace(_result(), gpu="NVIDIA A100", sweep_id="bbbbbb000000", created_at=when)
    other = replace(h200, spec=replace(h200.spec, comparison=parse_comparison("adam-fused", "gpt")))
    assert same_map(h200, a100) and not same_map(h200, other)
    fig = sweep_line([h200, a100])
    names = [t.name for t in fig.data]
    assert "NVIDIA H200 12-05 04:07 (aaaaaa) measured end to end" in names
    assert "NVIDIA A100 12-05 04:07 (bbbbbb) measured end to end" in names
    colors = {t.name.split(" 12-05")[0]: t.marker.color for t in fig.data if t.name.endswith("end to end")}
    assert colors["NVIDIA H200"] != colors["NVIDIA A100"]
    assert "NVIDIA H200 and NVIDIA A100" in plain_title(fig)


def test_two_axes_draw_a_heatmap_centred_on_one():
    fig = sweep_figure(_result(two_axes=True))
    heat = fig.data[0]
    assert heat.type == "heatmap" and heat.zmid == 0 and heat.zmin == -heat.zmax
    # a value has one colour, measured or predicted (a paler predicted ×0.59 read milder than a measured ×0.63);
    # a predicted cell says "≈" and has a dotted edge, and only it
    assert heat.z[0][1] == pytest.approx(math.log2(1.0)) and heat.text[0][1] == "×1.00"      # measured at (128, 2)
    assert heat.z[0][0] == pytest.approx(math.log2(0.5 * 1.1)) and heat.text[0][0] == "≈×0.55"  # predicted (64, 2)
    edged = {((s.x0 + s.x1) / 2, (s.y0 + s.y1) / 2) for s in fig.layout.shapes if s.line.dash == "dot"}
    marked = {(j, i) for i, row in enumerate(heat.text) for j, t in enumerate(row) if t.startswith("≈")}
    assert edged == marked and (0, 0) in marked and (1, 0) not in marked
    assert all(s.x1 - s.x0 < 1 for s in fig.layout.shapes if s.line.dash == "dot")   # neighbours' edges apart
    assert {t.name for t in fig.data[1:]} == {"measured end to end", "predicted from kernels (≈, dotted edge)"}
    # one evenly spaced cell a value (as numbers, batch 2 and 4 drew cells from 1 to 5), labelled with the value
    assert list(heat.x) == [0, 1] and list(fig.layout.xaxis.ticktext) == ["64", "128"]
    # the plot is the cells and nothing round them: the grey behind an empty cell framed them where padded
    assert list(fig.layout.xaxis.range) == [-0.5, 1.5] and fig.layout.margin.pad == 0
    # the colour bar across the top (upright at the side it halved a phone's plot), the x title under the ticks
    bar = heat.colorbar
    assert bar.orientation == "h" and bar.y == 1.0 and bar.yanchor == "bottom" and bar.title.text == "B over A"
    assert fig.layout.xaxis.title.text is None and [a.text for a in fig.layout.annotations] == ["width"]
    # each marker in its cell's corner, off the figure written at the centre
    measured = next(t for t in fig.data[1:] if t.name == "measured end to end")
    assert all(0 < abs(x - round(x)) < 0.5 for x in measured.x) and all(0 < abs(y - round(y)) < 0.5
                                                                       for y in measured.y)
    # measured a dark dot with a light edge, predicted a light diamond ringed dark: each shows on the deepest and
    # the palest cell alike, and the shapes differ where a phone's small marker blurs the fill
    predicted = next(t for t in fig.data[1:] if t.name == "predicted from kernels (≈, dotted edge)")
    assert measured.marker.color == "#212121" and measured.marker.line.color == "white"
    assert predicted.marker.color == "white" and predicted.marker.line.color == "#212121"
    assert measured.marker.symbol != predicted.marker.symbol
    assert fig.layout.showlegend   # the markers' key, even where every point has one source
    # the legend at the foot has its own rows under the axis title, one an entry (a phone's worst case): in the
    # sweep's own layout it sat over the x axis's title
    assert fig.layout.margin.b >= LAYOUT["margin"]["b"] + 2 * LEGEND_ROW_PX
    # the colour bar reads in speedups, and each cell's hover carries its interval and bound
    assert "×1" in heat.colorbar.ticktext
    assert heat.hovertext[0][1].startswith("width=128, batch_size=2<br>×1.00 (0.90–1.10)")
    # a prediction without spread (an older file's launch-bound one) says so rather than "(0.55–0.55)"
    # (and no point measured, so no error to widen it by)
    bare = _result(two_axes=True)
    bare = replace(bare, points=tuple(replace(p, measurement=None) for p in bare.points))
    first = bare.points[0]
    flat = bare.with_point(replace(first, prediction=replace(first.prediction, low=0.55, high=0.55)))
    assert "×0.55 (no spread measured), predicted" in sweep_figure(flat).data[0].hovertext[0][0]


def test_a_predicted_points_interval_takes_in_the_error_the_measured_points_showed():
    """_result: points 2 and 4 measured x1.0 and x2.0 against x1.1 and x2.2 predicted, so predictions land 10% off
    (log error ln 1.1 each, its rms ln 1.1). Point 1's prediction x0.55 (0.50-0.60): its own spread as a standard
    error, (ln 0.6 - ln 0.5) / (2 x 1.96), combined with ln 1.1, then 1.96 of that each side."""
    result = _result()
    first = result.points[0]
    sigma = math.sqrt(((math.log(0.6) - math.log(0.5)) / (2 * 1.96)) ** 2 + math.log(1.1) ** 2)
    wide = (0.55, 0.55 * math.exp(-1.96 * sigma), 0.55 * math.exp(1.96 * sigma))
    assert result.best_estimate(first) == pytest.approx(wide)          # about 0.45-0.68, not 0.50-0.60
    assert first.estimate == pytest.approx((0.55, 0.5, 0.6))          # the prediction's own, kept
    assert result.best_estimate(result.points[1]) == result.points[1].estimate   # a measured point: its own
    row = csv_rows(result)[0]
    assert (row["speedup_low"], row["predicted_low"]) == (pytest.approx(wide[1]), pytest.approx(0.5))
    # one measured point does not yet say how far predictions land: the prediction's own interval
    one = result.with_point(replace(result.points[3], measurement=None))
    assert one.best_estimate(first) == pytest.approx((0.55, 0.5, 0.6))


def test_the_peak_memory_map_draws_measured_points_and_predicted_ones_marked_as_such():
    """Points 2 and 4 measured -30%; point 1 predicted -10% from its shallow steps' peaks (point 3's were not
    measured: no figure). The measured figure is the one shown where a point has both."""
    from bench_core.sweep.figures import peak_memory_map
    result = _result()
    first, second = result.points[:2]
    result = result.with_point(replace(first, prediction=replace(first.prediction, a_peak_mib=100.0, b_peak_mib=90.0)))
    result = result.with_point(replace(second, prediction=replace(second.prediction, a_peak_mib=100.0,
                                                                  b_peak_mib=99.0)))
    line, measured, predicted = peak_memory_map(result).data
    assert list(line.x) == [64, 128, 512] and list(line.y) == pytest.approx([-10.0, -30.0, -30.0])
    assert measured.name == "measured end to end" and list(measured.x) == [128, 512]
    assert predicted.name == "predicted from kernels" and list(predicted.x) == [64]
    assert predicted.marker.symbol == "circle-open" and "peak memory -10.0% (predicted)" in predicted.hovertext[0]
    heat = peak_memory_map(_result(two_axes=True)).data
    assert heat[0].type == "heatmap" and heat[0].z[0][0] is None and heat[0].z[0][1] == pytest.approx(-30.0)
    assert heat[0].text[0][0] == "–" and heat[0].text[0][1] == "-30.0%"   # an empty cell said so, not "%"
    # the memory leads its hover, and an empty cell shows the grey behind it, not white (which read as 0%)
    assert heat[0].hovertext[0][1].split("<br>")[:2] == ["width=128, batch_size=2", "peak memory -30.0% (measured)"]
    assert peak_memory_map(_result(two_axes=True)).layout.plot_bgcolor not in (None, "white", "#ffffff")
    assert [t.name for t in heat[1:]] == ["measured end to end"]


def test_a_point_without_a_peak_memory_figure_says_why():
    """Call 29's FLCE prediction file (no point run, predictions from before peaks were predicted) has no memory
    map at all; the page said nothing of it. Each reason, hand-set: a CPU, a failed run, an old prediction, a
    second block read lower than the first."""
    from bench_core.sweep.memory import memory_gaps, why_no_memory
    result = _result()   # a CPU sweep: none of its points has a peak figure from a prediction
    first, second, third, fourth = result.points
    assert why_no_memory(result, third).one.startswith("it was predicted only, and on a CPU a prediction holds no")
    gpu = replace(result, device="cuda")
    assert why_no_memory(gpu, replace(second, measurement=replace(second.measurement, status=Status.OOM))).one == \
        "its run end to end ended without a figure (oom)"
    assert why_no_memory(gpu, replace(first, prediction=None)).one == "it was not predicted"
    assert why_no_memory(gpu, first).one.startswith("its prediction holds no peak memory")
    peaked = replace(first.prediction.timings, times=tuple(
        replace(t, peak_mib=100.0 if t.part == Part.STEP_1 else 90.0) for t in first.prediction.timings.times))
    assert why_no_memory(gpu, replace(first, prediction=replace(first.prediction, timings=peaked))).one.startswith(
        "its predicted peaks are noise: a stage's two-block step peaked lower")
    # the sentence counts them: points 2 and 4 measured a peak, 1 and 3 have none
    assert memory_gaps(gpu) == "2 of 4 points have no peak-memory figure: their predictions hold no peak memory " \
        "(the sweep's file is from before peaks were predicted)"
    unmeasured = replace(gpu, points=tuple(replace(p, measurement=None) for p in gpu.points))
    assert memory_gaps(unmeasured).startswith("none of the 4 points has a peak-memory figure: ")
    assert memory_gaps(replace(gpu, points=(second, fourth))) is None


def test_a_predicted_peak_is_the_one_block_peak_plus_what_each_further_block_adds():
    """Hand-set: 1,000 MiB with one block, 1,150 with two: at 12 blocks 1,000 + 11 x 150; a second block read
    lower is noise (no figure), and so is a peak not measured (a CPU)."""
    from bench_core.sweep.predict import peak_in_depth
    one, two = (KernelTime(part, "k", 1.0, 1.0, 1.0, 1, 1, peak_mib=mib)
                for part, mib in ((Part.STEP_1, 1000.0), (Part.STEP_2, 1150.0)))
    assert peak_in_depth(one, two, 11) == pytest.approx(2650.0)
    assert peak_in_depth(two, one, 11) is None and peak_in_depth(replace(one, peak_mib=0.0), two, 11) is None
    timings = PointTimings(tuple(replace(t, variant=FP32.key) for t in (one, two)), 0.0, 12)
    assert predict_stage(timings, FP32).peak_mib == pytest.approx(2650.0)


def test_the_html_report_holds_the_map_and_each_point(tmp_path):
    from bench_core.sweep.report import write_html
    path = tmp_path / "s.html"
    write_html(_result(), str(path))
    text = path.read_text()
    assert "fig-sweep" in text and "fig-memory" in text and "crossover: pays above width" in text
    assert text.count("<tr>") == 5
    # the peak-memory change as the page shows it, a percentage (it read -0.300)
    assert "<td>-30.0%</td>" in text and "<td>-0.300</td>" not in text
    # a speedup as the map writes it (the table read 0.6828 beside the map's ×0.68), a step time in ms
    assert "<td>×1.00</td>" in text and "<td>20.00</td>" in text
    # a point without a peak figure says why (two of these CPU points only have their prediction)
    assert "<p>Peak memory: 2 of 4 points have no peak-memory figure: they were predicted only, and on a CPU" in text
    # the title may break after each "+" on a phone, not inside a lever's name
    assert "<h1>B adam-fused+<wbr>layernorm+<wbr>fp32 vs A adam+<wbr>layernorm+<wbr>fp32 on CPU</h1>" in text
