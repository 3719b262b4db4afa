import pytest

from bench_core.config.bench_config import WARMUP_MIN_S, BenchConfig
from bench_core.machine.ceilings import Ceilings
from bench_core.machine.probe import Probe
from bench_core.measure.estimate import (
    STAGE_OVERHEAD_S,
    RateSource,
    process_overhead_s,
    rate_sources,
    run_seconds,
    step_estimate,
    step_seconds,
)
from bench_core.measure.metrics import flops_per_step, peak_tflops


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


H200 = Probe.from_dict({"cuda": {"available": True, "name": "NVIDIA H200"}})
# measured ceilings well below the datasheet's, so an estimate that took the datasheet figure would show
MEASURED = Ceilings(bf16_tflops=600.0, fp32_tflops=40.0, copy_gbps=4000.0, method="m", measured_at="t",
                    device_name="NVIDIA H200")


def test_gpu_estimate_says_datasheet_until_the_ceilings_are_measured():
    cfg = BenchConfig()
    datasheet = peak_tflops("NVIDIA H200", "bf16")[0]
    est = step_estimate(cfg, H200, "cuda", "bf16")
    assert est.source is RateSource.DATASHEET and est.tflops == datasheet
    assert "datasheet" in est.label and "not a rate measured on this machine" in est.label
    assert "not measured yet" in est.label and "measured GEMM ceiling" not in est.label
    assert est.seconds == pytest.approx(flops_per_step(cfg) / (datasheet * 1e12 * 0.5))
    measured = step_estimate(cfg, H200.with_ceilings(MEASURED), "cuda", "bf16")
    assert measured.source is RateSource.MEASURED_CEILING
    assert measured.label == "this GPU's measured bf16 GEMM ceiling (600.0 TFLOP/s)"
    assert measured.seconds == pytest.approx(flops_per_step(cfg) / (600.0 * 1e12 * 0.5))


@pytest.mark.parametrize(("lever", "gemm"), [("fp32", "fp32"), ("tf32", "tf32"), ("bf16", "bf16"), ("fp16", "fp16"),
                                             ("fp8-torchao", "fp8"), ("te-fp8", "fp8")])
def test_each_precision_divides_by_its_own_ceiling(lever, gemm):
    """TF32 is not the TF32-off fp32 ceiling, FP8 not fp32's: each stage its own precision's rate."""
    cfg = BenchConfig()
    est = step_estimate(cfg, H200.with_ceilings(MEASURED), "cuda", lever)
    own = {"fp32": MEASURED.fp32_tflops, "bf16": MEASURED.bf16_tflops}.get(gemm) or peak_tflops("NVIDIA H200", gemm)[0]
    assert est.gemm == gemm and est.tflops == own
    assert est.seconds == pytest.approx(flops_per_step(cfg) / (own * 1e12 * 0.5))
    # measured where the ceilings measure that precision, else the datasheet's, said so
    assert (est.source is RateSource.MEASURED_CEILING) == (gemm in ("fp32", "bf16"))
    if est.source is RateSource.DATASHEET:
        assert est.label.startswith(f"the datasheet's dense {gemm} peak") and "measure fp32 and bf16 only" in est.label


def test_the_run_estimate_names_each_precisions_rate():
    cfg = BenchConfig()
    probe = H200.with_ceilings(MEASURED)
    text = rate_sources(cfg, probe, "cuda", ["fp32", "bf16", "bf16", "fp8-torchao"])
    assert text.count("measured fp32 GEMM ceiling") == 1 and "measured bf16 GEMM ceiling" in text
    assert "fp8: the datasheet's dense fp8 peak (1,979.0 TFLOP/s)" in text
    steps = [step_estimate(cfg, probe, "cuda", p).seconds for p in ("fp32", "bf16", "fp8-torchao")]
    assert run_seconds(cfg, probe, "cuda", ["fp32", "bf16", "fp8-torchao"]) == pytest.approx(
        sum(cfg.repeats * (cfg.iters * s + process_overhead_s(cfg, s)) for s in steps))


def test_a_gpu_without_a_peak_or_ceiling_has_no_estimate():
    probe = Probe.from_dict({"cuda": {"available": True, "name": "NVIDIA A100-SXM4-80GB"}})
    est = step_estimate(BenchConfig(), probe, "cuda", "fp8-torchao")
    assert est.seconds is None and "no dense fp8 peak" in est.label


def test_eager_torchao_fp8_is_estimated_at_the_bf16_rate_and_compiled_at_fp8():
    """Eager, torchao's scaling casts cost what its FP8 GEMMs gain (x0.47 of native BF16 on HF Llama-3.2-1B), so
    at the FP8 rate the estimate that orders a recommendation's candidates put eager FP8 first, and a budget measured
    nothing else. Compiled, and Transformer Engine's own kernels, keep the FP8 rate."""
    from bench_core.levers.stage import Stage
    from bench_core.recommend.predict import EstimatePredictor
    from bench_core.recommend.space import Candidate
    eager = Stage("adam", "layernorm", "fp8-torchao")
    compiled = Stage("adam", "layernorm", "fp8-torchao", compile="compile")
    te, bf16 = Stage("adam", "layernorm", "te-fp8"), Stage("adam", "layernorm", "bf16")
    assert (eager.estimated_as, compiled.estimated_as, te.estimated_as) == ("bf16", "fp8-torchao", "te-fp8")
    cands = [Candidate(s, 8) for s in (eager, compiled, bf16)]
    predicted = EstimatePredictor(BenchConfig(), H200.with_ceilings(MEASURED), "cuda")(cands)
    assert predicted[cands[1]].step_ms < predicted[cands[0]].step_ms == predicted[cands[2]].step_ms
