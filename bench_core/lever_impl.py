"""The levers' requirement checks and builders. levers.py names each lever once and points here.

A requirement answers "why can this stage not run here" (None: it can), judged from the probe alone. A builder
imports torch or the third-party package lazily, so the dashboard can import the registry without either.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .probe import Probe

if TYPE_CHECKING:
    from .levers import Stage

LR = 3e-4
MAX_CPU_PROCESSES = 2  # gloo ranks on CPU: a functional check of the DDP path, not a speed figure
FP8_CAPABILITY = (8, 9)  # FP8 tensor cores: Ada (8.9) and Hopper (9.0) or newer

Requirement = Callable[[Probe, str, "Stage"], "str | None"]


def no_requirement(probe: Probe, device: str, stage: Stage) -> str | None:
    return None


def all_of(*checks: Requirement) -> Requirement:
    def check(probe: Probe, device: str, stage: Stage) -> str | None:
        return next((r for r in (c(probe, device, stage) for c in checks) if r), None)
    return check


def needs_cuda(what: str) -> Requirement:
    def check(probe: Probe, device: str, stage: Stage) -> str | None:
        return None if device == "cuda" else f"{what} needs a CUDA device"
    return check


def needs_package(name: str, what: str) -> Requirement:
    """The package imported in the probe's fresh process; else the probe's reason (not installed, or the error)."""
    def check(probe: Probe, device: str, stage: Stage) -> str | None:
        reason = probe.package_reason(name)
        return None if reason is None else f"{what}: {reason}"
    return check


def needs_fp8(what: str) -> Requirement:
    def check(probe: Probe, device: str, stage: Stage) -> str | None:
        if device != "cuda":
            return f"{what} needs a CUDA GPU with FP8 tensor cores (compute capability >= 8.9)"
        cap = probe.cuda.capability
        if cap is None or tuple(cap) < FP8_CAPABILITY:
            return f"{what} needs compute capability >= 8.9; this GPU is {'.'.join(map(str, cap or ('?',)))}"
        return None
    return check


def requires_apex_adam(probe: Probe, device: str, stage: Stage) -> str | None:
    if device != "cuda":
        return "Apex FusedAdam runs CUDA kernels only (amp_C); no CPU path"
    return probe.apex_reason("amp_C")


def requires_apex_norm(title: str, fallback: str, judge: Callable[[Probe], str | None]) -> Requirement:
    """Apex's norm runs its CUDA kernel only eagerly on a GPU; there, `judge` (the probe's verdict) decides."""
    def check(probe: Probe, device: str, stage: Stage) -> str | None:
        if stage.compile == "compile":
            return f"Apex {title} falls back to {fallback} under torch.compile"
        if device != "cuda":
            return f"Apex {title} falls back to {fallback} on CPU"
        return judge(probe)
    return check


def requires_fused_adam(probe: Probe, device: str, stage: Stage) -> str | None:
    if probe.adam_fused.get(device):
        return None
    return f"torch.optim.Adam(fused=True) is not supported on {device} in torch {probe.torch or '?'}"


def requires_dtype(dtype: str) -> Requirement:
    def check(probe: Probe, device: str, stage: Stage) -> str | None:
        if getattr(probe, dtype).get(device):
            return None
        where = "this GPU" if device == "cuda" else "this CPU build of torch"
        return f"{dtype} autocast not supported on {where}"
    return check


def requires_gpus(n: int) -> Requirement:
    def check(probe: Probe, device: str, stage: Stage) -> str | None:
        if device == "cuda":
            have = probe.cuda.device_count
            return None if n <= have else f"needs {n} GPUs; this machine has {have}"
        return None if n <= MAX_CPU_PROCESSES else f"on CPU at most {MAX_CPU_PROCESSES} gloo processes"
    return check


def requires_zero(probe: Probe, device: str, stage: Stage) -> str | None:
    return None if stage.world_size > 1 else "ZeroRedundancyOptimizer shards Adam state across ranks: needs gpus > 1"


def requires_apex_dist_adam(probe: Probe, device: str, stage: Stage) -> str | None:
    if stage.world_size < 2 or device != "cuda":
        return "Apex DistributedFusedAdam needs gpus > 1 on CUDA"
    if not probe.apex.distributed_adam:
        return "Apex built without DistributedFusedAdam (rebuild with APEX_DISTRIBUTED_ADAM=1)"
    return probe.apex_reason("amp_C")


def requires_compile(probe: Probe, device: str, stage: Stage) -> str | None:
    usable, reason = probe.compile.get(device, (False, "unknown"))
    return None if usable else f"torch.compile not usable on {device}: {reason}"


def requires_graphs(probe: Probe, device: str, stage: Stage) -> str | None:
    if device != "cuda":
        return "CUDA graphs capture GPU work: needs a CUDA device"
    if stage.world_size > 1:
        return "the graphs stage captures one process's step: gpus must be 1"
    if stage.precision == "fp16":
        return "GradScaler's inf checks sync with the host: FP16 + GradScaler cannot be captured in one graph"
    if not stage.optimizer_lever.capturable:
        return f"{stage.optimizer_lever.title} has no capturable mode for CUDA graphs"
    if stage.precision_lever.plan.convert is not None:
        return "FP8 modules rescale from amax on the host between steps: not captured in this tool's graphs stage"
    return None


def requires_te_norm(probe: Probe, device: str, stage: Stage) -> str | None:
    if stage.norm not in ("layernorm", "rmsnorm"):
        return "te-fp8 swaps in TE's own LayerNorm/RMSNorm: pick the layernorm (gpt) or rmsnorm (llama) lever"
    return None


# ---------------------------------------------------------------- builders (torch imported lazily)
def adam(**kw: Any) -> Callable[..., Any]:
    def build(params: Any, capturable: bool = False) -> Any:
        import torch
        return torch.optim.Adam(params, lr=LR, **kw, **({"capturable": True} if capturable else {}))  # type: ignore[arg-type]
    return build


def apex_fused_adam(params: Any, capturable: bool = False) -> Any:
    from apex.optimizers import FusedAdam
    return FusedAdam(params, lr=LR, adam_w_mode=False, capturable=capturable)


def zero_adam(params: Any, capturable: bool = False) -> Any:
    import torch
    from torch.distributed.optim import ZeroRedundancyOptimizer
    return ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.Adam, lr=LR)


def apex_dist_adam(params: Any, capturable: bool = False) -> Any:
    from apex.contrib.optimizers.distributed_fused_adam import DistributedFusedAdam
    return DistributedFusedAdam(params, lr=LR, adam_w_mode=False)


def layernorm() -> Any:
    import torch.nn as nn
    return nn.LayerNorm


def rmsnorm() -> Any:
    import torch.nn as nn
    return nn.RMSNorm


def apex_fused_ln() -> Any:
    from apex.normalization import FusedLayerNorm
    return FusedLayerNorm


def apex_fused_rms() -> Any:
    from apex.normalization import FusedRMSNorm
    return FusedRMSNorm


def liger_ln() -> Any:
    from liger_kernel.transformers import LigerLayerNorm

    class LigerLN(LigerLayerNorm):  # torch.nn.LayerNorm's eps, and a (zero-initialised) bias as GPT's has
        def __init__(self, width: int):
            super().__init__(width, eps=1e-5)
    return LigerLN


def liger_rms() -> Any:
    from liger_kernel.transformers import LigerRMSNorm

    class LigerRMS(LigerRMSNorm):  # torch.nn.RMSNorm's default eps (dtype's eps) differs; Llama's is 1e-6 both
        def __init__(self, width: int):
            super().__init__(width, eps=1e-6)
    return LigerRMS


def cross_entropy_head() -> Any:
    from .model import cross_entropy_head as head
    return head


def liger_flce_head() -> Any:
    """LM head + cross-entropy in chunks: the (tokens x vocab) logits are never materialised."""
    from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss
    loss_fn = LigerFusedLinearCrossEntropyLoss()

    def head(hidden: Any, weight: Any, targets: Any) -> tuple[Any, Any]:
        if targets is None:
            import torch.nn.functional as F
            return F.linear(hidden, weight), None
        return None, loss_fn(weight, hidden.view(-1, hidden.size(-1)), targets.view(-1))
    return head


def torchao_float8(model: Any) -> Any:
    """torchao float8 training: every nn.Linear in the blocks becomes Float8Linear (dynamic tensorwise scaling);
    the LM head stays in BF16, as torchao recommends for the output layer."""
    from torchao.float8 import convert_to_float8_training
    return convert_to_float8_training(model, module_filter_fn=lambda module, fqn: fqn.startswith("blocks."))


def transformer_engine_fp8(model: Any) -> Any:
    """Transformer Engine: each block's Linear and norm become te.Linear / te.LayerNorm / te.RMSNorm, weights
    copied; the step then runs under te.fp8_autocast (see precision lever te-fp8)."""
    import torch
    import transformer_engine.pytorch as te

    def swap(parent: Any) -> None:
        for name, child in parent.named_children():
            if isinstance(child, torch.nn.Linear):
                new = te.Linear(child.in_features, child.out_features, bias=child.bias is not None)
            elif isinstance(child, (torch.nn.LayerNorm, torch.nn.RMSNorm)):
                cls = te.LayerNorm if isinstance(child, torch.nn.LayerNorm) else te.RMSNorm
                new = cls(child.normalized_shape[0], eps=child.eps or 1e-6)
            else:
                swap(child)
                continue
            with torch.no_grad():
                for key, value in child.state_dict().items():
                    getattr(new, key).copy_(value)
            setattr(parent, name, new)
    for block in model.blocks:
        swap(block)
    return model


def te_fp8_context() -> Any:
    import transformer_engine.pytorch as te
    return te.fp8_autocast(enabled=True)
