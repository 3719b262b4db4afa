"""Timing statistics, model FLOPs and MFU. Pure Python: no torch, no numpy."""
from __future__ import annotations

import math
import statistics
from typing import Sequence

from .config import BenchConfig, param_count

NOISE_IQR_FRACTION = 0.10

# Dense (no sparsity) peak TFLOP/s per precision, from the vendors' datasheets.
# Matched by substring against the GPU name, first match wins, so specific names come first.
PEAK_TFLOPS: list[tuple[str, dict[str, float]]] = [
    ("H200", {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),
    ("H100 PCIe", {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0}),
    ("H100", {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),
    ("A100", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}),
    ("L40S", {"fp32": 91.6, "tf32": 183.0, "bf16": 362.0, "fp16": 362.0}),
    ("RTX 4090", {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2}),
    ("A10", {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0}),
    ("V100", {"fp32": 15.7, "fp16": 125.0}),
]


def timing_stats(times_ms: Sequence[float]) -> dict[str, float | bool | None]:
    """Median, p10, p90, mean, std and a noise flag (IQR over 10% of the median)."""
    n = len(times_ms)
    if n == 0:
        return {"median_ms": None, "p10_ms": None, "p90_ms": None, "mean_ms": None, "std_ms": None,
                "iqr_ms": None, "noisy": None, "n": 0}
    data = sorted(times_ms)
    if n == 1:
        p10 = p90 = q1 = q3 = data[0]
    else:
        deciles = statistics.quantiles(data, n=10, method="inclusive")
        quartiles = statistics.quantiles(data, n=4, method="inclusive")
        p10, p90, q1, q3 = deciles[0], deciles[-1], quartiles[0], quartiles[-1]
    median = statistics.median(data)
    return {"median_ms": median, "p10_ms": p10, "p90_ms": p90, "mean_ms": statistics.fmean(data),
            "std_ms": statistics.stdev(data) if n > 1 else 0.0, "iqr_ms": q3 - q1,
            "noisy": (q3 - q1) > NOISE_IQR_FRACTION * median, "n": n}


def flops_per_step(cfg: BenchConfig) -> float:
    """Training FLOPs of one step: 6·N·tokens + 12·L·d·T·tokens (PaLM appendix B, as in nanoGPT).

    N counts every weight that takes part in a matmul: all parameters but the position embedding
    (the token embedding counts, as the tied LM head).
    """
    n = param_count(cfg) - cfg.seq_len * cfg.width
    tokens = cfg.tokens_per_step
    return 6.0 * n * tokens + 12.0 * cfg.depth * cfg.width * cfg.seq_len * tokens


def peak_tflops(gpu_name: str | None, precision: str) -> float | None:
    if not gpu_name:
        return None
    for needle, table in PEAK_TFLOPS:
        if needle.lower() in gpu_name.lower():
            return table.get(precision)
    return None


def throughput(cfg: BenchConfig, median_ms: float | None, gpu_name: str | None,
               precision: str, world: int = 1) -> dict[str, float | None]:
    """Global figures: with `world` ranks each taking the same per-GPU batch (weak scaling)."""
    if not median_ms or not math.isfinite(median_ms):
        return {"tokens_per_s": None, "tflops": None, "mfu": None}
    seconds = median_ms / 1e3
    tflops = world * flops_per_step(cfg) / seconds / 1e12
    peak = peak_tflops(gpu_name, precision)
    return {"tokens_per_s": world * cfg.tokens_per_step / seconds, "tflops": tflops,
            "mfu": tflops / (world * peak) if peak else None}
