"""The host's time at full depth: each stage's full-depth step timed once a depth at the sweep's least-work point
(STEP_FULL), kept in every point at that depth, and scaled by each point's kernels; hand-set timings with known
answers, and the timing process's orchestration with its timers replaced (the timing itself needs a GPU)."""
import io
import json
import sys
from dataclasses import replace

import pytest

from bench_core.config.bench_config import BenchConfig
from bench_core.levers.stage import Stage
from bench_core.sweep.core.predict import predict, predict_stage
from bench_core.sweep.core.spec import Axis, SweepSpec, parse_comparison
from bench_core.sweep.timing import process as kernels
from bench_core.sweep.timing.timings import KernelTime, Part, PointTimings

FP32 = Stage("adam-fused", "layernorm", "fp32")
BF16 = Stage("adam-fused", "layernorm", "bf16")


def _steps(stage, host, host_range=(0.0, 0.0)):
    """One block: 1.5 ms of kernels, 100 kernels; two: 2.5 ms, 160. The host as given, the same at both."""
    return tuple(KernelTime(part, stage.key, ms, ms, ms, k, 1, kernel_ms=ms, host_ms=host,
                            host_low_ms=host_range[0], host_high_ms=host_range[1])
                 for part, ms, k in ((Part.STEP_1, 1.5, 100), (Part.STEP_2, 2.5, 160)))


def test_the_full_depth_steps_host_is_scaled_by_the_kernels_each_point_launches():
    """The full-depth step, timed at the least-work point: 700 kernels issued in 21 ms (fastest round 18, slowest
    30). This point launches 100 + 11 x 60 = 760: the host 21 x 760 / 700; the shallow steps' 4 ms each would have
    said 760 x 8 / 260 = 23.4 ms."""
    full = KernelTime(Part.STEP_FULL, BF16.key, 21.0, 21.0, 21.0, 700, 1, kernel_ms=5.0, host_ms=21.0,
                      host_low_ms=18.0, host_high_ms=30.0)
    timings = PointTimings(_steps(BF16, 4.0) + (full,), 10.0, 12)
    b = predict_stage(timings, BF16)
    scale = 760 / 700
    assert (b.host_low_ms, b.host_ms, b.host_high_ms) == pytest.approx((18 * scale, 21 * scale, 30 * scale))
    assert b.gpu_ms == pytest.approx(12.5) and b.bound.value == "launch-bound"
    # without it (a CPU, an older file, a full step that could not run) the shallow steps' rate
    assert predict_stage(PointTimings(_steps(BF16, 4.0), 10.0, 12), BF16).host_ms == pytest.approx(760 * 8 / 260)
    # another stage's full step is not this one's
    other = replace(full, variant=FP32.key)
    assert predict_stage(PointTimings(_steps(BF16, 4.0) + (other,), 10.0, 12), BF16).host_ms == \
        pytest.approx(760 * 8 / 260)


def test_a_launch_bound_stage_against_a_gpu_bound_one_at_full_depth():
    """A: FP32 steps whose 12 blocks take 25 ms of GPU, issued in 9 ms; B: BF16, issued in 21 ms against 12.5 of
    kernels. The speedup is A's GPU time over B's host time."""
    fp32 = tuple(replace(t, ms=ms, p10_ms=ms, p90_ms=ms, kernel_ms=ms)
                 for t, ms in zip(_steps(FP32, 1.0), (3.0, 5.0), strict=True))
    full = [KernelTime(Part.STEP_FULL, s.key, 1.0, 1.0, 1.0, 760, 1, kernel_ms=1.0, host_ms=h)
            for s, h in ((FP32, 9.0), (BF16, 21.0))]
    p = predict(PointTimings(fp32 + _steps(BF16, 4.0) + tuple(full), 10.0, 12), FP32, BF16)
    assert p.a.step_ms == pytest.approx(25.0) and p.b.step_ms == pytest.approx(21.0)
    assert p.speedup == pytest.approx(25.0 / 21.0)


def test_the_full_step_is_taken_at_the_least_work_point_of_its_depth():
    base = BenchConfig(depth=12, width=768, heads=12, seq_len=1024, batch_size=8, vocab_size=50304)
    grid = [replace(base, batch_size=b, width=w, heads=w // 64) for w in (768, 1280) for b in (1, 8)]
    deeper = replace(base, depth=24, batch_size=16)
    assert kernels.probe_config(grid + [deeper], grid[3]) == grid[0]   # width 768, batch 1
    assert kernels.probe_config(grid + [deeper], deeper) == deeper     # its own depth's only point


def test_the_timing_process_takes_each_full_step_once_a_depth_and_keeps_it_in_every_point(monkeypatch, capsys):
    """On a GPU (its timers replaced here): two points at depth 2 share one full step per stage, taken at the
    smaller; a point at depth 4 gets its own. A full step that fails is named, and the point keeps its timings."""
    taken = []

    def fake_point(cfg, stages, device, breakdown=False):
        return PointTimings((), 0.0, cfg.depth), ()

    def fake_full(cfg, stage, device):
        taken.append((stage.key, cfg.depth, cfg.width))
        if stage.key == BF16.key and cfg.depth == 4:
            return "step@full: OutOfMemoryError"
        return KernelTime(Part.STEP_FULL, stage.key, 1.0, 1.0, 1.0, 10 * cfg.depth, 1, kernel_ms=1.0, host_ms=2.0)
    monkeypatch.setattr(kernels, "time_point", fake_point)
    monkeypatch.setattr(kernels, "time_full_step", fake_full)
    base = BenchConfig(depth=2, width=64, heads=2, seq_len=16, batch_size=2, vocab_size=128)
    configs = [replace(base, width=128, heads=4), base, replace(base, depth=4)]
    request = {"device": "cuda", "a": FP32.key, "b": BF16.key, "configs": [c.to_dict() for c in configs]}
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(request)))
    assert kernels.main() == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert taken == [(FP32.key, 2, 64), (BF16.key, 2, 64), (FP32.key, 4, 64), (BF16.key, 4, 64)]
    full = [[t for t in PointTimings.from_dict(line["timings"]).times if t.part == Part.STEP_FULL] for line in lines]
    assert [len(f) for f in full] == [2, 2, 1] and full[0] == full[1]
    # taken at the second point (the narrower): the depth extrapolation can be checked there, and at depth 4's own
    assert [line["timings"]["full_here"] for line in lines] == [False, True, True]
    assert lines[2]["missing"] == ["step@full: OutOfMemoryError"]
    # a CPU takes none
    taken.clear()
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps({**request, "device": "cpu"})))
    assert kernels.main() == 0 and taken == []


def test_where_the_full_step_was_timed_it_checks_the_depth_extrapolation():
    """One block 1.5 ms, 100 kernels, 1,000 MiB; two 2.5 ms, 160, 1,150: at 12 blocks 12.5 ms, 760 kernels,
    2,650 MiB. The full step timed at this very point: 12.0 ms (the GPU set its pace), 770 kernels, 2,700 MiB."""
    from bench_core.config.bench_config import BenchConfig as Config
    from bench_core.results.records import Status
    from bench_core.sweep.core.errors import error_figures
    from bench_core.sweep.core.predict import depth_check
    from bench_core.sweep.core.records import PointPrediction, PointResult, SweepResult
    from bench_core.sweep.core.spec import Axis, SweepSpec, grid, parse_comparison
    steps = tuple(replace(t, peak_mib=mib) for t, mib in zip(_steps(BF16, 1.0), (1000.0, 1150.0), strict=True))
    full = KernelTime(Part.STEP_FULL, BF16.key, 12.0, 11.9, 12.1, 770, 1, kernel_ms=12.3, host_ms=9.0,
                      peak_mib=2700.0)
    here = PointTimings(steps + (full,), 10.0, 12, full_here=True)
    check = depth_check(here, BF16)
    assert check is not None and check.stage == BF16.key
    assert (check.gpu_error, check.kernels_error, check.peak_error) == pytest.approx(
        (12.5 / 12.0 - 1, 760 / 770 - 1, 2650 / 2700 - 1))
    assert check.text == "GPU time +4.2%, kernels -1.3%, peak memory -1.9%"
    assert depth_check(replace(here, full_here=False), BF16) is None   # the full step was taken at another point
    assert depth_check(here, FP32) is None                              # no full step of this stage
    # the sweep says it beside its prediction errors, naming the point
    spec = SweepSpec(parse_comparison(f"{FP32.key},{BF16.key}", "gpt"), Config(depth=12, device="cuda"),
                     (Axis("batch_size", (1, 2)),), None)
    first, second = grid(spec.axes, spec.base)
    pred = PointPrediction(1.0, 0.9, 1.1, 1.0, 1.0, "gpu-bound", here)
    result = SweepResult(spec, "cuda", "GPU", (PointResult(first.index, first.values, pred),
                                               PointResult(second.index, second.values,
                                                           replace(pred, timings=replace(here, full_here=False)))),
                         Status.DONE)
    figures = error_figures(result)
    assert len(figures) == 6
    assert figures[4].label == "depth extrapolation against the full step timed at batch_size=1"
    assert figures[4].text == "B: GPU time +4.2%, kernels -1.3%, peak memory -1.9%"
    # the host's enqueue cost as each point was predicted, which every launch-bound prediction moves with
    assert figures[5].text == "10.0 µs over 2 points"
    slower = replace(result, points=(result.points[0], replace(result.points[1], prediction=replace(
        pred, timings=replace(here, full_here=False, launch_us=14.5)))))
    assert error_figures(slower)[5].text == "10.0–14.5 µs over 2 points"
    on_cpu = replace(result, points=tuple(replace(p, prediction=replace(pred, timings=replace(here, launch_us=0.0)))
                                          for p in result.points))
    assert not any("enqueue" in e.label for e in error_figures(on_cpu))


def test_a_block_is_read_in_one_measure_where_one_shallow_step_is_gpu_bound_and_the_other_not():
    """One block: 10 ms of kernels issued in 11 ms (host-bound, wall 11); two: 13 ms of kernels issued in 12 ms
    (GPU-bound, wall 14). A block adds 13 - 10 = 3 ms of kernels: 12 blocks take 10 + 11 x 3 = 43 ms of kernels,
    and their 760 kernels the gaps the GPU-bound step showed, 1 ms over 160 kernels. Read in each step's own
    measure it added 14 - 10 = 4 ms, and 11 blocks of the wall's gaps: 54 ms. Both GPU-bound, the wall."""
    one = KernelTime(Part.STEP_1, BF16.key, 11.0, 11.0, 11.0, 100, 1, kernel_ms=10.0, host_ms=11.0)
    two = KernelTime(Part.STEP_2, BF16.key, 14.0, 14.0, 14.0, 160, 1, kernel_ms=13.0, host_ms=12.0)
    assert predict_stage(PointTimings((one, two), 10.0, 12), BF16).gpu_ms == pytest.approx(43.0 + 760 / 160)
    both = (replace(one, host_ms=9.0), two)   # now both GPU-bound: the walls, 11 + 11 x 3
    assert predict_stage(PointTimings(both, 10.0, 12), BF16).gpu_ms == pytest.approx(44.0)


def test_a_host_bound_stage_read_from_its_kernels_gets_the_gpus_gaps_between_them():
    """The GPU's gap between kernels, read where a step is GPU-bound: A's shallow steps take 3 and 5 ms of wall over
    2.9 and 4.84 ms of kernels, 100 and 160 kernels (1.0 us a kernel each). B's are host-bound (4 ms to issue 1.5
    and 2.5 ms of kernels), so B's GPU time is read from its kernels: 12.5 ms at 12 blocks, plus its 760 kernels'
    gaps, 0.76 ms. Without them a kernel sum stood for a wall: Liger FLCE's stage ran 3.7-6.9% short on an H100."""
    fp32 = tuple(replace(t, ms=ms, p10_ms=ms, p90_ms=ms, kernel_ms=k, host_ms=1.0)
                 for t, ms, k in zip(_steps(FP32, 1.0), (3.0, 5.0), (2.9, 4.84), strict=True))
    timings = PointTimings(fp32 + _steps(BF16, 4.0), 10.0, 12)
    assert timings.dispatch_gap_us == pytest.approx(1.0)
    b = predict_stage(timings, BF16)
    assert b.gpu_ms == pytest.approx(12.5 + 0.76)
    assert (b.gpu_low_ms, b.gpu_high_ms) == pytest.approx((13.26, 13.26))
    # A's walls hold their gaps already: nothing added
    assert predict_stage(timings, FP32).gpu_ms == pytest.approx(3.0 + 11 * 2.0)
    # no GPU-bound step at the point: no gap to read, the kernels alone
    assert PointTimings(_steps(BF16, 4.0), 10.0, 12).dispatch_gap_us == 0.0
    assert predict_stage(PointTimings(_steps(BF16, 4.0), 10.0, 12), BF16).gpu_ms == pytest.approx(12.5)


def test_a_point_stopped_mid_way_says_which_of_its_parts_were_timed_and_how_long_each_took(tmp_path, monkeypatch):
    """A cold FP8 point cut by its 110 s budget and said only that: which part took the time was lost with
    the process. The timing process now says each part on stderr as it finishes; stopped mid-point, the sweep keeps
    those lines in the point's note. Here a stand-in for the timing process that times one part, then hangs."""
    import threading

    from bench_core.sweep.core import runner
    from bench_core.sweep.core.spec import grid
    from bench_core.sweep.timing.messages import cut_point, part_line, point_line
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\ncat > /dev/null\n"
                    f"echo '{point_line(0)}' >&2\necho '{part_line('step@1', FP32.key, 34.0)}' >&2\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setattr(runner.sys, "executable", str(fake))
    spec = SweepSpec(parse_comparison(f"{FP32.key},{BF16.key}", "gpt"), BenchConfig(depth=2, device="cpu"),
                     (Axis("batch_size", (1, 2)),), None)
    cancel = threading.Event()
    threading.Timer(1.5, cancel.set).start()   # the budget's watcher, as the runner sets it
    got = list(runner.predict_in_process(grid(spec.axes, spec.base), spec.comparison, "cpu", cancel))
    assert got == [(0, None, (f"stopped while its parts were timed; timed so far: step@1 {FP32.key}: 34.0 s",))]
    # stopped between points: nothing is said of a point that finished, or of one not begun
    assert cut_point([point_line(0), part_line("step@1", "a", 1.0)], {0}) is None
    assert cut_point([point_line(0), point_line(1)], {0}) == (1, "stopped while its parts were timed, before the "
                                                                 "first of them finished")
