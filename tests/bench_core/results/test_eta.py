"""A running job's time left: each remaining stage from its own precision's estimate, refined by measured steps."""
import dataclasses

import pytest

from bench_core.config.bench_config import BenchConfig
from bench_core.levers.stage import Stage
from bench_core.machine.ceilings import Ceilings
from bench_core.machine.probe import Probe
from bench_core.measure.estimate import process_overhead_s, step_estimate
from bench_core.results.eta import StepBasis, eta
from bench_core.results.records import Status
from bench_core.run.runner import new_run

CFG = BenchConfig(warmup=2, iters=10, repeats=1, device="cuda")
# measured bf16 15× the fp32 ceiling: a BF16 stage given the FP32 stage's step time would be 15× off
PROBE = Probe.from_dict({"cuda": {"available": True, "name": "NVIDIA H200"}}).with_ceilings(
    Ceilings(bf16_tflops=600.0, fp32_tflops=40.0, copy_gbps=4000.0, method="m", measured_at="t",
             device_name="NVIDIA H200"))
FP32, BF16, BF16_FUSED = Stage(), Stage(precision="bf16"), Stage("adam-fused", precision="bf16")


def est(stage: Stage) -> float:
    seconds = step_estimate(CFG, PROBE, "cuda", stage.precision).seconds
    assert seconds is not None
    return seconds


def finished(run, index: int, step_s: float, overhead_s: float = 4.0):
    stage = run.stages[index]
    times = (step_s * 1e3,) * CFG.iters
    return run.with_stage(dataclasses.replace(stage, status=Status.OK, times_ms=times, rounds=(CFG.iters,),
                                              wall_s=overhead_s + sum(times) / 1e3))


def test_nothing_measured_yet_each_stage_its_own_estimate():
    run = new_run(CFG, [FP32, BF16], PROBE, "custom")
    got = eta(run)
    assert [r.basis for r in got.stages] == [StepBasis.ESTIMATE] * 2
    assert got.seconds == pytest.approx(sum(CFG.iters * est(s) + process_overhead_s(CFG, est(s)) for s in (FP32, BF16)))


def test_the_bf16_stage_after_fp32_takes_the_bf16_ceiling_not_the_last_step():
    run = finished(new_run(CFG, [FP32, BF16], PROBE, "custom"), 0, 1.2 * est(FP32))
    row = eta(run).stages[0]
    assert row.index == 1 and row.basis is StepBasis.ANY_PRECISION
    assert row.estimate.tflops == 600.0
    # the bf16 estimate scaled by the FP32 stage's measured/estimated ratio (1.2) ...
    assert row.step_s == pytest.approx(1.2 * est(BF16))
    assert eta(run).seconds == pytest.approx(CFG.iters * 1.2 * est(BF16) + 4.0)
    # ... 15× below the last stage's step time, which "last step × steps left" would have taken
    assert row.step_s == pytest.approx(1.2 * est(FP32) / 15)


def test_refined_by_finished_stages_of_the_same_precision_first():
    run = finished(new_run(CFG, [FP32, BF16, BF16_FUSED], PROBE, "custom"), 0, 1.2 * est(FP32))
    before = eta(run).stages[-1]
    assert before.basis is StepBasis.ANY_PRECISION and before.step_s == pytest.approx(1.2 * est(BF16_FUSED))
    run = finished(run, 1, 3.0 * est(BF16))   # bf16 reaches a smaller share of its ceiling than fp32 did
    after = eta(run).stages[-1]
    assert after.basis is StepBasis.SAME_PRECISION and after.step_s == pytest.approx(3.0 * est(BF16_FUSED))


def test_a_running_stage_goes_on_at_its_own_median_and_rounds_left_add_processes():
    cfg = dataclasses.replace(CFG, repeats=2)
    run = new_run(cfg, [FP32, BF16], PROBE, "custom")
    run = run.with_stage(dataclasses.replace(run.stages[1], status=Status.RUNNING, times_ms=(5.0,) * 4))
    row = eta(run).stages[1]
    assert row.basis is StepBasis.MEASURED and row.step_s == pytest.approx(0.005)
    # 16 of its 20 steps left, and one process (round 2) not started yet
    assert row.remaining_s == pytest.approx(16 * 0.005 + process_overhead_s(cfg, 0.005))


def test_no_rate_no_guess_across_precisions():
    """A CPU without a measured matmul rate: a stage of another precision than any timed one is unknown."""
    cpu = Probe.from_dict({"cuda": {"available": False}})
    cfg = dataclasses.replace(CFG, device="cpu")
    run = new_run(cfg, [FP32, BF16], cpu, "custom")
    run = run.with_stage(dataclasses.replace(run.stages[0], status=Status.RUNNING, times_ms=(10.0,)))
    assert eta(run).seconds is None
    run = new_run(cfg, [FP32, Stage("adam-fused")], cpu, "custom")
    run = finished(run, 0, 0.010)
    assert eta(run).stages[0].basis is StepBasis.SAME_PRECISION_MEASURED
