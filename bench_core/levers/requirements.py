"""The levers' requirement checks: "why can this stage not run here" (None: it can), judged from the probe alone."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from bench_core.machine.packages import KernelPackage
from bench_core.machine.probe import Probe

MAX_CPU_PROCESSES = 2  # gloo ranks on CPU: a functional check of the DDP path, not a speed figure
FP8_CAPABILITY = (8, 9)  # FP8 tensor cores: Ada (8.9) and Hopper (9.0) or newer



class Stage(Protocol):
    """What a requirement reads of the stage it judges (levers.stage.Stage is one): its levers' declared
    properties, never their names, so a new lever of an existing kind needs no rule here."""
    @property
    def levers(self) -> tuple[Any, ...]: ...
    @property
    def world_size(self) -> int: ...
    @property
    def norm_lever(self) -> Any: ...
    @property
    def compile_lever(self) -> Any: ...
    @property
    def precision_lever(self) -> Any: ...


Requirement = Callable[[Probe, str, Stage], "str | None"]


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


def needs_package(package: KernelPackage, what: str) -> Requirement:
    """The package imported in the probe's fresh process; else the probe's reason (not installed, or the error)."""
    def check(probe: Probe, device: str, stage: Stage) -> str | None:
        reason = probe.package_reason(package.name)
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
        if stage.compile_lever.traces_model:
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
    return next((lever.graph_blocker for lever in stage.levers if lever.graph_blocker), None)


def requires_native_norm(why: str) -> Requirement:
    """A lever that swaps torch's norm modules for its own takes the family's PyTorch norm, no vendor's."""
    def check(probe: Probe, device: str, stage: Stage) -> str | None:
        norm = stage.norm_lever
        if norm.vendor is None:
            return None
        return f"{why}: pick PyTorch's norm ({norm.native}), not {norm.name}"
    return check
