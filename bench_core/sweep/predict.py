"""A stage's step time predicted from its own kernels timed alone at the point's real shapes (sweep.kernels), and
the comparison's speedup from two such predictions. Pure arithmetic over the timings, no torch.

A step's GPU time is the sum of its parts' times (each part's time per call × calls per step); the host's time is
the kernels it enqueues per step × the host's measured time to enqueue one. The host enqueues ahead of the GPU, so
the step takes the longer of the two, and that one names the bound (as a measured stage's bottleneck does).
Compiled stages: elementwise work fuses, so every non-GEMM part counts one launch per call (its time is kept as
timed eagerly, which over-predicts a compiled step); a CUDA graph replays the whole step from one launch.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from bench_core.levers.stage import Stage
from bench_core.measure.breakdown import Bound


class Part(StrEnum):
    GEMM = "gemm"              # the blocks' linear layers, forward and both backward products
    ATTENTION = "attention"    # scaled dot-product attention, forward and backward
    NORM = "norm"
    ACTIVATION = "activation"  # the MLP's GELU or SwiGLU product
    LOSS = "loss"              # the LM head's GEMMs and the cross-entropy (or a fused head)
    OPTIMIZER = "optimizer"


@dataclass(frozen=True)
class KernelTime:
    """One part timed alone: per call (median, p10, p90 in ms), its kernels per call, and its calls per step."""
    part: Part
    variant: str               # what distinguishes implementations: precision, or lever@dtype (see `variant`)
    ms: float
    p10_ms: float
    p90_ms: float
    kernels: int               # per call; 0 where not counted (CPU)
    calls: int

    def to_dict(self) -> dict:
        return {**self.__dict__, "part": self.part.value}

    @classmethod
    def from_dict(cls, data: dict) -> KernelTime:
        return cls(**{**data, "part": Part(data["part"])})


@dataclass(frozen=True)
class PointTimings:
    """Every part of every stage at one point, and the host's cost to enqueue one kernel (0 on CPU, where ops run
    as they are called and their dispatch is already inside their time)."""
    times: tuple[KernelTime, ...]
    launch_us: float

    def find(self, part: Part, variant: str) -> KernelTime | None:
        return next((t for t in self.times if t.part == part and t.variant == variant), None)

    def to_dict(self) -> dict:
        return {"times": [t.to_dict() for t in self.times], "launch_us": self.launch_us}

    @classmethod
    def from_dict(cls, data: dict) -> PointTimings:
        return cls(tuple(KernelTime.from_dict(t) for t in data["times"]), float(data["launch_us"]))


@dataclass(frozen=True)
class StagePrediction:
    gpu_ms: float
    gpu_low_ms: float          # from the parts' p10 times
    gpu_high_ms: float         # from their p90 times
    kernels: int
    host_ms: float

    @property
    def step_ms(self) -> float:
        return max(self.gpu_ms, self.host_ms)

    @property
    def bound(self) -> Bound:
        return Bound.LAUNCH if self.host_ms > self.gpu_ms else Bound.GPU


@dataclass(frozen=True)
class Prediction:
    a: StagePrediction
    b: StagePrediction

    @property
    def speedup(self) -> float:
        return self.a.step_ms / self.b.step_ms

    @property
    def low(self) -> float:
        """B's parts at their slowest (p90) against A's at their fastest (p10)."""
        return max(self.a.gpu_low_ms, self.a.host_ms) / max(self.b.gpu_high_ms, self.b.host_ms)

    @property
    def high(self) -> float:
        return max(self.a.gpu_high_ms, self.a.host_ms) / max(self.b.gpu_low_ms, self.b.host_ms)


def compute_dtype(stage: Stage) -> str:
    """What the stage's non-GEMM work runs in: the autocast dtype, or fp32."""
    return {"bfloat16": "bf16", "float16": "fp16"}.get(stage.precision_lever.plan.autocast_dtype or "", "fp32")


def gemm_variant(stage: Stage) -> str:
    """The rate the stage's block GEMMs run at: FP8 stages fp8, otherwise the precision's own."""
    return stage.precision_lever.gemm_rate or stage.precision


def variant(name: str, dtype: str) -> str:
    return f"{name}@{dtype}"


def stage_parts(stage: Stage) -> list[tuple[Part, str]]:
    """The (part, variant) a stage's step is made of (the stage in its family's form: its MLP lever is gelu,
    swiglu or a fused one)."""
    dtype = compute_dtype(stage)
    return [(Part.GEMM, gemm_variant(stage)), (Part.ATTENTION, dtype), (Part.NORM, variant(stage.norm, dtype)),
            (Part.ACTIVATION, variant(stage.mlp, dtype)), (Part.LOSS, variant(stage.head, dtype)),
            (Part.OPTIMIZER, stage.optimizer)]


class MissingTiming(LookupError):
    """A part the stage needs was not timed (it cannot run here): no prediction."""


def predict_stage(timings: PointTimings, stage: Stage) -> StagePrediction:
    mode = stage.compile_lever.mode
    gpu = low = high = 0.0
    kernels = 0
    for part, name in stage_parts(stage):
        t = timings.find(part, name)
        if t is None:
            raise MissingTiming(f"{part.value} {name} was not timed here")
        gpu += t.ms * t.calls
        low += t.p10_ms * t.calls
        high += t.p90_ms * t.calls
        fused = mode != "eager" and part not in (Part.GEMM, Part.ATTENTION, Part.OPTIMIZER)
        kernels += (min(t.kernels, 1) if fused else t.kernels) * t.calls
    host_kernels = min(kernels, 1) if mode == "graphs" else kernels
    return StagePrediction(gpu, low, high, kernels, host_kernels * timings.launch_us / 1e3)


def predict(timings: PointTimings, a: Stage, b: Stage) -> Prediction:
    return Prediction(predict_stage(timings, a), predict_stage(timings, b))


def block_gemms(family: str, width: int, hidden: int) -> list[tuple[int, int]]:
    """(K, N) of each linear layer in one block, as the family's model builds it: the fused QKV projection, the
    attention output, then the MLP's (GPT: fc, proj; Llama: gate, up, proj)."""
    d, h = width, hidden
    mlp = [(d, h), (h, d)] if family == "gpt" else [(d, h), (d, h), (h, d)]
    return [(d, 3 * d), (d, d), *mlp]


def gemm_flops_per_step(m: int, shapes: list[tuple[int, int]], depth: int) -> int:
    """Forward (M·K·N) and both backward products (dX, dW), 2 FLOPs a term: 6·M·K·N per layer, × depth."""
    return depth * sum(6 * m * k * n for k, n in shapes)
