"""Levers on any model, through the one mechanism the lever spec declares: its `surgery` (a NormSwap, a
LigerEntryPoint, a Float8Convert). A built-in family builds with the stage's parts instead (models.families); its
parts are recorded, not swapped. `apply_levers` returns what each lever changed (levers.changes.SurgeryReport) or
why it cannot act on this model; the worker refuses such a stage before any measured work.

Torch and the vendors' packages are imported lazily: the registry declares surgeries at import.
"""
from __future__ import annotations

import contextlib
import inspect
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bench_core.levers.changes import LeverChange, SurgeryReport, Swap
from bench_core.models.families import ModelParts, NormType

FP32_UNIT_ROUNDOFF = 2.0 ** -24
# The elementwise roundings of one norm output besides its n-term reductions: divide by n, add eps, sqrt, divide
# (or rsqrt and multiply), subtract the mean, multiply by the weight, add the bias, and one for a fused
# implementation's reassociation of those: 8.
NORM_ELEMENTWISE_OPS = 8
PROBE_ROWS = 16
PROBE_SEED = 1234
LIGER_FLAGS = ("rope", "cross_entropy", "fused_linear_cross_entropy", "rms_norm", "swiglu", "geglu", "layer_norm")


@dataclass(frozen=True)
class NormSwap:
    """Every norm module of type `source` is replaced by `target()`'s class, reusing its weight (and bias); each
    swap is checked on a probe input (norm_swap_bound) before the run starts."""
    source: NormType
    target: Callable[[], type] = field(compare=False)
    library: str = "Apex"


@dataclass(frozen=True)
class LigerEntryPoint:
    """Liger's own per-model-type entry point (apply_liger_kernel_to_<model_type>), with these parts on and every
    other part off: rms_norm, swiglu, rope, fused_linear_cross_entropy, layer_norm."""
    parts: tuple[str, ...]


@dataclass(frozen=True)
class Float8Convert:
    """torchao's convert_to_float8_training on nn.Linear layers, but not the LM head (kept in high precision, as
    torchao and torchtitan do) nor a layer with a dim not divisible by `multiple` (float8 GEMMs need it)."""
    multiple: int = 16


Surgery = NormSwap | LigerEntryPoint | Float8Convert


class SurgeryUnavailable(RuntimeError):
    """A lever cannot act on this model: the stage is unavailable, with this reason."""


def built_with_parts(model: Any) -> bool:
    """A built-in family's model (built with the stage's parts); a Hugging Face adapter exposes its model as `.hf`."""
    return not hasattr(model, "hf")


def model_type(model: Any) -> str | None:
    hf = getattr(model, "hf", None)
    return getattr(model, "model_type", None) or getattr(getattr(hf, "config", None), "model_type", None)


def apply_levers(model: Any, stage: Any, torch: Any, parts: ModelParts | None = None) -> SurgeryReport:
    """Each lever's surgery on `model`, in the stage's kind order; a built-in model's parts recorded as built.
    Stops at the first lever that cannot act on this model (its change says why)."""
    changes: list[LeverChange] = []
    own = built_with_parts(model)
    for lever in stage.levers:
        surgery = getattr(lever, "surgery", None)
        change: LeverChange | None
        if isinstance(surgery, Float8Convert):
            change = convert_float8(model, lever.name, surgery, torch)
        elif own:
            change = _built_part(model, lever, parts)
        elif isinstance(surgery, NormSwap):
            change = swap_norms(model, lever.name, surgery, torch)
        elif isinstance(surgery, LigerEntryPoint):
            change = apply_liger(model, lever.name, surgery)
        else:
            change = None
        if change is not None:
            changes.append(change)
            if change.unavailable:
                break
    return SurgeryReport(tuple(changes))


def _built_part(model: Any, lever: Any, parts: ModelParts | None) -> LeverChange | None:
    """A built-in model's part, as built: how many modules of the lever's class it holds (a loss head: once)."""
    part = parts.get(lever.kind) if parts is not None else None
    if part is None or getattr(lever, "plain", False):
        return None
    if isinstance(part, type):
        n = sum(1 for m in model.modules() if isinstance(m, part))
        return LeverChange(lever.name, swaps=(Swap(part.__name__, part.__name__, n),), built_in=True)
    return LeverChange(lever.name, swaps=(Swap("loss head", getattr(part, "__qualname__", str(part)), 1),),
                       built_in=True)


# ---------------------------------------------------------------- norm swap
def _is_norm(module: Any, source: NormType, torch: Any) -> bool:
    if source == NormType.LAYERNORM:
        return isinstance(module, torch.nn.LayerNorm) or type(module).__name__.endswith("LayerNorm")
    return isinstance(module, torch.nn.RMSNorm) or type(module).__name__.endswith("RMSNorm")


def _eps(module: Any, torch: Any) -> float:
    # HF's *RMSNorm keep eps in variance_epsilon; torch's RMSNorm may hold None: its dtype's eps then
    eps = getattr(module, "variance_epsilon", None)
    eps = getattr(module, "eps", None) if eps is None else eps
    return float(torch.finfo(torch.float32).eps if eps is None else eps)


def norm_swap_bound(x: Any, weight: Any, bias: Any, centered: bool, torch: Any) -> float:
    """The largest |a - b| two float32 implementations of one norm may differ by on input `x` (rows of n), with
    u = 2^-24, K = NORM_ELEMENTWISE_OPS and c = 2:
    RMSNorm: c (n + K) u max|w| max|x_hat|; LayerNorm: c (n + K) u (kappa max|w| (max|x_hat| + 1) + max|b|).

    Why: each computes y = w (x - mu) / sqrt(v + eps) + b (mu = 0 for RMS). An n-term float32 sum errs by at most
    n u times the sum of its terms' magnitudes (Higham, recursive summation; a parallel tree only does better), and
    each of the K elementwise steps adds one rounding u. RMS sums squares, all >= 0: v's relative error is <= n u,
    so |y_hat - y| <= (n + K) u |y|. LayerNorm's mean errs by n u max|x|, which divided by sigma is n u kappa,
    kappa = max|x| / sigma, so |y_hat - y| <= (n + K) u (kappa |w| (|x_hat| + 1) + |b|). Each implementation is
    within that of the exact value: two of them within twice that of each other (c = 2)."""
    x64 = x.detach().double()
    n = x64.shape[-1]
    centred = x64 - x64.mean(-1, keepdim=True) if centered else x64
    spread = centred.pow(2).mean(-1, keepdim=True).sqrt().clamp_min(1e-30)
    kappa = float((x64.abs().amax(-1, keepdim=True) / spread).max())
    x_hat = float((centred / spread).abs().max())
    w = float(weight.detach().double().abs().max()) if weight is not None else 1.0
    b = float(bias.detach().double().abs().max()) if bias is not None else 0.0
    scale = kappa * w * (x_hat + 1) + b if centered else w * x_hat
    return 2 * (n + NORM_ELEMENTWISE_OPS) * FP32_UNIT_ROUNDOFF * scale


def _shape(old: Any) -> tuple[int, ...] | None:
    weight = getattr(old, "weight", None)
    shape = getattr(old, "normalized_shape", None) or (tuple(weight.shape) if weight is not None else None)
    return tuple(shape) if shape else None


def _make_norm(cls: type, old: Any, shape: tuple[int, ...], source: NormType, torch: Any) -> Any:
    weight, bias = getattr(old, "weight", None), getattr(old, "bias", None)
    kwargs: dict[str, Any] = {"eps": _eps(old, torch), "elementwise_affine": weight is not None}
    # made where the old norm lives, whatever device context the build runs under
    with torch.device(weight.device) if weight is not None else contextlib.nullcontext():
        new = cls(shape, **kwargs)
    if weight is not None:
        new.weight = weight          # the same Parameter: the optimizer and any tie see one tensor
    if source == NormType.LAYERNORM:
        new.bias = bias
    return new


def swap_norms(model: Any, lever: str, swap: NormSwap, torch: Any) -> LeverChange:
    """Swap every `swap.source` norm module for the target class, each checked on a probe input first."""
    try:
        cls = swap.target()
    except ImportError as exc:
        return LeverChange(lever, unavailable=f"{swap.library} not installed: {exc}")
    found = [(name, m) for name, m in model.named_modules() if _is_norm(m, swap.source, torch)
             and not isinstance(m, cls)]
    counts: Counter[str] = Counter()
    worst = 0.0
    for name, old in found:
        shape = _shape(old)
        if shape is None:
            return LeverChange(lever, unavailable=f"{type(old).__name__} at {name} has no weight or normalized_shape "
                                                  f"to build {cls.__name__} from")
        new = _make_norm(cls, old, shape, swap.source, torch)
        weight = getattr(old, "weight", None)
        n = shape[-1]
        gen = torch.Generator(device="cpu").manual_seed(PROBE_SEED)
        # on the CPU by name: the model is built under `with torch.device("cuda")`, which would send randn there,
        # away from its CPU generator
        x = torch.randn(PROBE_ROWS, n, generator=gen, device="cpu").to(weight.device if weight is not None else "cpu")
        with torch.no_grad():
            a, b = old(x).float(), new(x).float()
        bound = norm_swap_bound(x, weight, getattr(old, "bias", None), swap.source == NormType.LAYERNORM, torch)
        gap = float((a.double() - b.double()).abs().max())
        if not gap <= bound:
            return LeverChange(lever, unavailable=(
                f"{type(old).__name__} at {name} and {cls.__name__} differ by {gap:.3g} on a probe input, beyond "
                f"the float32 bound {bound:.3g}: not the same function"))
        worst = max(worst, gap / bound if bound else 0.0)
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, child, new)
        counts[type(old).__name__] += 1
    swaps = tuple(Swap(src, cls.__name__, n) for src, n in sorted(counts.items()))
    note = f"probe outputs within {worst:.2f} of the float32 bound" if found else \
        f"no {swap.source} module in the model"
    return LeverChange(lever, swaps=swaps, note=note)


# ---------------------------------------------------------------- Liger
def liger_table() -> Mapping[str, Callable[..., Any]]:
    from liger_kernel.transformers.monkey_patch import MODEL_TYPE_TO_APPLY_LIGER_FN
    return MODEL_TYPE_TO_APPLY_LIGER_FN


def liger_entry(kind: str | None, parts: tuple[str, ...],
                table: Mapping[str, Callable[..., Any]]) -> tuple[Callable[..., Any], dict[str, bool]] | str:
    """(Liger's entry point for this model_type, its keywords: the parts on, every other part off) or why not.
    Liger's own _apply_liger_kernel_to_instance only logs and returns for an unknown type: here it is refused."""
    fn = table.get(kind or "")
    if fn is None:
        return f"Liger has no kernels for model_type {kind}"
    params = inspect.signature(fn).parameters
    missing = [p for p in parts if p not in params]
    if missing:
        return f"Liger's {fn.__name__} has no {', '.join(missing)} for model_type {kind}"
    return fn, {flag: flag in parts for flag in LIGER_FLAGS if flag in params}


def _bound_forward(module: Any) -> Any:
    return module.__dict__.get("forward")


def _target_name(fn: Any) -> str:
    func = getattr(fn, "__func__", fn)
    qual = getattr(func, "__qualname__", repr(func))
    return qual.split(".")[0] if "." in qual else f"{getattr(func, '__module__', '')}.{qual}".lstrip(".")


def apply_liger(model: Any, lever: str, entry: LigerEntryPoint,
                table: Mapping[str, Callable[..., Any]] | None = None) -> LeverChange:
    """Liger's entry point on the wrapped HF model: counts the modules whose forward it rebound. Its class-level
    replacements in the modeling module (which only models built later would use) are undone; a replaced function
    that the built model calls (rope) is kept and counted."""
    kind = model_type(model)
    try:
        found = liger_entry(kind, entry.parts, table if table is not None else liger_table())
    except ImportError as exc:
        return LeverChange(lever, unavailable=f"Liger-Kernel not installed: {exc}")
    if isinstance(found, str):
        return LeverChange(lever, unavailable=found)
    fn, kwargs = found
    hf = model.hf
    before = {id(m): _bound_forward(m) for m in hf.modules()}
    modeling = sys.modules.get(type(hf).__module__)
    globals_before = dict(vars(modeling)) if modeling else {}
    fn(model=hf, **kwargs)
    counts: Counter[tuple[str, str]] = Counter()
    for m in hf.modules():
        now = _bound_forward(m)
        if now is not None and now is not before.get(id(m)):
            counts[(type(m).__name__, _target_name(now))] += 1
    for name, value in (vars(modeling) if modeling else {}).copy().items():
        old = globals_before.get(name)
        if value is old or name not in globals_before:
            continue
        if isinstance(old, type):
            setattr(modeling, name, old)   # a class swap: the model is built already
        else:
            counts[(name, getattr(value, "__name__", str(value)))] += 1
    applied = f"{fn.__name__}({', '.join(entry.parts)})"
    return LeverChange(lever, swaps=tuple(Swap(s, t, n) for (s, t), n in sorted(counts.items())),
                       entry_points=(applied,))


# ---------------------------------------------------------------- torchao float8
def float8_candidates(model: Any, multiple: int, torch: Any) -> tuple[list[Any], Counter[str], int]:
    """(the layers to convert, why the others cannot be -> how many, how many layers there are): every nn.Linear
    or Conv1D but the LM head; a Conv1D (GPT-2's projections) is no nn.Linear, and torchao converts only those."""
    head = getattr(model, "lm_head", None)
    keep, why, total = [], Counter[str](), 0
    for module in model.modules():
        linear = isinstance(module, torch.nn.Linear)
        if module is head or not (linear or type(module).__name__ == "Conv1D"):
            continue
        total += 1
        if not linear:
            why[type(module).__name__] += 1
        elif module.in_features % multiple or module.out_features % multiple:
            why[f"dims not divisible by {multiple}"] += 1
        else:
            keep.append(module)
    return keep, why, total


def convert_float8(model: Any, lever: str, convert: Float8Convert, torch: Any) -> LeverChange:
    keep, why, total = float8_candidates(model, convert.multiple, torch)
    if not keep:
        reasons = ", ".join(f"{n} {r}" for r, n in sorted(why.items())) or "no linear layer"
        return LeverChange(lever, converted=0, candidates=total, not_converted=dict(why),
                           unavailable=f"0 of {total} layers convertible: {reasons}")
    try:
        from torchao.float8 import convert_to_float8_training
    except ImportError as exc:
        return LeverChange(lever, unavailable=f"torchao not installed: {exc}")
    chosen = {id(m) for m in keep}
    convert_to_float8_training(model, module_filter_fn=lambda module, fqn: id(module) in chosen)
    converted = sum(1 for m in model.modules() if type(m).__name__ == "Float8Linear")
    return LeverChange(lever, converted=converted, candidates=total, not_converted=dict(why),
                       note="LM head kept in high precision")
