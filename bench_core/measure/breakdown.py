"""Where a training step's time goes: categories of kernels (CUDA) or ops (CPU), GPU busy fraction, and
whether the GPU or the host sets the pace. No torch import: `from_trace` reads one `trace.Trace`.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from bench_core.levers.kernels import GEMM_KERNEL_PATTERN
from bench_core.measure.idle import TIMESTAMP_RESOLUTION_US, IdleBreakdown, idle_of
from bench_core.measure.stats import EQUIVALENCE
from bench_core.measure.trace import HostOp, Trace

CATEGORIES = ("gemm", "attention", "normalization", "optimizer", "cast/copy", "elementwise/other", "communication")
OTHER = "elementwise/other"
TOP_N = 25
NAME_CHARS = 160
# Only for records saved before the idle attribution (no host-wait figures to judge by), and for the components
# view's single calls: a line fitted to the H200 runs of 2026-12-02, kept so those verdicts still read as they did.
# A stage profiled now is judged by its host wait (`bottleneck`).
BUSY_THRESHOLD = 0.90
DELTA_MIN_MS = 0.05
MINUS = "\u2212"


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# CUDA kernel names -> category; first match wins, OTHER when none does. Order matters:
# - NCCL first: its names carry reduction and dtype words.
# - Optimizer next: every multi-tensor-apply kernel counts as optimizer. In these steps the foreach kernels
#   ARE the optimizer update (torch Adam foreach/fused, Apex FusedAdam, GradScaler's unscale/inf check,
#   foreach grad clipping), whatever arithmetic functor (BinaryOpListAlpha, PointwiseOpScalarList, ...) they run.
# - Attention before GEMM: flash/fmha/cuDNN-SDPA names carry cutlass, wgmma and dot words.
# - Inductor names a fusion after all its ops: copy-only fusions are casts, any other is arithmetic, unless
#   it holds a normalization (taken earlier), so "_to_copy" inside a bigger fusion does not make it a cast.
KERNEL_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("communication", _rx(r"nccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device_reduce")),
    ("optimizer", _rx(r"multi_tensor_apply|AdamFunctor|FusedAdam|fused_adam|_amp_(foreach_)?non_finite"
                      r"|amp_update_scale")),
    ("attention", _rx(r"flash_(fwd|bwd)|flash::|pytorch_flash|fmha|sdpa|attention|attn_(fwd|bwd)"
                      r"|cudnn::fusion::(compute_dot_do_o|convert_dq|lean_reduction)")),
    ("gemm", _rx(GEMM_KERNEL_PATTERN)),
    ("normalization", _rx(r"layer_?norm|rms_?norm|batch_?norm|group_?norm|GammaBeta|cuComputeGradInput"
                          r"|cuComputePartGradGamma|cuComputeGradGamma|RowwiseMoments|ComputeInternalGradients"
                          r"|ComputeGradientFusedParams")),
    ("cast/copy", _rx(r"^triton_[a-z]+_fused(_+(to_copy|clone|cat|copy|view|unsafe_view|t|transpose|permute"
                      r"|expand|slice|select|squeeze|unsqueeze|lift_fresh))+_\d+$")),
    (OTHER, _rx(r"^triton_")),
    ("cast/copy", _rx(r"copy|Memcpy|Memset|CatArrayBatched")),
)

# CPU op names (torch.profiler's aten ops, autograd nodes and record_function ranges) -> category.
CPU_OP_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("communication", _rx(r"^(c10d::|_?c10d_functional::|gloo:|nccl:|record_param_comms$)|all_?reduce"
                          r"|all_?gather|reduce_?scatter|all_?to_?all")),
    ("optimizer", _rx(r"^Optimizer\.|^aten::(_fused_adamw?_?|_foreach_|_amp_)")),
    ("attention", _rx(r"scaled_dot_product|_flash_attention|_efficient_attention|ScaledDotProduct"
                      r"|FlashAttention|EfficientAttention")),
    ("gemm", _rx(r"^aten::(mm|addmm|bmm|baddbmm|addbmm|addmv|mv|dot|linear|matmul|_addmm_activation|_scaled_mm"
                 r"|mkldnn_linear|_mkldnn_linear)$|^(Addmm|Mm|Bmm|Baddbmm|Addbmm|Addmv|Mv|Dot|Linear|Matmul)Backward")),
    ("normalization", _rx(r"layer_?norm|rms_?norm|batch_?norm|group_?norm")),
    ("cast/copy", _rx(r"^aten::(copy_|to|_to_copy|clone|contiguous|_copy_from|_copy_from_and_resize|cat)$"
                      r"|^(ToCopy|Clone|Cat)Backward")),
)
_AUTOGRAD_PREFIX = "autograd::engine::evaluate_function: "
# record_function ranges of torch.optim: everything run inside them is the optimizer's
_OPTIMIZER_RANGES = ("Optimizer.step#", "Optimizer.zero_grad#")


def _first_match(rules: tuple[tuple[str, re.Pattern[str]], ...], name: str) -> str:
    for category, pattern in rules:
        if pattern.search(name):
            return category
    return OTHER


@functools.lru_cache(maxsize=1 << 16)  # a trace repeats a few hundred distinct names thousands of times
def kernel_category(name: str) -> str:
    return _first_match(KERNEL_RULES, name)


@functools.lru_cache(maxsize=1 << 16)
def cpu_op_category(name: str) -> str:
    return _first_match(CPU_OP_RULES, name.removeprefix(_AUTOGRAD_PREFIX))


def union_us(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of (start, end) intervals: overlaps and nesting count once."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted((s, max(s, e)) for s, e in intervals):
        if end > reach:  # sorted by start: only the part past what is already covered is new
            total += end - max(start, reach)
            reach = end
    return total


def busy_fraction(intervals: Iterable[tuple[float, float]]) -> float | None:
    """Union of the intervals / (last end - first start); None when empty or of zero span."""
    spans = [(s, max(s, e)) for s, e in intervals]
    span = max(e for _, e in spans) - min(s for s, _ in spans) if spans else 0.0
    return union_us(spans) / span if span > 0 else None


@dataclass(frozen=True)
class StageProfile:
    source: str                               # "cuda" | "cpu"
    steps: int
    gpu_kernel_ms: float | None               # union of kernel time per step
    trace_busy: float | None                  # trace's union / span: the profiler slows the host, so a low bound,
    #                                           never shown; the shown figure is Bottleneck.busy (kernel share)
    kernels_per_step: float | None
    breakdown_ms: dict[str, float] = field(default_factory=dict)  # category -> ms per step
    top: tuple[tuple[str, str, float, float], ...] = ()         # (name, category, ms/step, calls/step)
    idle: IdleBreakdown | None = None         # why the GPU idled (CUDA traces with runtime calls; else None)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "steps": self.steps, "gpu_kernel_ms": self.gpu_kernel_ms,
                "trace_busy": self.trace_busy, "kernels_per_step": self.kernels_per_step,
                "breakdown_ms": dict(self.breakdown_ms), "top": [list(row) for row in self.top],
                "idle": self.idle.to_dict() if self.idle else None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StageProfile:
        return cls(source=d["source"], steps=int(d["steps"]), gpu_kernel_ms=d.get("gpu_kernel_ms"),
                   # files written before the rename call it gpu_busy
                   trace_busy=d.get("trace_busy", d.get("gpu_busy")), kernels_per_step=d.get("kernels_per_step"),
                   breakdown_ms={str(k): float(v) for k, v in (d.get("breakdown_ms") or {}).items()},
                   top=tuple((str(n), str(c), float(ms), float(calls)) for n, c, ms, calls in d.get("top") or ()),
                   idle=IdleBreakdown.from_dict(d["idle"]) if d.get("idle") else None)  # older files have none


def _aggregate(rows: Iterable[Sequence[Any]], classify, steps: int) -> tuple[dict[str, float], tuple, int]:
    """rows of (name, us, [category or None]) -> (ms per step by category, top rows, row count)."""
    per_key: dict[tuple[str, str], list[float]] = {}
    count = 0
    for row in rows:
        name, us = row[0], float(row[1])
        category = row[2] if len(row) > 2 and row[2] else classify(name)
        acc = per_key.get((name, category))
        if acc is None:
            per_key[(name, category)] = [us, 1.0]
        else:
            acc[0] += us
            acc[1] += 1.0
        count += 1
    by_category = dict.fromkeys(CATEGORIES, 0.0)
    for (_, category), (us, _) in per_key.items():
        by_category[category] = by_category.get(category, 0.0) + us / 1e3 / steps
    ranked = sorted(per_key.items(), key=lambda kv: -kv[1][0])[:TOP_N]
    top = tuple((name[:NAME_CHARS], category, us / 1e3 / steps, calls / steps)
                for (name, category), (us, calls) in ranked)
    return by_category, top, count


def profile_from_kernels(kernels: Iterable[Sequence[Any]], steps: int) -> StageProfile:
    """kernels: (name, start_us, dur_us[, category]) for each device activity (kernel, memcpy, memset)
    of `steps` steps; a given category overrides the name rules (see `from_trace`)."""
    steps = max(1, int(steps))
    kernels = list(kernels)
    intervals = [(float(k[1]), float(k[1]) + float(k[2])) for k in kernels]
    by_category, top, count = _aggregate(((k[0], k[2], *k[3:4]) for k in kernels), kernel_category, steps)
    return StageProfile("cuda", steps, union_us(intervals) / 1e3 / steps if kernels else None,
                        busy_fraction(intervals), count / steps, by_category, top)


def profile_from_cpu_ops(ops: Iterable[Sequence[Any]], steps: int) -> StageProfile:
    """ops: (name, self_us[, category]) for each CPU op call of `steps` steps."""
    steps = max(1, int(steps))
    by_category, top, _ = _aggregate(ops, cpu_op_category, steps)
    return StageProfile("cpu", steps, None, None, None, by_category, top)


# --- a trace's figures -----------------------------------------------------------------------------------
def _sweep(ops: Iterable[HostOp]) -> list[tuple[str, float, bool, int]]:
    """(name, self ns, inside an optimizer range, correlation id) of each CPU op, by the rule of torch's own
    event tree: per thread, ops sorted by (start, -end); an op's parent is the innermost open op containing it.
    Self time = duration - the children's durations, so nested ranges (Optimizer.step#, autograd's
    evaluate_function, aten::linear over aten::addmm) are never counted twice."""
    out: list[list[Any]] = []
    stack: list[tuple[float, bool, int]] = []      # (end, in optimizer, index in out)
    thread = None
    for th, start, end, name, corr in sorted(ops, key=lambda op: (op.thread, op.start_ns, -op.end_ns, op.name,
                                                                   op.correlation)):
        if th != thread:
            stack, thread = [], th
        while stack and (start >= stack[-1][0] or end > stack[-1][0]):
            stack.pop()
        in_opt = name.startswith(_OPTIMIZER_RANGES)
        if stack:
            out[stack[-1][2]][1] -= end - start
            in_opt = in_opt or stack[-1][1]
        out.append([name, end - start, in_opt, corr])
        stack.append((end, in_opt, len(out) - 1))
    return [(name, max(0.0, self_ns), in_opt, corr) for name, self_ns, in_opt, corr in out]


def from_trace(trace: Trace, steps: int, cuda: bool) -> StageProfile:
    """A trace's StageProfile over `steps` steps.

    Anything launched inside torch.optim's `Optimizer.step#`/`zero_grad#` ranges counts as optimizer (except
    communication): the per-tensor Adam (foreach=False, and Adam on CPU) runs plain add/mul/lerp/sqrt, which
    the name rules alone would call elementwise. On CUDA a kernel is linked to the CPU op that launched it.
    On CPU the figures are self CPU times; the profiler's own ProfilerStep# ranges are left out (not work).
    """
    swept = _sweep(trace.ops)
    if cuda:
        in_opt = {corr for _, _, inside, corr in swept if inside}

        def override(name: str, linked: int) -> str | None:
            return "optimizer" if linked in in_opt and kernel_category(name) != "communication" else None
        kernels = [(a.name, a.start_ns / 1e3, a.dur_ns / 1e3, override(a.name, a.launched_by))
                   for a in trace.activities]
        return replace(profile_from_kernels(kernels, steps), idle=idle_of(trace, steps))
    rows = [(name, self_ns / 1e3, "optimizer" if inside and cpu_op_category(name) != "communication" else None)
            for name, self_ns, inside, _ in swept if not name.startswith("ProfilerStep")]
    return profile_from_cpu_ops(rows, steps)


# --- verdicts ------------------------------------------------------------------------------------------------
class Bound(StrEnum):
    """Who sets a step's pace. A StrEnum: files and tables keep the words."""
    GPU = "gpu-bound"
    LAUNCH = "launch-bound"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Bottleneck:
    verdict: Bound
    busy: float | None
    sentence: str
    host_wait_share: float | None = None   # of a timed step, from the trace's idle attribution (see `bottleneck`)

    @property
    def busy_text(self) -> str | None:
        return None if self.busy is None else busy_text(self.busy)

    @property
    def figure_text(self) -> str | None:
        """The figure that decided the verdict, shown beside it in every view: a launch-bound stage's host wait
        (never its kernel share, which reads as busy); a gpu-bound one's kernel share (kernel time ÷ step time)."""
        if self.verdict == Bound.GPU and self.busy is not None:
            return f"kernels {busy_text(self.busy)} of the step"
        if self.verdict == Bound.LAUNCH and self.host_wait_share is not None:
            return f"host wait {share_text(self.host_wait_share)} of the step"
        if self.verdict == Bound.LAUNCH and self.busy is not None:
            return f"GPU idle {share_text(1 - self.busy)} of the step"
        return None

    @property
    def cell_text(self) -> str | None:
        if self.verdict == Bound.UNKNOWN:
            return None
        return str(self.verdict) + (f" ({self.figure_text})" if self.figure_text else "")


def busy_text(busy: float) -> str:
    """A whole percent, unless rounding would carry it across the 90% line (0.896 is "89.6%", not "90%": it is
    launch-bound, and the text must not say otherwise)."""
    for digits in range(4):
        text = f"{busy:.{digits}%}"
        if (float(text[:-1]) >= 100 * BUSY_THRESHOLD) == (busy >= BUSY_THRESHOLD):
            return text
    return f"{busy:.4%}"


def share_text(share: float) -> str:
    return f"{share:.1%}" if share < 0.095 else f"{share:.0%}"


def bottleneck(profile: StageProfile | None, median_ms: float | None, host_ms: float | None = None) -> Bottleneck:
    """Who set the pace of the timed steps. GPU busy = kernel time per step (union) / median step time of the
    timed, unprofiled steps, capped at 1: shown, and the verdict of records without an idle attribution.

    With one (`profile.idle`), the verdict is the host wait's: `launch-bound` when the timed steps' host wait
    (`IdleBreakdown.timed_host_wait_ms`) is more than the trace's timestamps could make of nothing
    (`IdleBreakdown.bound_us`, from their resolution: `idle.host_wait_bound_us`) and at least `stats.EQUIVALENCE`
    of the step: the host wait is the most a faster host could take off the step, and less than that margin is,
    by the tool's own convention, no measurable effect. No line fitted to results."""
    if profile is not None and profile.source == "cpu":
        return Bottleneck(Bound.UNKNOWN, None, "No GPU: the step runs on the CPU, so there is no launch/GPU split.")
    if profile is None or not profile.gpu_kernel_ms or not median_ms or median_ms <= 0:
        return Bottleneck(Bound.UNKNOWN, None, "No kernel trace for this stage, so the GPU/host split is unknown.")
    kernel_ms = profile.gpu_kernel_ms
    busy = min(1.0, kernel_ms / median_ms)
    idle = profile.idle
    if idle is not None:
        return _by_host_wait(idle, busy, median_ms)
    if busy >= BUSY_THRESHOLD:
        return Bottleneck(Bound.GPU, busy,
                          f"GPU busy {busy_text(busy)} of the step: kernels, not the host, set the pace.")
    why = (f"host {host_ms:.1f} ms to enqueue a step of {kernel_ms:.1f} ms of kernels" if host_ms
           else f"a step of {median_ms:.1f} ms holds {kernel_ms:.1f} ms of kernels")
    return Bottleneck(Bound.LAUNCH, busy,
                      f"GPU busy {busy_text(busy)}: the CPU cannot enqueue kernels as fast as the GPU runs them "
                      f"({why}); this stage's time depends on the host CPU. "
                      "CUDA graphs (the `graphs` lever) remove this.")


def _by_host_wait(idle: IdleBreakdown, busy: float, median_ms: float) -> Bottleneck:
    if idle.gaps and idle.unlinked_gaps == idle.gaps:
        return Bottleneck(Bound.UNKNOWN, busy, "No GPU activity in the trace is tied to its launch call, so the "
                                               "host wait is unknown.")
    step_us = median_ms * 1e3
    waited = idle.timed_host_wait_ms(median_ms) * 1e3 / step_us
    bound = idle.bound_us / idle.steps / step_us
    shares = (f"the GPU waited for the host {share_text(waited)} of the step ({share_text(idle.host_wait_share)} "
              f"of the profiled steps, whose host the profiler slows), other idle {share_text(idle.other_idle_share)}")
    if waited > bound and waited < EQUIVALENCE:
        return Bottleneck(Bound.GPU, busy,
                          f"GPU busy {busy_text(busy)} of the step: the host does not set the pace ({shares}; "
                          f"resolved, but under the {EQUIVALENCE:.0%} a host of any speed would need to make a "
                          "measurable difference).", waited)
    if waited > bound:
        return Bottleneck(Bound.LAUNCH, busy,
                          f"launch-bound: {shares}; more than the {share_text(bound)} that "
                          f"{TIMESTAMP_RESOLUTION_US:g} µs timestamps could make of none. GPU busy {busy_text(busy)}. "
                          "This stage's time depends on the host CPU; CUDA graphs (the `graphs` lever) remove this.",
                          waited)
    return Bottleneck(Bound.GPU, busy,
                      f"GPU busy {busy_text(busy)} of the step: kernels, not the host, set the pace ({shares}; "
                      f"within the {share_text(bound)} that {TIMESTAMP_RESOLUTION_US:g} µs timestamps cannot "
                      "resolve).", waited)


@dataclass(frozen=True)
class StageDelta:
    ms_by_category: dict[str, float]
    kernels_per_step: float | None
    text: str


def _signed(value: float, decimals: int) -> str:
    return ("+" if value > 0 else MINUS) + f"{abs(value):.{decimals}f}"


def delta(prev: StageProfile, cur: StageProfile, title: str) -> StageDelta:
    """What a lever changed between two stages' profiles, e.g.
    "Apex FusedLN: normalization −0.4 ms, cast/copy +3.1 ms, +173 kernels per step"."""
    extra = [c for c in (*prev.breakdown_ms, *cur.breakdown_ms) if c not in CATEGORIES]
    diff = {c: cur.breakdown_ms.get(c, 0.0) - prev.breakdown_ms.get(c, 0.0) for c in (*CATEGORIES, *extra)}
    parts = [f"{c} {_signed(d, 1 if abs(d) >= 0.095 else 2)} ms" for c, d in diff.items()
             if abs(d) >= DELTA_MIN_MS - 1e-9]
    dk = None
    if prev.kernels_per_step is not None and cur.kernels_per_step is not None:
        dk = cur.kernels_per_step - prev.kernels_per_step
        if round(dk) != 0:
            parts.append(f"{_signed(dk, 0)} kernels per step")
    text = f"{title}: " + (", ".join(parts) if parts else f"no change of {DELTA_MIN_MS} ms or more in any category")
    return StageDelta(diff, dk, text)
