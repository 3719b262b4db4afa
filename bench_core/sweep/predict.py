"""A stage's step time predicted from its own kernels timed alone at the point's real shapes (sweep.kernels), and
the comparison's speedup from two such predictions. Pure arithmetic over the timings, no torch.

A step's GPU time is the sum of its parts' kernel time (each part's kernel time per call, from the profiler's trace,
× calls per step). A part's wall time per call is not its GPU time: a small part timed alone is host-bound, and on
the H200 Apex's LayerNorm read 1.22 ms a call against native's 0.40 (15 kernels against 6) at batch 16 × width 768,
while in a training step Apex's norm kernels took less GPU time than native's (1.85 against 2.27 ms a step at
batch 8); counted as GPU time, the wall times predicted Apex at x0.69 where x1.00 was measured. The host's time
in an eager step is the sum of each part's measured time to issue one call (the GPU not waited for); where that
was not measured, the part's kernels × the host's time to enqueue one.
The host enqueues ahead of the GPU, so the step takes the longer of the two, and that one names the bound (as a
measured stage's bottleneck does). A compiled stage's GEMMs, norms, activation and loss are timed under
torch.compile (their variant ends in COMPILED): the fused kernels the model's own compile makes, at their traced
time, each launch at the enqueue cost. Timed eagerly they count FP8's casts unfused: on the H200, llama-1b with eager
FP8 measured x0.48 of eager BF16, compiled FP8 x1.58. A CUDA graph replays the whole step from one launch.
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
    ms: float                  # wall time per call, back to back: the GPU's or the host's, whichever is longer
    p10_ms: float
    p90_ms: float
    kernels: int               # per call; 0 where not counted (CPU)
    calls: int
    kernel_ms: float | None = None  # the call's kernel time from the trace (CUDA); None: not traced (CPU, older files)
    host_ms: float = 0.0       # the host's time to issue one call, the GPU not waited for; 0: not measured

    @property
    def gpu_ms(self) -> float:
        """GPU time per call: the traced kernel time, else (a CPU, where ops run as called) the wall time."""
        return self.kernel_ms if self.kernel_ms is not None else self.ms

    def gpu_range(self) -> tuple[float, float]:
        """The GPU time at the wall time's p10 and p90, its relative spread carried over (one traced call has none)."""
        scale = self.gpu_ms / self.ms if self.ms > 0 else 1.0
        return self.p10_ms * scale, self.p90_ms * scale

    def host_call_ms(self, launch_us: float, launches: int) -> float:
        """The host's time per call: measured where it was, else `launches` at the measured enqueue cost."""
        return self.host_ms if self.host_ms > 0 else launches * launch_us / 1e3

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


COMPILED = "+compile"
# What torch.compile traces in a compiled model: attention keeps its fused SDPA kernel, the optimizer runs eagerly.
COMPILED_PARTS = (Part.GEMM, Part.NORM, Part.ACTIVATION, Part.LOSS)


def split_compiled(name: str) -> tuple[str, bool]:
    """A variant without its COMPILED suffix, and whether it had one."""
    return (name[:-len(COMPILED)], True) if name.endswith(COMPILED) else (name, False)


def stage_parts(stage: Stage) -> list[tuple[Part, str]]:
    """The (part, variant) a stage's step is made of (the stage in its family's form: its MLP lever is gelu,
    swiglu or a fused one); a stage that torch.compile traces names its traced parts' compiled variants."""
    dtype = compute_dtype(stage)
    parts = [(Part.GEMM, gemm_variant(stage)), (Part.ATTENTION, dtype), (Part.NORM, variant(stage.norm, dtype)),
             (Part.ACTIVATION, variant(stage.mlp, dtype)), (Part.LOSS, variant(stage.head, dtype)),
             (Part.OPTIMIZER, stage.optimizer)]
    if not stage.compile_lever.traces_model:
        return parts
    return [(part, name + COMPILED if part in COMPILED_PARTS else name) for part, name in parts]


class MissingTiming(LookupError):
    """A part the stage needs was not timed (it cannot run here): no prediction."""


def predict_stage(timings: PointTimings, stage: Stage) -> StagePrediction:
    mode = stage.compile_lever.mode
    gpu = low = high = 0.0
    kernels = 0
    host = 0.0
    for part, name in stage_parts(stage):
        t = timings.find(part, name)
        if t is None:
            raise MissingTiming(f"{part.value} {name} was not timed here")
        p10, p90 = t.gpu_range()
        gpu += t.gpu_ms * t.calls
        low += p10 * t.calls
        high += p90 * t.calls
        kernels += t.kernels * t.calls
        # eager: the part's own Python and dispatch as measured; compiled: its (fused) launches at the enqueue cost,
        # the model's whole graph being one call
        host += (t.host_call_ms(timings.launch_us, t.kernels) if mode == "eager" else
                 t.kernels * timings.launch_us / 1e3) * t.calls
    if mode == "graphs":
        host = min(kernels, 1) * timings.launch_us / 1e3
    return StagePrediction(gpu, low, high, kernels, host)


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
