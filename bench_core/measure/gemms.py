"""The GEMMs of a profiled step: each GEMM kernel's GPU time and the CPU op that launched it (with its input
shapes), the share of GEMM time a lever's rule counts (FP8: `kernels.FP8_SHARE`), the GEMMs outside it by name, and
the pseudo-names of GEMMs that built the full (tokens x vocab) logits. Torch-free: functions over one `trace.Trace`.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bench_core.levers.kernels import GemmOp, GemmShareRule, logits_pseudo_name
from bench_core.measure.breakdown import kernel_category
from bench_core.measure.trace import Source, Trace

GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
# The input that is the GEMM's first operand: addmm/baddbmm take the addend (`self`) first, and a fused head such
# as Liger's FLCE adds bf16 x bf16 products into an fp32 accumulator, which is not an fp32 GEMM.
GEMM_OPERAND = {"aten::mm": 0, "aten::bmm": 0, "aten::addmm": 1, "aten::baddbmm": 1}


def gemm_operand_dtype(op: str, dtypes: list[str]) -> str | None:
    """The dtype of a GEMM op's first operand, from the profiler's input dtypes; None if not a GEMM or unknown."""
    index = GEMM_OPERAND.get(op)
    return dtypes[index] if index is not None and len(dtypes) > index and dtypes[index] else None


@dataclass(frozen=True)
class GemmKernel:
    name: str
    us: float                  # GPU time over the profiled steps
    op: GemmOp | None          # the op that launched it; None when no CPU op is linked (a CUDA graph replay)


@dataclass(frozen=True)
class OtherGemm:
    """A GEMM kernel outside the rule's numerator, the op that launched it, and the role the rule expects it in."""
    kernel: str
    op: str                    # GemmOp.text, or "" when unknown
    ms: float                  # per step
    expected: str | None       # the ExpectedGemm's role ("lm_head", "attention"); None: the rule did not expect it

    @property
    def text(self) -> str:
        return f"{self.kernel[:80]} ({self.op or 'no CPU op linked'}, {self.ms:.2f} ms/step)"


@dataclass(frozen=True)
class GemmShare:
    """The share of GEMM time in a rule's kind of GEMM (e.g. FP8), from the kernels' GPU time per step."""
    label: str
    counted_ms: float
    gemm_ms: float
    others: tuple[OtherGemm, ...] = ()

    @property
    def share(self) -> float | None:
        return self.counted_ms / self.gemm_ms if self.gemm_ms > 0 else None

    @property
    def unexpected(self) -> tuple[OtherGemm, ...]:
        return tuple(g for g in self.others if g.expected is None)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "counted_ms": self.counted_ms, "gemm_ms": self.gemm_ms,
                "others": [[g.kernel, g.op, g.ms, g.expected] for g in self.others]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GemmShare:
        return cls(str(d["label"]), float(d["counted_ms"]), float(d["gemm_ms"]),
                   tuple(OtherGemm(str(k), str(op), float(ms), None if role is None else str(role))
                         for k, op, ms, role in d.get("others") or ()))


def gemm_share(kernels: Iterable[GemmKernel], rule: GemmShareRule, vocab: int, steps: int) -> GemmShare:
    """Each GEMM kernel (the breakdown's `gemm` category) counted in the rule's numerator or named outside it,
    with the role the rule expects it in (from its op), summed by (kernel, op)."""
    steps = max(1, steps)
    counted = total = 0.0
    others: dict[tuple[str, str, str | None], float] = {}
    for k in kernels:
        if kernel_category(k.name) != "gemm":
            continue
        total += k.us
        if rule.counts(k.name, k.op):
            counted += k.us
            continue
        role = next((e.role for e in rule.expected_other if k.op is not None and e.match(k.op, vocab)), None)
        key = (k.name, k.op.text if k.op else "", role)
        others[key] = others.get(key, 0.0) + k.us
    ranked = sorted(others.items(), key=lambda kv: -kv[1])
    return GemmShare(rule.label, counted / 1e3 / steps, total / 1e3 / steps,
                     tuple(OtherGemm(name, op, us / 1e3 / steps, role) for (name, op, role), us in ranked))


@dataclass(frozen=True)
class GemmTrace:
    """What the proofs read from a trace's GEMMs, beyond the event names."""
    dtypes: set[str] = field(default_factory=set)          # GEMM first-operand dtypes (proof.gemm_operand_dtype)
    kernels: tuple[GemmKernel, ...] = ()
    ops: tuple[GemmOp, ...] = ()                            # every GEMM-shaped op, for the full-logits check

    def logits_names(self, tokens: int, vocab: int) -> set[str]:
        return {n for n in (logits_pseudo_name(op, tokens, vocab) for op in self.ops) if n}


def gemm_trace(trace: Trace) -> GemmTrace:
    """GEMM ops' shapes and dtypes by correlation id, and each GEMM kernel tied to the op that launched it."""
    if trace.source == Source.FUNCTION_EVENTS:  # no launch links read that way: no GEMM facts rather than unlinked ones
        return GemmTrace()
    ops: dict[int, GemmOp] = {}
    dtypes: set[str] = set()
    # Under autocast a GEMM op called directly (Hugging Face GPT-2's Conv1D calls torch.addmm) is recorded twice:
    # as called, with its float inputs, and inside autocast with the cast ones. Only the inner one launches the
    # kernel, so where kernels are tied to ops, an op's dtype counts only if it launched a GEMM kernel. A product
    # with K = 1 is an outer product, no reduction for a precision to speed up: Hugging Face Llama's rotary
    # embedding takes frequencies x positions so, in float32 by design, autocast switched off around it.
    launching = {a.launched_by for a in trace.activities if a.launched_by and kernel_category(a.name) == "gemm"}
    tied = any(op.correlation in launching for op in trace.shaped_ops)
    for op in trace.shaped_ops:
        dtype = gemm_operand_dtype(op.name, list(op.dtypes))
        if dtype and (not tied or op.correlation in launching) and GemmOp(op.name, op.shapes).inner() != 1:
            dtypes.add(dtype)
        ops[op.correlation] = GemmOp(op.name, op.shapes)
    kernels = tuple(GemmKernel(a.name, a.dur_ns / 1e3, ops.get(a.launched_by)) for a in trace.activities
                    if kernel_category(a.name) == "gemm")
    return GemmTrace(dtypes, kernels, tuple(ops.values()))
