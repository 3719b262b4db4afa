"""A stage's step time predicted from its own kernels at the point's real shapes (sweep.timing.process), and the
comparison's speedup from two such predictions. Pure arithmetic over the timings, no torch.

The stage's own training step (run.step: its model, levers, autocast, compile, optimizer, CUDA graph) is timed on
the point's model cut to one block and to two (STEP_1, STEP_2): every kernel at its real width, batch, sequence and
vocabulary. A block adds the same work at every depth, the embeddings, LM head, loss and the optimizer's fixed share
come once, and the optimizer's work grows with the parameters, so the step's GPU time (both shallow steps read in
one measure, `block_gpu_ms`, with the GPU's gaps between kernels where that measure is their traced kernels,
`dispatch_gaps_ms`) and its kernels are the one-block figure plus (depth - 1) times what the second block added. The
host's time to issue the step is not extrapolated from the shallow steps where it can be taken whole: on a GPU each
stage's full-depth step is timed once a sweep at its least-work point (STEP_FULL), and its host time, which goes
with what it launches and not with the shapes, is scaled by the kernels each point launches (`host_at_depth`). The
shallow steps' host time per kernel carries a step's fixed host costs into every block (it put launch-bound steps
14-39% long on the H200, docs/BENCHMARKS.md); it remains for files without STEP_FULL. The host enqueues ahead of the
GPU, so the step takes the longer of the two, and that one names the bound (as a measured stage's bottleneck does).
The speedup's interval spans both stages' kernels at their p10/p90 and their hosts at their fastest and slowest
round: where a stage is launch-bound its time is its host's, and a host's time is the least steady figure here (one
shallow step's second block read 2.0 to 4.0 ms of host across the points of one sweep), so a launch-bound prediction
is not shown as exact.

The parts of a block, each timed alone, are not summed into the prediction: they leave out a step's small kernels (the
embeddings, residual adds, copies, reductions: 6% of gpt2-small's kernel time at batch 8), and a part timed alone
is issued by its own Python, not the block's, so their sum fell 5-18% short of the measured step at GPU-bound
points (docs/BENCHMARKS.md). They can still be timed where asked (`--breakdown`), as the breakdown of where a
block's time goes (`timing.variants.breakdown_parts`); a compiled stage compiles each of them as well, which costs
minutes on a GPU.
"""
from __future__ import annotations

from dataclasses import dataclass

from bench_core.levers.stage import Stage
from bench_core.measure.breakdown import Bound
from bench_core.sweep.timing.timings import KernelTime, Part, PointTimings
from bench_core.sweep.timing.variants import step_parts


@dataclass(frozen=True)
class StagePrediction:
    gpu_ms: float
    gpu_low_ms: float          # at the shallow steps' p10 spread
    gpu_high_ms: float         # at their p90 spread
    kernels: int
    host_ms: float
    host_low_ms: float         # at the fastest host rounds it was taken from (the full step's, or the shallow ones')
    host_high_ms: float        # at the slowest
    peak_mib: float | None = None   # peak memory allocated; None: the shallow steps' peaks were not measured

    @property
    def step_ms(self) -> float:
        return max(self.gpu_ms, self.host_ms)

    @property
    def fastest_ms(self) -> float:
        """The step with its kernels and its host both at their fastest: the low end of its time."""
        return max(self.gpu_low_ms, self.host_low_ms)

    @property
    def slowest_ms(self) -> float:
        return max(self.gpu_high_ms, self.host_high_ms)

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
        """B's step at its slowest against A's at its fastest: kernels at their p10/p90, the host at its fastest and
        slowest round (a launch-bound stage's time is its host's, and the host varies)."""
        return self.a.fastest_ms / self.b.slowest_ms

    @property
    def high(self) -> float:
        return self.a.slowest_ms / self.b.fastest_ms


class MissingTiming(LookupError):
    """A part the stage needs was not timed (it cannot run here): no prediction."""


def _relative(t: KernelTime) -> tuple[float, float]:
    low, high = t.gpu_range()
    return (low / t.gpu_ms, high / t.gpu_ms) if t.gpu_ms > 0 else (1.0, 1.0)


def host_per_kernel_ms(one: KernelTime, two: KernelTime, launch_us: float) -> tuple[float, float, float]:
    """The host's time to issue a step, per kernel it launches, over both shallow steps: at their median rounds,
    their fastest and their slowest. Extrapolating the host's
    own difference in depth multiplied its noise by the blocks added (on the H200 native BF16's second
    block read 1.8 to 5.0 ms across points whose blocks launch the same kernels). A rate has its own fault: a stage's
    fixed host cost (Apex's optimizer, Liger FLCE's wait for the GPU inside its loss, FP8's casts) is carried into
    every block, so such a stage's host time comes out long (docs/BENCHMARKS.md)."""
    kernels = one.kernels + two.kernels
    if not kernels:
        return 0.0, 0.0, 0.0
    median = one.host_call_ms(launch_us, one.kernels) + two.host_call_ms(launch_us, two.kernels)
    (low_1, high_1), (low_2, high_2) = (t.host_call_range(launch_us, t.kernels) for t in (one, two))
    return median / kernels, (low_1 + low_2) / kernels, (high_1 + high_2) / kernels


def host_at_depth(full: KernelTime | None, one: KernelTime, two: KernelTime, kernels: int,
                  launch_us: float) -> tuple[float, float, float]:
    """The host's time to issue the full-depth step (median, fastest and slowest round). Where the full-depth step
    was timed at the sweep's least-work shape (STEP_FULL), its own host time, scaled by the kernels this point
    launches against that step's: the host's time goes with what it launches and the Python that launches it, not
    with the shapes, and one full-depth step carries no per-block rate from a shallow step's fixed costs. Else the
    shallow steps' host time per kernel (`host_per_kernel_ms`)."""
    if full is not None and full.host_ms > 0 and full.kernels > 0:
        scale = kernels / full.kernels
        low, high = full.host_call_range(launch_us, full.kernels)
        return full.host_ms * scale, low * scale, high * scale
    median, low, high = host_per_kernel_ms(one, two, launch_us)
    return kernels * median, kernels * low, kernels * high


def block_gpu_ms(one: KernelTime, two: KernelTime) -> tuple[float, float]:
    """The one- and two-block steps' GPU time in one measure, so that their difference is a block's: the wall time
    where the GPU set the pace of both, else the traced kernel time of both. Each step's own `gpu_ms` mixed them
    where one step was GPU-bound and the other not, and the second block was then charged the wall's gaps over the
    kernels, times the blocks added: Liger FLCE's one-block step at vocabulary 32000 x batch 16 read 13.9 ms of
    kernels (host-bound), its two-block step 18.6 ms of wall (GPU-bound) over 17.3 ms of kernels, so each block
    added 4.7 ms, not 3.4, and the 24-block step was put 25% above the measured one."""
    if reads_kernels(one, two):
        return one.kernel_ms or 0.0, two.kernel_ms or 0.0
    return one.gpu_ms, two.gpu_ms


def reads_kernels(one: KernelTime, two: KernelTime) -> bool:
    """Whether the shallow steps' GPU time is read from their traced kernels: not both GPU-bound (CUDA)."""
    return one.kernel_ms is not None and two.kernel_ms is not None and not (one.gpu_bound and two.gpu_bound)


def predict_stage(timings: PointTimings, stage: Stage) -> StagePrediction:
    one, two = (timings.find(part, name) for part, name in step_parts(stage))
    if one is None or two is None or timings.depth < 1:
        raise MissingTiming(f"the {stage.key} step was not timed here")
    blocks = timings.depth - 1
    gpu_one, gpu_two = block_gpu_ms(one, two)
    if gpu_two < gpu_one:
        # a second block cannot take away time: the timings are noise at this size, not a figure to extrapolate
        raise MissingTiming(f"the {stage.key} step timed faster with two blocks than with one")
    gpu = gpu_one + blocks * (gpu_two - gpu_one)
    kernels = one.kernels + blocks * (two.kernels - one.kernels)
    gaps = dispatch_gaps_ms(timings, one, two, kernels)
    host, host_low, host_high = host_at_depth(timings.find(Part.STEP_FULL, stage.key), one, two, kernels,
                                              timings.launch_us)
    spreads = (_relative(one), _relative(two))
    low, high = min(r[0] for r in spreads), max(r[1] for r in spreads)
    return StagePrediction(gpu + gaps, gpu * low + gaps, gpu * high + gaps, kernels, host, host_low, host_high,
                           peak_in_depth(one, two, blocks))


def dispatch_gaps_ms(timings: PointTimings, one: KernelTime, two: KernelTime, kernels: int) -> float:
    """What the GPU's gaps between `kernels` add to a step where the shallow steps' GPU time was read from their
    traced kernels (`reads_kernels`): a wall time holds them, a kernel sum does not, and a step run at full depth
    is a wall. Without them Liger FLCE's stage, whose shallow steps are host-bound, was put 3.7-6.9% short at
    batch 4-8 on the H100 (41.66 ms measured over 38.50 ms of kernels, 38.78 predicted)."""
    return kernels * timings.dispatch_gap_us / 1e3 if reads_kernels(one, two) else 0.0


def peak_in_depth(one: KernelTime, two: KernelTime, blocks: int) -> float | None:
    """The step's peak memory at full depth: the one-block peak plus `blocks` times what the second block added
    (its weights, gradients, optimizer state and saved activations; the embeddings, head and logits come once).
    Where both steps' peaks were read per phase, each phase is extrapolated so and the step's peak is the highest:
    the phase that peaks at one or two blocks need not peak at full depth. The whole step's peak, extrapolated as
    one, put the native BF16 stage's full-depth peak 12-25% low on the H200 while its twins' landed within 1%
    (the sweeps' depth checks), as a peak that moves from one phase to another with depth would: one with a
    large fixed part (the logits at the loss) leading at two blocks, one that grows faster by block (gradients
    beside the optimizer state) at full depth. Each sweep's depth check says whether reading phases mends it.
    None where a peak was not measured, or the second block's read lower (noise, not a figure to extrapolate)."""
    if one.peak_mib <= 0 or two.peak_mib < one.peak_mib:
        return None
    phases = list(zip(one.phase_peaks_mib, two.phase_peaks_mib, strict=False))
    if phases and len(phases) == len(one.phase_peaks_mib) == len(two.phase_peaks_mib) and \
            all(b >= a for a, b in phases):
        return max(a + blocks * (b - a) for a, b in phases)
    return one.peak_mib + blocks * (two.peak_mib - one.peak_mib)


@dataclass(frozen=True)
class DepthCheck:
    """At the point where a stage's full-depth step was timed, what the depth extrapolation from its one- and
    two-block steps predicts there against that step itself: extrapolated / timed - 1. It costs no GPU time, and
    tests the predictor's one assumption (a block adds the same at every depth) on each sweep."""
    stage: str
    gpu_error: float
    kernels_error: float
    peak_error: float | None     # None: peaks not measured

    @property
    def text(self) -> str:
        peak = f", peak memory {self.peak_error:+.1%}" if self.peak_error is not None else ""
        return f"GPU time {self.gpu_error:+.1%}, kernels {self.kernels_error:+.1%}{peak}"


def depth_check(timings: PointTimings, stage: Stage) -> DepthCheck | None:
    full = timings.find(Part.STEP_FULL, stage.key) if timings.full_here else None
    if full is None or full.gpu_ms <= 0 or full.kernels <= 0:
        return None
    try:
        p = predict_stage(timings, stage)
    except MissingTiming:
        return None
    peak = p.peak_mib / full.peak_mib - 1 if p.peak_mib is not None and full.peak_mib > 0 else None
    one, two = (timings.find(part, name) for part, name in step_parts(stage))
    # like with like: the full step's kernels where the extrapolation read the shallow steps' kernels
    timed = full.gpu_ms
    if one and two and reads_kernels(one, two) and full.kernel_ms:
        timed = full.kernel_ms + dispatch_gaps_ms(timings, one, two, full.kernels)
    return DepthCheck(stage.key, p.gpu_ms / timed - 1, p.kernels / full.kernels - 1, peak)


def predict(timings: PointTimings, a: Stage, b: Stage) -> Prediction:
    return Prediction(predict_stage(timings, a), predict_stage(timings, b))
