"""Model FLOPs, datasheet peaks and the rates a step time implies (tokens/s, TFLOP/s, MFU). Pure Python."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from bench_core.config.bench_config import BenchConfig
from bench_core.models.families import matmul_params

# Dense (no sparsity) peak TFLOP/s per precision, from the vendors' datasheets. Each GPU is matched by a full
# regular expression over the name the driver reports, so "H200 NVL" never takes the SXM figures and
# "RTX A1000" never the A100's. A precision the datasheet does not give is left out: MFU is then None. FP8 (the
# run estimate's rate for FP8 stages; MFU counts FP8 against bf16) only where the GPU has FP8 tensor cores.
PEAK_TFLOPS: list[tuple[str, re.Pattern[str], dict[str, float]]] = [
    ("H200 SXM", re.compile(r"NVIDIA H200( SXM.*)?"), {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4,
                                                         "fp8": 1979.0}),
    ("H200 NVL", re.compile(r"NVIDIA H200 NVL.*"), {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5,
                                                    "fp8": 1670.5}),
    ("H100 SXM", re.compile(r"NVIDIA H100( 80GB HBM3| SXM.*)"), {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4,
                                                                  "fp16": 989.4, "fp8": 1979.0}),
    ("H100 NVL", re.compile(r"NVIDIA H100 NVL.*"), {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5,
                                                    "fp8": 1670.5}),
    ("H100 PCIe", re.compile(r"NVIDIA H100 PCIe.*"), {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0,
                                                      "fp8": 1513.0}),
    ("A100", re.compile(r"NVIDIA A100[- ](SXM4|PCIE|PCIe|80GB|40GB).*"), {"fp32": 19.5, "tf32": 156.0,
                                                                         "bf16": 312.0, "fp16": 312.0}),
    ("L40S", re.compile(r"NVIDIA L40S"), {"fp32": 91.6, "tf32": 183.0, "bf16": 362.0, "fp16": 362.0, "fp8": 733.0}),
    ("RTX 4090", re.compile(r"NVIDIA GeForce RTX 4090"), {"fp32": 82.6, "bf16": 165.2, "fp16": 165.2}),
    ("A10G", re.compile(r"NVIDIA A10G"), {"bf16": 70.0, "fp16": 70.0}),
    ("A10", re.compile(r"NVIDIA A10"), {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0}),
    ("V100 SXM2", re.compile(r"Tesla V100-SXM2-(16|32)GB"), {"fp32": 15.7, "fp16": 125.0}),
    ("V100 PCIe", re.compile(r"Tesla V100-PCIE-(16|32)GB"), {"fp32": 14.0, "fp16": 112.0}),
]


def flops_per_step(cfg: BenchConfig) -> float:
    """Training FLOPs of one step: 6·N·tokens + 12·L·d·T·tokens (PaLM appendix B, as in nanoGPT).

    N counts every weight that takes part in a matmul (families.matmul_params): GPT's tied token embedding
    counts as its LM head, Llama's untied head counts and its input embedding does not. The attention term
    counts the full T×T score matrix (forward and backward), not the causal half a FlashAttention kernel
    actually computes: it is the standard formula that MFU figures in the literature use, so the same step is
    compared with them on equal terms.
    """
    n = matmul_params(cfg)
    tokens = cfg.tokens_per_step
    return 6.0 * n * tokens + 12.0 * cfg.depth * cfg.width * cfg.seq_len * tokens


def peak_tflops(gpu_name: str | None, precision: str) -> tuple[float | None, str | None]:
    """(peak, None) or (None, why there is none)."""
    if not gpu_name:
        return None, "no GPU: MFU is a GPU figure"
    for label, pattern, table in PEAK_TFLOPS:
        if pattern.fullmatch(gpu_name.strip()):
            peak = table.get(precision)
            return (peak, None) if peak else (None, f"the {label} datasheet gives no dense {precision} peak")
    return None, f"{gpu_name!r} is not in the peak table: no MFU rather than a guessed one"


@dataclass(frozen=True)
class Rates:
    tokens_per_s: float | None = None
    tflops: float | None = None
    mfu: float | None = None
    mfu_reason: str | None = None   # why MFU is None, when it is


def rates(cfg: BenchConfig, median_ms: float | None, gpu_name: str | None, precision: str, world: int = 1) -> Rates:
    """Global figures: `world` ranks each take the same per-GPU batch (weak scaling)."""
    if not median_ms or not math.isfinite(median_ms):
        return Rates(mfu_reason="no timed steps")
    seconds = median_ms / 1e3
    tflops = world * flops_per_step(cfg) / seconds / 1e12
    peak, why = peak_tflops(gpu_name, precision)
    return Rates(tokens_per_s=world * cfg.tokens_per_step / seconds, tflops=tflops,
                 mfu=tflops / (world * peak) if peak else None, mfu_reason=why)
