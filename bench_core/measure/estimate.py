"""How long a run will take here, before it runs: model FLOPs over a measured matrix-multiply rate.

An estimate, said to be one: the rate is the probe's measured GEMM ceiling (CUDA) — the datasheet peak until a run
has measured it — or a small fp32 matmul timed on this CPU, at an assumed 50% of it for a whole training step, plus
each stage's fixed costs. `rate_source` says which rate it used.
"""
from __future__ import annotations

from bench_core.config.bench_config import WARMUP_MIN_S, BenchConfig
from bench_core.machine.probe import Probe
from bench_core.measure.metrics import flops_per_step, peak_tflops

STEP_EFFICIENCY = 0.5      # a training step reaches about half the GEMM rate (measured: 40-66% on the H200)
STAGE_OVERHEAD_S = 3.0     # process start not hidden, profiling, trace reading
PROFILE_STEPS = 5
WARN_ABOVE_S = 180.0       # the page warns before a run longer than this


def _measured_tflops(probe: Probe, precision: str) -> float | None:
    if probe.ceilings is None:
        return None
    return probe.ceilings.bf16_tflops if precision in ("bf16", "fp16") else probe.ceilings.fp32_tflops


def rate_source(probe: Probe, device: str) -> str:
    """Which rate the estimate divides by, in words: the ceilings may not be measured yet on a new machine."""
    if device != "cuda":
        return "this CPU's measured matmul rate"
    if probe.ceilings is not None:
        return "this GPU's measured GEMM ceiling"
    return "the GPU's datasheet peak (its GEMM ceiling is not measured yet: the first run measures it)"


def step_seconds(cfg: BenchConfig, probe: Probe, device: str, precision: str) -> float | None:
    if device == "cuda":
        tflops = _measured_tflops(probe, precision) or peak_tflops(probe.gpu_name, precision)[0]
        rate = tflops * 1e12 if tflops else None
    else:
        gflops = (probe.raw.get("cpu") or {}).get("matmul_gflops")
        rate = gflops * 1e9 if gflops else None
    return flops_per_step(cfg) / (rate * STEP_EFFICIENCY) if rate else None


def run_seconds(cfg: BenchConfig, probe: Probe, device: str, precisions: list[str]) -> float | None:
    """Estimated wall time of a run whose runnable stages have these precisions; None without a rate."""
    total = 0.0
    for precision in precisions:
        step = step_seconds(cfg, probe, device, precision)
        if step is None:
            return None
        warmup = max(cfg.warmup * step, WARMUP_MIN_S)
        total += cfg.repeats * (warmup + cfg.iters * step + STAGE_OVERHEAD_S) + PROFILE_STEPS * step
    return total
