"""The predictor's arithmetic (sweep.core.predict) against hand-computed cases: a stage's shallow steps extrapolated
in depth, its host, its bound, the speedup and its interval, the peak memory in depth."""
from dataclasses import replace

import pytest

from bench_core.levers.stage import Stage
from bench_core.sweep.core.predict import predict, predict_stage
from bench_core.sweep.timing.timings import KernelTime, Part, PointTimings

FP32 = Stage("adam-fused", "layernorm", "fp32")
BF16 = Stage("adam-fused", "layernorm", "bf16")
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
    from bench_core.sweep.core.predict import MissingTiming
    with pytest.raises(MissingTiming, match="fp8-torchao"):
        predict_stage(_timings(), BF16.replace(precision="fp8-torchao"))
    with pytest.raises(MissingTiming, match="faster with two blocks"):
        predict_stage(_timings(), FP32.replace(optimizer="adam"))
    with pytest.raises(MissingTiming):   # a file from before whole steps were timed
        predict_stage(replace(_timings(), depth=0), FP32)


def test_a_predicted_peak_is_the_one_block_peak_plus_what_each_further_block_adds():
    """Hand-set: 1,000 MiB with one block, 1,150 with two: at 12 blocks 1,000 + 11 x 150; a second block read
    lower is noise (no figure), and so is a peak not measured (a CPU)."""
    from bench_core.sweep.core.predict import peak_in_depth
    one, two = (KernelTime(part, "k", 1.0, 1.0, 1.0, 1, 1, peak_mib=mib)
                for part, mib in ((Part.STEP_1, 1000.0), (Part.STEP_2, 1150.0)))
    assert peak_in_depth(one, two, 11) == pytest.approx(2650.0)
    assert peak_in_depth(two, one, 11) is None and peak_in_depth(replace(one, peak_mib=0.0), two, 11) is None
    timings = PointTimings(tuple(replace(t, variant=FP32.key) for t in (one, two)), 0.0, 12)
    assert predict_stage(timings, FP32).peak_mib == pytest.approx(2650.0)
