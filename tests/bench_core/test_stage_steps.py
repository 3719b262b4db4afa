"""Each stage's measured step time, cached by a finished run and read by the next estimate at the same shape; the
fixed cost a process adds beyond the steps the estimate counts apart (the warm-up as it ran, the profiled steps)."""
import dataclasses

import pytest

from bench_core.config.bench_config import BenchConfig
from bench_core.levers.stage import Stage
from bench_core.machine import stage_costs
from bench_core.machine.probe import Probe, is_current
from bench_core.machine.probe_collect import CPU_RATE_METHOD
from bench_core.measure.estimate import PROFILE_STEPS, process_overhead_s
from bench_core.measure.warmup import WarmupTrace
from bench_core.results.eta import StepBasis, eta, run_estimate
from bench_core.results.phase import measured, save_costs
from bench_core.results.records import Status
from bench_core.run.runner import new_run

CFG = BenchConfig(depth=2, width=128, heads=4, seq_len=64, batch_size=4, vocab_size=512, warmup=3, iters=10,
                  device="cpu")
FP32, BF16 = Stage("adam-fused", "layernorm", "fp32"), Stage("adam-fused", "layernorm", "bf16")
PROBE = Probe.from_dict({"cuda": {"available": False}, "bf16": {"cpu": True}, "adam_fused": {"cpu": True},
                        "cpu": {"capability": "AVX2", "bf16_flags": [], "matmul_gflops": 100.0,
                                "bf16_matmul_gflops": 3.0}})
FIXED_S = 2.0


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))


def finished(cfg, steps_s, warmup_s):
    """A run whose stages each ran one process: FIXED_S, then its warm-up as recorded, timed and profiled steps."""
    run = new_run(cfg, [FP32, BF16], PROBE, "custom")
    for index, step in enumerate(steps_s):
        times = (step * 1e3,) * cfg.iters
        wall = FIXED_S + warmup_s[index] + cfg.iters * step + PROFILE_STEPS * step
        run = run.with_stage(dataclasses.replace(
            run.stages[index], status=Status.OK, times_ms=times, rounds=(cfg.iters,), wall_s=wall,
            warmups=(WarmupTrace(steps=max(cfg.warmup, round(warmup_s[index] / step)), seconds=warmup_s[index]),)))
    return run


def test_the_fixed_cost_leaves_out_the_warm_up_as_it_ran():
    # a 10 ms step warms up for 0.25 s (WARMUP_MIN_S), not its 3 steps' 30 ms: counting 3 steps would put 0.22 s
    # of warm-up into the fixed cost
    fixed, compile_ = measured(finished(CFG, (0.01, 0.2), (0.25, 0.6)))
    assert fixed == pytest.approx(FIXED_S) and compile_ is None


def test_the_next_estimate_takes_each_stages_step_as_measured_here():
    steps = (0.015, 0.21)
    save_costs(finished(CFG, steps, (0.25, 0.6)))
    costs = stage_costs.load("cpu")
    fresh = new_run(CFG, [FP32, BF16], PROBE, "custom")
    got = eta(fresh, costs)
    assert [r.basis for r in got.stages] == [StepBasis.CACHED] * 2
    assert [r.step_s for r in got.stages] == pytest.approx(list(steps))
    assert got.seconds == pytest.approx(sum(CFG.iters * s + process_overhead_s(CFG, s, FIXED_S) for s in steps))
    assert "measured on this machine by an earlier run" in run_estimate(fresh, costs).text()
    # another shape does the work of another step: estimated, not taken from this one
    wider = dataclasses.replace(CFG, width=256)
    assert {r.basis for r in eta(new_run(wider, [FP32, BF16], PROBE, "custom"), costs).stages} == {StepBasis.ESTIMATE}


def test_a_probe_whose_cpu_rates_were_measured_another_way_is_measured_again():
    assert is_current({"cpu": {"matmul_gflops": 17.0, "rate_method": CPU_RATE_METHOD}})
    assert not is_current({"cpu": {"matmul_gflops": 17.0}})      # a plain a @ b, timed beside a starting worker
    assert not is_current({"cpu": {"rate_method": CPU_RATE_METHOD}, "error": "probe failed"})
