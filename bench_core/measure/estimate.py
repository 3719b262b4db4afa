"""How long a stage's step will take here, before it runs: model FLOPs over the rate of the stage's own precision.

An estimate, said to be one. Each stage divides by the GEMM rate its matmuls run at (`PrecisionLever.gemm`: fp32,
tf32, bf16, fp16, fp8): this GPU's measured ceiling where the probe measured that precision (fp32 with TF32 off,
bf16), else the datasheet's dense peak — labelled as such, never as a measured rate — or, on a CPU, a linear layer's
forward and backward timed on it in fp32 (and in bf16 for BF16 stages: without BF16 instructions it is emulated,
about thirty times slower), at an assumed 50% of the rate for a whole training step (on a CPU, the non-GEMM half at
the fp32 rate whatever the stage's precision), plus each process's fixed cost and a compiled stage's
compile, as this machine's runs measured them (machine/stage_costs; assumed until then). A run's ETA
(results/eta) starts from these and refines them with measured steps.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from bench_core.config.bench_config import WARMUP_MIN_S, BenchConfig
from bench_core.levers.lever_types import PrecisionLever
from bench_core.levers.registry import LEVERS
from bench_core.levers.stage import Stage
from bench_core.machine.probe import Probe
from bench_core.machine.stage_costs import ASSUMED_FIXED_S, StageCosts
from bench_core.measure.metrics import flops_per_step, peak_tflops

STEP_EFFICIENCY = 0.5      # a training step reaches about half the GEMM rate (measured: 40-66% on the H200)
STAGE_OVERHEAD_S = ASSUMED_FIXED_S   # process start not hidden, profiling, trace reading: until measured here
PROFILE_STEPS = 5
WARN_ABOVE_S = 180.0       # the page warns before a run longer than this
MEASURED_GEMM = ("fp32", "bf16")   # the precisions machine/ceilings measures (fp32 with TF32 off)


class RateSource(Enum):
    """Where an estimate's rate comes from."""
    MEASURED_CEILING = "measured"    # machine/ceilings: this GPU's GEMM, timed
    DATASHEET = "datasheet"          # the vendor's dense peak: not this machine's measurement
    CPU_MATMUL = "cpu"               # a small matmul timed on this CPU (fp32, or bf16 for BF16 stages)


@dataclass(frozen=True)
class StepEstimate:
    gemm: str                        # the precision whose rate it divides by: fp32, tf32, bf16, fp16, fp8
    seconds: float | None            # one training step; None without a rate (`why` says why)
    tflops: float | None = None
    source: RateSource | None = None
    why: str = ""                    # why there is no rate, or why the datasheet's, or that BF16 is emulated

    @property
    def label(self) -> str:
        """The rate, in words that never call a datasheet figure measured."""
        if self.source is RateSource.MEASURED_CEILING:
            return f"this GPU's measured {self.gemm} GEMM ceiling ({self.tflops:,.1f} TFLOP/s)"
        if self.source is RateSource.DATASHEET:
            return (f"the datasheet's dense {self.gemm} peak ({self.tflops:,.1f} TFLOP/s), not a rate measured on "
                    f"this machine: {self.why}")
        if self.source is RateSource.CPU_MATMUL:
            gflops = (self.tflops or 0) * 1e3
            if self.gemm == "bf16":
                note = f"; {self.why}" if self.why else ""
                return f"this CPU's measured bf16 matmul rate ({gflops:,.1f} GFLOP/s{note})"
            return f"this CPU's measured fp32 matmul rate ({gflops:,.1f} GFLOP/s, for every precision but bf16)"
        return f"no {self.gemm} rate: {self.why}"


def gemm_precision(precision: str) -> str:
    """The GEMM rate a precision lever's matmuls run at (its name, unless the registry says otherwise)."""
    lever = LEVERS.get(precision)
    return lever.gemm if isinstance(lever, PrecisionLever) else precision


def _measured_tflops(probe: Probe, gemm: str) -> float | None:
    if probe.ceilings is None or gemm not in MEASURED_GEMM:
        return None
    return probe.ceilings.bf16_tflops if gemm == "bf16" else probe.ceilings.fp32_tflops


def step_estimate(cfg: BenchConfig, probe: Probe, device: str, precision: str) -> StepEstimate:
    """One step of a stage with this precision lever, from the rate of its own GEMM precision."""
    gemm = gemm_precision(precision)
    if device != "cuda":
        gflops = probe.cpu.matmul_gflops
        if not gflops:
            return StepEstimate(gemm, None, why="this CPU's matmul rate is not measured")
        if gemm == "bf16" and probe.cpu.bf16_matmul_gflops:
            tflops = probe.cpu.bf16_matmul_gflops / 1e3
            return StepEstimate(gemm, _cpu_step_s(cfg, tflops, gflops / 1e3), tflops, RateSource.CPU_MATMUL,
                                probe.cpu.bf16_note)
        tflops, source = gflops / 1e3, RateSource.CPU_MATMUL
    else:
        measured = _measured_tflops(probe, gemm)
        if measured:
            tflops, source = measured, RateSource.MEASURED_CEILING
        else:
            peak, why = peak_tflops(probe.gpu_name, gemm)
            if not peak:
                return StepEstimate(gemm, None, why=why or "no peak")
            why = ("its GEMM ceiling is not measured yet (the first run measures it)" if probe.ceilings is None
                   else f"the ceilings measure {' and '.join(MEASURED_GEMM)} only")
            return StepEstimate(gemm, _step_s(cfg, peak), peak, RateSource.DATASHEET, why)
    return StepEstimate(gemm, _step_s(cfg, tflops), tflops, source)


def _step_s(cfg: BenchConfig, tflops: float) -> float:
    return flops_per_step(cfg) / (tflops * 1e12 * STEP_EFFICIENCY)


def _cpu_step_s(cfg: BenchConfig, gemm_tflops: float, fp32_tflops: float) -> float:
    """A CPU step whose GEMMs run at another precision's rate: its GEMMs at that rate, plus the rest of the step
    (norms, optimizer, elementwise, host) as long as at FP32. CPU autocast casts only the matmuls, so the rest runs
    in FP32 whatever the GEMM precision; at FP32 this equals _step_s."""
    flops = flops_per_step(cfg)
    return flops / (gemm_tflops * 1e12) + flops * (1 / STEP_EFFICIENCY - 1) / (fp32_tflops * 1e12)


def step_seconds(cfg: BenchConfig, probe: Probe, device: str, precision: str) -> float | None:
    return step_estimate(cfg, probe, device, precision).seconds


def process_overhead_s(cfg: BenchConfig, step_s: float, fixed_s: float = STAGE_OVERHEAD_S) -> float:
    """A stage process's cost beyond its timed steps: warm-up, its fixed cost (start-up, profiler), profiled steps."""
    return max(cfg.warmup * step_s, WARMUP_MIN_S) + fixed_s + PROFILE_STEPS * step_s / max(cfg.repeats, 1)


def run_seconds(cfg: BenchConfig, probe: Probe, device: str, precisions: list[str],
                costs: StageCosts | None = None) -> float | None:
    """Estimated wall time of a run whose runnable (eager) stages have these precisions; None without a rate.
    `costs`: this machine's measured fixed cost of a process (machine/stage_costs), else the assumed one."""
    total = 0.0
    for precision in precisions:
        step = step_seconds(cfg, probe, device, precision)
        if step is None:
            return None
        fixed = costs.fixed_s if costs is not None else STAGE_OVERHEAD_S
        total += cfg.repeats * (cfg.iters * step + process_overhead_s(cfg, step, fixed))
    return total


def rate_sources(cfg: BenchConfig, probe: Probe, device: str, precisions: list[str]) -> str:
    """Which rate each precision's estimate divides by, in words, each said once."""
    labels: dict[str, list[str]] = {}
    for precision in precisions:
        est = step_estimate(cfg, probe, device, precision)
        named = labels.setdefault(est.label, [])
        if est.gemm not in named:
            named.append(est.gemm)
    return "; ".join(f"{', '.join(gemms)}: {label}" for label, gemms in labels.items())


def bf16_note(cfg: BenchConfig, probe: Probe, device: str, stages: Sequence[Stage]) -> str:
    """On a CPU that emulates BF16, what a BF16 stage of this run costs a step, against FP32; "" otherwise."""
    if device == "cuda" or not probe.cpu.bf16_emulated or not any(s.precision == "bf16" for s in stages):
        return ""
    bf16, fp32 = step_seconds(cfg, probe, device, "bf16"), step_seconds(cfg, probe, device, "fp32")
    if bf16 is None or fp32 is None:
        return probe.cpu.bf16_note + "."
    return (f"{probe.cpu.bf16_note}: about {bf16:.2f} s a step against {fp32:.2f} s in FP32 (estimated from this "
            f"CPU's measured bf16 and fp32 matmul rates). Its BF16 stages measure the emulation, not what BF16 "
            f"does on a CPU with BF16 instructions or on a GPU.")
