"""What the timing process (timing.process) hands the predictor: each part or shallow step of a stage timed alone at a
point's shapes (KernelTime), and all of a point's (PointTimings). Data only; the arithmetic is sweep.core.predict's."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from enum import StrEnum


class Part(StrEnum):
    STEP_1 = "step@1"          # the stage's whole training step, the model cut to one block
    STEP_2 = "step@2"          # the same with two blocks
    STEP_FULL = "step@full"    # the same at the point's full depth, on the sweep's least-work shape (for its host)
    GEMM = "gemm"              # the blocks' linear layers, forward and both backward products
    ATTENTION = "attention"    # scaled dot-product attention, forward and backward
    NORM = "norm"
    ACTIVATION = "activation"  # the MLP's GELU or SwiGLU product
    LOSS = "loss"              # the LM head's GEMMs and the cross-entropy (or a fused head)
    OPTIMIZER = "optimizer"


STEP_BLOCKS = {Part.STEP_1: 1, Part.STEP_2: 2}   # the shallow steps and the blocks each is cut to
STEP_PARTS = (*STEP_BLOCKS, Part.STEP_FULL)      # a stage's whole training step, at some depth


@dataclass(frozen=True)
class KernelTime:
    """One part, or a shallow step, timed alone: per call (median, p10, p90 in ms), its kernels per call, and its
    calls per step."""
    part: Part
    variant: str               # what distinguishes implementations: precision, or lever@dtype (see `variant`)
    ms: float                  # wall time per call, back to back: the GPU's or the host's, whichever is longer
    p10_ms: float
    p90_ms: float
    kernels: int               # per call; 0 where not counted (CPU)
    calls: int
    kernel_ms: float | None = None  # the call's kernel time from the trace (CUDA); None: not traced (CPU, older files)
    host_ms: float = 0.0       # the host's time to issue one call, the GPU not waited for (median of rounds); 0: not
    host_low_ms: float = 0.0   # measured. Its fastest and slowest round; 0: not kept (older files), the median
    host_high_ms: float = 0.0
    peak_mib: float = 0.0      # a shallow step's peak memory allocated (CUDA); 0: not measured (CPU, a part, older)
    wall_s: float = 0.0        # what timing it took, its build and compile included; 0: older files
    # a shallow step's peak in each of its phases (run.phases.StepPhase, in order), each counted from what the phase
    # began with; (): not read (CPU, a part, a replayed CUDA graph, older files)
    phase_peaks_mib: tuple[float, ...] = ()
    # the graphs torch.compile read from its on-disk cache and those it compiled, while the part was built and run
    # (0 and 0: nothing compiled, older files); a step compiled ahead (sweep.timing.ahead) is read, not compiled
    cache_hits: int = 0
    cache_misses: int = 0

    @property
    def gpu_bound(self) -> bool:
        """The GPU set the pace of the calls timed back to back: the traced kernels outlast the host's issue."""
        return self.kernel_ms is not None and 0 < self.host_ms <= self.kernel_ms

    @property
    def gpu_ms(self) -> float:
        """GPU time per call. Where the GPU set the pace, the wall time: the median of many calls (one traced call
        read 2.5% above it on the H200) and the GPU's own gaps in it. Where the host did, the traced kernel
        time; on a CPU (ops run as called) the wall time."""
        return self.ms if self.kernel_ms is None or self.gpu_bound else self.kernel_ms

    def gpu_range(self) -> tuple[float, float]:
        """The GPU time at the wall time's p10 and p90, its relative spread carried over (one traced call has none)."""
        scale = self.gpu_ms / self.ms if self.ms > 0 else 1.0
        return self.p10_ms * scale, self.p90_ms * scale

    def host_call_ms(self, launch_us: float, launches: int) -> float:
        """The host's time per call: measured where it was, else `launches` at the measured enqueue cost."""
        return self.host_ms if self.host_ms > 0 else launches * launch_us / 1e3

    def host_call_range(self, launch_us: float, launches: int) -> tuple[float, float]:
        """The host's time per call in its fastest and slowest round (the median where rounds were not kept)."""
        median = self.host_call_ms(launch_us, launches)
        if self.host_ms <= 0:
            return median, median
        return self.host_low_ms or median, self.host_high_ms or median

    def to_dict(self) -> dict:
        return {**self.__dict__, "part": self.part.value}

    @classmethod
    def from_dict(cls, data: dict) -> KernelTime:
        return cls(**{**data, "part": Part(data["part"]), "phase_peaks_mib": tuple(data.get("phase_peaks_mib", ()))})


@dataclass(frozen=True)
class CompiledAhead:
    """What compiling ahead did before a sweep's timing (sweep.timing.ahead): the steps it compiled, side by side in how
    many processes, how long it took, and why any step failed there (that one is compiled while it is timed)."""
    steps: int
    processes: int
    seconds: float
    failed: tuple[str, ...] = ()

    @property
    def words(self) -> str:
        """As the sweep's note says it, after "predicting took N s"."""
        failed = (f"; {len(self.failed)} failed there and compiled as they were timed (first: {self.failed[0]})"
                  if self.failed else "")
        return f"{self.seconds:.0f} s of it compiling {self.steps} steps ahead, {self.processes} side by side{failed}"

    def to_dict(self) -> dict:
        return {**self.__dict__, "failed": list(self.failed)}

    @classmethod
    def from_dict(cls, data: dict) -> CompiledAhead:
        return cls(int(data["steps"]), int(data["processes"]), float(data["seconds"]), tuple(data.get("failed", ())))


@dataclass(frozen=True)
class PointTimings:
    """Every part of every stage at one point, the host's cost to enqueue one kernel (0 on CPU, where ops run as
    they are called and their dispatch is already inside their time), the point's depth (0: a file from before
    whole steps were timed), whether its full steps (STEP_FULL) were timed at this point's own shapes, and the
    seconds its breakdown's parts took to time, compiles included (0: none asked, older files), and, at the first
    point only, what compiling ahead did before any was timed (None: not done)."""
    times: tuple[KernelTime, ...]
    launch_us: float
    depth: int = 0
    full_here: bool = False
    breakdown_s: float = 0.0
    ahead: CompiledAhead | None = None

    def find(self, part: Part, variant: str) -> KernelTime | None:
        return next((t for t in self.times if t.part == part and t.variant == variant), None)

    @property
    def dispatch_gap_us(self) -> float:
        """The GPU's own time between kernels where it sets the pace, per kernel: a GPU-bound whole step's wall less
        its traced kernels, over its kernels (the median over this point's GPU-bound steps, any stage's; 0 where
        none was). A property of the GPU and its driver, not of the host: 0.93-1.49 us over an H100 sweep's points
        (docs/BENCHMARKS.md)."""
        gaps = [(t.ms - t.kernel_ms) / t.kernels * 1e3 for t in self.times
                if t.part in STEP_PARTS and t.gpu_bound and t.kernel_ms is not None and t.kernels > 0]
        return max(statistics.median(gaps), 0.0) if gaps else 0.0

    @property
    def full_step_s(self) -> float:
        """What timing the full-depth steps took, at the one point they were timed (every point keeps them): call
        34's FP8 prediction took 404 s and no file said where it went."""
        return sum(t.wall_s for t in self.times if t.part == Part.STEP_FULL) if self.full_here else 0.0

    def to_dict(self) -> dict:
        return {"times": [t.to_dict() for t in self.times], "launch_us": self.launch_us, "depth": self.depth,
                "full_here": self.full_here, "breakdown_s": self.breakdown_s,
                "ahead": self.ahead.to_dict() if self.ahead else None}

    @classmethod
    def from_dict(cls, data: dict) -> PointTimings:
        return cls(tuple(KernelTime.from_dict(t) for t in data["times"]), float(data["launch_us"]),
                   int(data.get("depth") or 0), bool(data.get("full_here")), float(data.get("breakdown_s") or 0.0),
                   CompiledAhead.from_dict(data["ahead"]) if data.get("ahead") else None)
