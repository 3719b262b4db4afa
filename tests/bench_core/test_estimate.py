import pytest

from bench_core.config.bench_config import WARMUP_MIN_S, BenchConfig
from bench_core.machine.probe import Probe
from bench_core.measure.estimate import STAGE_OVERHEAD_S, run_seconds, step_seconds
from bench_core.measure.metrics import flops_per_step


def test_cpu_estimate_by_hand():
    cfg = BenchConfig(depth=1, width=4, heads=1, seq_len=2, batch_size=1, vocab_size=8, warmup=1, iters=10,
                      repeats=1)
    probe = Probe.from_dict({"cpu": {"matmul_gflops": 1.0}})
    step = flops_per_step(cfg) / (1e9 * 0.5)  # 3600 FLOPs at half of 1 GFLOP/s
    assert step_seconds(cfg, probe, "cpu", "fp32") == pytest.approx(step)
    # warm-up is at least WARMUP_MIN_S (2 s unless overridden); then 10 timed steps, the overhead, 5 profiled steps
    expected = WARMUP_MIN_S + 10 * step + STAGE_OVERHEAD_S + 5 * step
    assert run_seconds(cfg, probe, "cpu", ["fp32"]) == pytest.approx(expected)


def test_no_rate_no_estimate():
    assert run_seconds(BenchConfig(), Probe.from_dict({}), "cpu", ["fp32"]) is None


def test_gpt2_small_seed_on_a_2_core_cpu_is_long():
    probe = Probe.from_dict({"cpu": {"matmul_gflops": 50.0}})
    cfg = BenchConfig(warmup=10, iters=30)  # gpt2-small: ~0.8 TFLOP a step
    assert run_seconds(cfg, probe, "cpu", ["fp32"]) > 600


def test_gpu_estimate_says_datasheet_until_the_ceilings_are_measured():
    from bench_core.machine.ceilings import Ceilings
    from bench_core.measure.estimate import rate_source
    from bench_core.measure.metrics import peak_tflops
    cfg = BenchConfig()
    probe = Probe.from_dict({"cuda": {"available": True, "name": "NVIDIA H200"}})
    datasheet = peak_tflops("NVIDIA H200", "bf16")[0]
    assert datasheet and "datasheet" in rate_source(probe, "cuda") and "not measured yet" in rate_source(probe, "cuda")
    assert step_seconds(cfg, probe, "cuda", "bf16") == pytest.approx(flops_per_step(cfg) / (datasheet * 1e12 * 0.5))
    measured = probe.with_ceilings(Ceilings(datasheet / 2, 40.0, 4000.0, "m", "t", "NVIDIA H200"))
    assert rate_source(measured, "cuda") == "this GPU's measured GEMM ceiling"
    assert step_seconds(cfg, measured, "cuda", "bf16") == pytest.approx(2 * step_seconds(cfg, probe, "cuda", "bf16"))
