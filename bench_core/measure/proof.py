"""Proof of use: which key kernels a stage's profiler trace shows, the verdict on its levers, and the kernel
grid's cells. The worker decides the verdict once; summaries and figures read it, never re-judge it.

Torch-free; the worker feeds it the event names and GEMM input dtypes torch.profiler saw.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from bench_core.levers.changes import SurgeryReport
from bench_core.levers.kernels import KeyKernel
from bench_core.levers.lever_types import Lever, PartLever
from bench_core.levers.registry import KEY_KERNELS
from bench_core.levers.stage import Stage
from bench_core.measure.gemms import GemmShare, GemmTrace, gemm_operand_dtype, gemm_share, gemm_trace
from bench_core.measure.trace import Trace

__all__ = ["KEY_KERNELS", "KeyKernel", "CELL_STATES", "CellState", "Verdict", "gemm_operand_dtype"]


class Verdict(StrEnum):
    """The worker's verdict on a stage's levers; a StrEnum, so files keep the plain string."""
    VERIFIED = "verified"
    FALLBACK = "fallback"          # a vendor's lever (Apex, Liger...) did not run its kernels
    UNCONFIRMED = "unconfirmed"    # a PyTorch lever's kernels were not all seen


class CellState(StrEnum):
    """A kernel-grid cell, in the colour scale's order."""
    UNAVAILABLE = "unavailable"
    PENDING = "pending"
    NOT_USED = "not used"
    USED = "used"
    EXPECTED = "expected, not seen"
    FALLBACK = "fallback"
    IMPORTED = "imported"


DTYPE_NAMES = {"c10::BFloat16": "bfloat16", "c10::Half": "half", "float": "float", "double": "double"}

SDPA_BACKENDS = {
    "flash": "aten::_scaled_dot_product_flash_attention",
    "mem_efficient": "aten::_scaled_dot_product_efficient_attention",
    "cudnn": "aten::_scaled_dot_product_cudnn_attention",
    "math": "aten::_scaled_dot_product_attention_math",
    "cpu_flash": "aten::_scaled_dot_product_flash_attention_for_cpu",
}


def gemm_pseudo_names(dtypes: Iterable[str], tf32: bool) -> set[str]:
    """'gemm:<dtype>' for each GEMM input dtype seen; fp32 GEMMs with TF32 on are 'gemm:float+tf32'."""
    out = set()
    for raw in dtypes:
        name = DTYPE_NAMES.get(raw, raw)
        out.add("gemm:float+tf32" if name == "float" and tf32 else f"gemm:{name}")
    return out


def classify(names: Iterable[str]) -> dict[str, list[str]]:
    """Key kernel -> the distinct event names that matched it (at most 3, for display)."""
    seen: dict[str, list[str]] = {key: [] for key in KEY_KERNELS}
    for name in sorted(set(names)):
        for key, kernel in KEY_KERNELS.items():
            if kernel.match(name) and len(seen[key]) < 3:
                seen[key].append(name)
    return seen


def sdpa_backend(names: Iterable[str]) -> str | None:
    names = set(names)
    return next((backend for backend, op in SDPA_BACKENDS.items() if op in names), None)


@dataclass(frozen=True)
class Facts:
    """What the worker saw, beyond the trace's names: the optimizer object's class, the norm modules the model
    holds (class -> count), the switches it set, the share of GEMM time a lever's rule counts, what each lever
    changed in the model, whether the model was built with the stage's parts, and whether the forward gave logits."""
    optimizer_class: str | None = None
    norm_class: str | None = None          # one norm module alone (components); a stage reads norm_modules
    tf32_matmul: bool | None = None
    grad_scaler: bool | None = None
    norm_modules: Mapping[str, int] | None = None
    gemm_share: GemmShare | None = None
    surgery: SurgeryReport | None = None
    own_parts: bool = True                 # False: a model of its own (Hugging Face): its own parts are no lever's
    logits_returned: bool | None = None


@dataclass(frozen=True)
class Judgement:
    """The worker's reading of a profiled stage: key kernels seen, the verdict, and the GEMM share it judged."""
    seen: dict[str, list[str]]
    verdict: Verdict
    warnings: list[str]
    gemm_share: GemmShare | None


def judge(stage: Stage, device: str, names: Iterable[str], gemms: GemmTrace, facts: Facts, tf32: bool,
          tokens: int, vocab: int, steps: int) -> Judgement:
    """The event names, with the GEMMs' pseudo-names (dtypes, full logits), classified; the share rule of the
    stage's levers (FP8) measured on CUDA; then the verdict, once."""
    seen = classify(set(names) | gemm_pseudo_names(gemms.dtypes, tf32) | gemms.logits_names(tokens, vocab))
    rule = next((lever.share_of for lever in stage.levers if lever.share_of), None)
    share = gemm_share(gemms.kernels, rule, vocab, steps) if rule and device == "cuda" else None
    state, warnings = verdict(stage, device, seen, replace(facts, gemm_share=share))
    return Judgement(seen, state, warnings, share)


def judge_trace(stage: Stage, device: str, trace: Trace, facts: Facts, tf32: bool, tokens: int, vocab: int,
                steps: int) -> Judgement:
    """`judge` over one trace: its event names and its GEMMs."""
    return judge(stage, device, trace.names, gemm_trace(trace), facts, tf32, tokens, vocab, steps)


def verdict(stage: Stage, device: str, seen: Mapping[str, list[str]],
            facts: Facts = Facts()) -> tuple[Verdict, list[str]]:
    """(the verdict, warnings) for the levers of a stage."""
    state, warnings = lever_verdict(stage.levers, stage, device, seen, facts)
    switches = _switch_warnings(stage, facts)
    if switches:
        state = Verdict.UNCONFIRMED if state == Verdict.VERIFIED else state
        warnings += switches
    return state, warnings


def lever_verdict(levers: Iterable[Lever], stage: Stage, device: str, seen: Mapping[str, list[str]],
                  facts: Facts = Facts()) -> tuple[Verdict, list[str]]:
    """The verdict on some of a stage's levers only (the components view measures one lever alone)."""
    warnings: list[str] = []
    state = Verdict.VERIFIED
    for lever in levers:
        if not facts.own_parts and isinstance(lever, PartLever) and lever.surgery is None:
            continue   # the model's own part (its norm, its MLP, its loss): no lever acted, no kernel to expect
        missing = [k for k in lever.expected(device, stage) if not seen.get(k)]
        betrayed = [k.key for k in lever.betrayed_by if seen.get(k.key)]
        wrong_class = (_wrong_class(lever, stage, facts) or _share_shortfall(lever, facts)
                       or _inactive(lever, facts))
        if lever.vendor and (missing or betrayed or wrong_class):  # a named library (Apex, Liger...) not used
            state = Verdict.FALLBACK
            parts = [f"no {', '.join(KEY_KERNELS[k].label for k in missing)} kernel in the trace"] if missing else []
            parts += [f"trace shows {', '.join(KEY_KERNELS[k].label for k in betrayed)}"] if betrayed else []
            parts += [wrong_class] if wrong_class else []
            warnings.append(f"{lever.title} fell back to PyTorch: {'; '.join(parts)}")
        elif missing or betrayed or wrong_class:
            state = Verdict.UNCONFIRMED if state == Verdict.VERIFIED else state
            parts = [f"expected {', '.join(KEY_KERNELS[k].label for k in missing)} but the trace did not show it"] \
                if missing else []
            parts += [f"the trace also shows {', '.join(KEY_KERNELS[k].label for k in betrayed)}"] if betrayed else []
            parts += [wrong_class] if wrong_class else []
            warnings.append(f"{lever.title}: {'; '.join(parts)}")
    return state, warnings


def _wrong_class(lever: Lever, stage: Stage, facts: Facts) -> str | None:
    expected = getattr(lever, "expected_class", None)
    if not expected:
        return None
    if lever.kind == "norm" and facts.norm_modules is not None:
        if stage.precision_lever.swaps_norm:  # TE put its own norm modules in: not this lever's to answer for
            return None
        wrong = {cls: n for cls, n in facts.norm_modules.items() if cls != expected}
        if wrong or not facts.norm_modules:
            found = ", ".join(f"{n} {cls}" for cls, n in sorted(wrong.items())) or "no norm module"
            return f"the model holds {found}, not only {expected}"
        return None
    actual = facts.optimizer_class if lever.kind == "optimizer" else facts.norm_class
    if actual and actual != expected:
        return f"the worker built {actual}, not {expected}"
    return None


def _inactive(lever: Lever, facts: Facts) -> str | None:
    """Applied is not active: a lever whose surgery changed nothing in the model, or a fused loss head whose
    forward still gave logits (Liger's fused linear cross-entropy computes only in training with labels passed)."""
    change = facts.surgery.of(lever.name) if facts.surgery else None
    if change is not None and not change.changed:
        return f"it changed nothing in the model ({change.text})"
    if getattr(lever, "returns_logits", True) is False and facts.logits_returned:
        return "the forward returned logits, so the fused loss did not run (it runs only in training with labels)"
    return None


def _share_shortfall(lever: Lever, facts: Facts) -> str | None:
    """A share rule's verdict: every GEMM outside its numerator must be one it expects by name (the LM head...)."""
    share = facts.gemm_share
    if lever.share_of is None or share is None or share.share is None or not share.unexpected:
        return None
    names = "; ".join(g.text for g in share.unexpected[:3])
    more = f" and {len(share.unexpected) - 3} more" if len(share.unexpected) > 3 else ""
    return (f"{share.share:.0%} of GEMM time ran in {share.label}; GEMMs not {share.label} that the lever does not "
            f"expect: {names}{more}")


def _switch_warnings(stage: Stage, facts: Facts) -> list[str]:
    plan = stage.precision_lever.plan
    out = []
    if facts.tf32_matmul is not None and facts.tf32_matmul != plan.tf32:
        out.append(f"TF32 matmul was {'on' if facts.tf32_matmul else 'off'}, the stage asked for "
                   f"{'on' if plan.tf32 else 'off'}")
    if facts.grad_scaler is not None and facts.grad_scaler != plan.grad_scaler:
        out.append("GradScaler " + ("ran though the stage does not use it" if facts.grad_scaler else "did not run"))
    return out


# ---------------------------------------------------------------- the kernel grid's cells
CELL_STATES = tuple(CellState)


@dataclass(frozen=True)
class KernelCell:
    state: CellState
    why: str


def kernel_cells(stage: Stage, status: str, reason: str, kernels: Mapping[str, list[str]],
                 verdict_state: str | None, device: str, imported_from: str | None) -> dict[str, KernelCell]:
    """One cell per key kernel. An Apex lever's missing kernel is the fallback
    the worker's verdict already declared — the cell shows that verdict, it does not judge again."""
    if status == "unavailable":
        return {key: KernelCell(CellState.UNAVAILABLE, reason) for key in KEY_KERNELS}
    if not kernels:
        return {key: KernelCell(CellState.PENDING, f"{status}: the profiler runs after the timed iterations")
                for key in KEY_KERNELS}
    cells = {}
    for key in KEY_KERNELS:
        names = kernels.get(key) or []
        expecting = [lv for lv in stage.levers if key in lv.expected(device, stage)]
        betraying = [lv for lv in stage.levers if any(k.key == key for k in lv.betrayed_by)]
        if imported_from and names:
            cells[key] = KernelCell(CellState.IMPORTED, f"seen on {imported_from}, not here: " + ", ".join(names))
        elif names and betraying:
            asked = ", ".join(lv.title for lv in betraying)
            cells[key] = KernelCell(CellState.FALLBACK, f"{asked} asked, but the trace shows {names[0]}")
        elif names:
            cells[key] = KernelCell(CellState.USED, "seen: " + "<br>".join(names))
        elif expecting and any(lv.vendor for lv in expecting) and verdict_state == Verdict.FALLBACK:
            cells[key] = KernelCell(CellState.FALLBACK, "not in the trace: the stage's verdict is fallback")
        elif expecting:
            cells[key] = KernelCell(CellState.EXPECTED, "not in the trace")
        else:
            cells[key] = KernelCell(CellState.NOT_USED, "not in the trace")
    return cells

