"""The one registry of stage levers. A new lever is one entry in LEVERS, nothing else.

Each entry knows how to build its part (torch is imported lazily, so this module stays
importable by the dashboard), what it requires (a reason string when unavailable, judged
from the probe's data), which kernels prove it ran, and which betray a fallback.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

LR = 3e-4
KINDS = ("optimizer", "norm", "precision", "compile", "gpus")
MAX_CPU_PROCESSES = 2  # gloo ranks on CPU: a functional check of the DDP path, not a speed figure


@dataclass(frozen=True)
class Lever:
    kind: str
    name: str
    title: str
    snippet: str
    build: Callable[..., Any]
    requires: Callable[[dict, str, "Stage"], str | None] = lambda probe, device, stage: None
    expects: Callable[[str, "Stage"], tuple[str, ...]] = lambda device, stage: ()
    betrayed_by: tuple[str, ...] = ()
    is_apex: bool = False


@dataclass(frozen=True)
class PrecisionPlan:
    autocast_dtype: str | None   # "bfloat16" | "float16" | None
    tf32: bool
    grad_scaler: bool


# ---------------------------------------------------------------- requirement checks
def _apex_reason(probe: dict, ext: str, what: str) -> str | None:
    apex = probe.get("apex") or {}
    status = apex.get("status", "missing")
    if status == "missing":
        return "NVIDIA apex is not installed"
    if status == "impostor":
        dist = apex.get("distribution") or {}
        return f"not NVIDIA apex (found '{dist.get('name', 'apex')}' {dist.get('version', '?')})"
    info = (apex.get("extensions") or {}).get(ext) or {}
    if not info.get("found"):
        return f"apex {ext} extension not built ({what} needs --cuda_ext)"
    if not info.get("loadable"):
        return f"apex {ext} extension fails to load: {info.get('error') or 'unknown error'}"
    smoke = info.get("smoke") or {}
    if smoke.get("ok") is False:
        return f"apex {ext} failed its smoke test on this GPU: {smoke.get('error')}"
    return None


def _needs_cuda(what: str):
    def check(probe: dict, device: str, stage: "Stage") -> str | None:
        return None if device == "cuda" else f"{what} needs a CUDA device"
    return check


def _requires_apex_adam(probe: dict, device: str, stage: "Stage") -> str | None:
    if device != "cuda":
        return "Apex FusedAdam runs CUDA kernels only (amp_C); no CPU path"
    return _apex_reason(probe, "amp_C", "FusedAdam")


def _requires_apex_ln(probe: dict, device: str, stage: "Stage") -> str | None:
    if stage.compile == "compile":
        return "Apex FusedLayerNorm falls back to F.layer_norm under torch.compile"
    if device != "cuda":
        return "Apex FusedLayerNorm falls back to F.layer_norm on CPU"
    return _apex_reason(probe, "fused_layer_norm_cuda", "FusedLayerNorm")


def _requires_fused_adam(probe: dict, device: str, stage: "Stage") -> str | None:
    if (probe.get("adam_fused") or {}).get(device):
        return None
    return f"torch.optim.Adam(fused=True) is not supported on {device} in torch {probe.get('torch', '?')}"


def _requires_dtype(dtype: str):
    def check(probe: dict, device: str, stage: "Stage") -> str | None:
        if (probe.get(dtype) or {}).get(device):
            return None
        where = "this GPU" if device == "cuda" else "this CPU build of torch"
        return f"{dtype} autocast not supported on {where}"
    return check


def _requires_gpus(n: int):
    def check(probe: dict, device: str, stage: "Stage") -> str | None:
        if device == "cuda":
            have = (probe.get("cuda") or {}).get("device_count", 0)
            return None if n <= have else f"needs {n} GPUs; this machine has {have}"
        return None if n <= MAX_CPU_PROCESSES else f"on CPU at most {MAX_CPU_PROCESSES} gloo processes"
    return check


def _requires_zero(probe: dict, device: str, stage: "Stage") -> str | None:
    return None if stage.world_size > 1 else "ZeroRedundancyOptimizer shards Adam state across ranks: needs gpus > 1"


def _requires_apex_dist_adam(probe: dict, device: str, stage: "Stage") -> str | None:
    if stage.world_size < 2 or device != "cuda":
        return "Apex DistributedFusedAdam needs gpus > 1 on CUDA"
    if not (probe.get("apex") or {}).get("distributed_adam"):
        return "Apex built without DistributedFusedAdam (rebuild with APEX_DISTRIBUTED_ADAM=1)"
    return _apex_reason(probe, "amp_C", "DistributedFusedAdam")


def _requires_compile(probe: dict, device: str, stage: "Stage") -> str | None:
    info = (probe.get("compile") or {}).get(device) or {}
    return None if info.get("usable") else f"torch.compile not usable on {device}: {info.get('reason', 'unknown')}"


# ---------------------------------------------------------------- builders (torch imported lazily)
def _adam(**kw):
    def build(params):
        import torch
        return torch.optim.Adam(params, lr=LR, **kw)
    return build


def _apex_fused_adam(params):
    from apex.optimizers import FusedAdam
    return FusedAdam(params, lr=LR, adam_w_mode=False)


def _zero_adam(params):
    import torch
    from torch.distributed.optim import ZeroRedundancyOptimizer
    return ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.Adam, lr=LR)


def _apex_dist_adam(params):
    from apex.contrib.optimizers.distributed_fused_adam import DistributedFusedAdam
    return DistributedFusedAdam(params, lr=LR, adam_w_mode=False)


def _world(n: int):
    return lambda: n


def _layernorm():
    import torch.nn as nn
    return nn.LayerNorm


def _apex_fused_ln():
    from apex.normalization import FusedLayerNorm
    return FusedLayerNorm


def _precision(autocast_dtype, tf32, grad_scaler):
    return lambda: PrecisionPlan(autocast_dtype, tf32, grad_scaler)


def _eager(model):
    return model


def _compile(model):
    import torch
    return torch.compile(model)


_AUTOCAST = 'with torch.autocast("cuda", dtype=torch.{dtype}):\n    logits, loss = model(x, y)\n'

LEVERS: dict[str, Lever] = {lever.name: lever for lever in [
    Lever("optimizer", "adam", "Adam",
          "opt = torch.optim.Adam(model.parameters(), lr=3e-4)  # foreach kernels on CUDA\n",
          _adam(), expects=lambda device, stage: ("aten_foreach",) if device == "cuda" else ()),
    Lever("optimizer", "adam-loop", "Adam (for-loop)",
          "opt = torch.optim.Adam(model.parameters(), lr=3e-4, foreach=False)\n", _adam(foreach=False)),
    Lever("optimizer", "adam-fused", "Adam fused",
          "opt = torch.optim.Adam(model.parameters(), lr=3e-4, fused=True)\n", _adam(fused=True),
          requires=_requires_fused_adam, expects=lambda device, stage: ("aten_fused_adam",)),
    Lever("optimizer", "apex-fusedadam", "Apex FusedAdam",
          "from apex.optimizers import FusedAdam\n"
          "opt = FusedAdam(model.parameters(), lr=3e-4, adam_w_mode=False)  # Adam, not AdamW\n",
          _apex_fused_adam, requires=_requires_apex_adam, expects=lambda device, stage: ("apex_adam",),
          betrayed_by=("aten_fused_adam", "aten_foreach"), is_apex=True),
    Lever("optimizer", "zero-adam", "ZeRO Adam",
          "from torch.distributed.optim import ZeroRedundancyOptimizer\n"
          "opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=3e-4)\n",
          _zero_adam, requires=_requires_zero),
    Lever("optimizer", "apex-distadam", "Apex DistributedFusedAdam",
          "from apex.contrib.optimizers.distributed_fused_adam import DistributedFusedAdam\n"
          "opt = DistributedFusedAdam(model.parameters(), lr=3e-4, adam_w_mode=False)  # no DDP wrapper\n",
          _apex_dist_adam, requires=_requires_apex_dist_adam, expects=lambda device, stage: ("apex_adam",),
          is_apex=True),
    Lever("norm", "layernorm", "LayerNorm", "norm = torch.nn.LayerNorm(width)\n", _layernorm,
          expects=lambda device, stage: () if stage.compile == "compile" else ("aten_native_layer_norm",)),
    Lever("norm", "apex-fusedln", "Apex FusedLN",
          "from apex.normalization import FusedLayerNorm\n"
          "norm = FusedLayerNorm(width)  # instead of torch.nn.LayerNorm\n",
          _apex_fused_ln, requires=_requires_apex_ln, expects=lambda device, stage: ("apex_layernorm",),
          betrayed_by=("aten_native_layer_norm",), is_apex=True),
    Lever("precision", "fp32", "FP32",
          "torch.backends.cuda.matmul.allow_tf32 = False  # true FP32 baseline\n"
          "torch.backends.cudnn.allow_tf32 = False\n", _precision(None, False, False)),
    Lever("precision", "tf32", "TF32",
          "torch.backends.cuda.matmul.allow_tf32 = True\ntorch.backends.cudnn.allow_tf32 = True\n",
          _precision(None, True, False), requires=_needs_cuda("TF32 (a tensor-core mode)")),
    Lever("precision", "bf16", "BF16", _AUTOCAST.format(dtype="bfloat16"),
          _precision("bfloat16", False, False), requires=_requires_dtype("bf16")),
    Lever("precision", "fp16", "FP16+GradScaler",
          "scaler = torch.amp.GradScaler(\"cuda\")\n" + _AUTOCAST.format(dtype="float16")
          + "scaler.scale(loss).backward(); scaler.step(opt); scaler.update()\n",
          _precision("float16", False, True), requires=_requires_dtype("fp16"),
          expects=lambda device, stage: ("grad_scaler",)),
    Lever("compile", "eager", "eager", "", _eager),
    Lever("compile", "compile", "compile", "model = torch.compile(model)\n", _compile,
          requires=_requires_compile),
    Lever("gpus", "1", "1 GPU", "", _world(1)),
] + [
    Lever("gpus", str(n), f"{n} GPUs",
          f"# torchrun --nproc-per-node {n} train.py  (NCCL; gloo on CPU)\n"
          "torch.distributed.init_process_group(\"nccl\")\n"
          "model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])\n",
          _world(n), requires=_requires_gpus(n))
    for n in (2, 4, 8)
]}

BASELINE = {"optimizer": "adam", "norm": "layernorm", "precision": "fp32", "compile": "eager", "gpus": "1"}


def names_of(kind: str) -> list[str]:
    return [n for n, lever in LEVERS.items() if lever.kind == kind]


@dataclass(frozen=True)
class Stage:
    optimizer: str = "adam"
    norm: str = "layernorm"
    precision: str = "fp32"
    compile: str = "eager"
    gpus: str = "1"
    levers: tuple[Lever, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        from .config import ConfigError
        object.__setattr__(self, "gpus", str(self.gpus))
        chosen = []
        for kind in KINDS:
            name = getattr(self, kind)
            lever = LEVERS.get(name)
            if lever is None or lever.kind != kind:
                raise ConfigError(kind, name, f"unknown {kind} lever; choose one of {', '.join(names_of(kind))}")
            chosen.append(lever)
        object.__setattr__(self, "levers", tuple(chosen))

    @classmethod
    def of(cls, result) -> "Stage":
        """The stage a StageResult (or any object with the lever fields) was run as."""
        return cls(**{kind: getattr(result, kind, BASELINE[kind]) for kind in KINDS})

    @property
    def world_size(self) -> int:
        return int(self.gpus)

    @property
    def key(self) -> str:
        parts = [self.optimizer, self.norm, self.precision]
        parts += [self.compile] if self.compile != "eager" else []
        return "+".join(parts + ([f"gpus{self.gpus}"] if self.gpus != "1" else []))

    @property
    def label(self) -> str:
        return " · ".join(lever.title for lever in self.levers if lever.name not in ("eager", "1"))

    def as_dict(self) -> dict[str, str]:
        return {kind: getattr(self, kind) for kind in KINDS}

    def unavailable_reason(self, probe: dict, device: str) -> str | None:
        for lever in self.levers:
            reason = lever.requires(probe, device, self)
            if reason:
                return reason
        return None

    def snippet(self) -> str:
        changed = [lever for lever in self.levers if BASELINE[lever.kind] != lever.name]
        if not changed:
            return ("# baseline: a plain PyTorch loop\n" + LEVERS["adam"].snippet + LEVERS["fp32"].snippet)
        return f"# {self.label}: the change to a plain PyTorch loop\n" + "".join(lv.snippet for lv in changed)


PRESETS: dict[str, tuple[Stage, ...]] = {
    "seed": (
        Stage("adam", "layernorm", "fp32"),
        Stage("apex-fusedadam", "layernorm", "fp32"),
        Stage("apex-fusedadam", "apex-fusedln", "fp32"),
        Stage("apex-fusedadam", "apex-fusedln", "bf16"),
    ),
    "native": (
        Stage("adam", "layernorm", "fp32"),
        Stage("adam-fused", "layernorm", "fp32"),
        Stage("adam-fused", "layernorm", "bf16"),
        Stage("adam-fused", "layernorm", "bf16", "compile"),
    ),
}
PRESETS["all"] = tuple(dict.fromkeys(PRESETS["seed"] + PRESETS["native"] + (
    Stage("adam-loop", "layernorm", "fp32"),
    Stage("adam-fused", "layernorm", "tf32"),
    Stage("adam-fused", "layernorm", "fp16"),
)))


def preset(name: str) -> tuple[Stage, ...]:
    from .config import ConfigError
    if name not in PRESETS:
        raise ConfigError("preset", name, f"unknown preset; choose one of {', '.join(PRESETS)}")
    return PRESETS[name]


def across_gpus(stages, counts) -> list[Stage]:
    """Each stage at each GPU count, so every multi-GPU stage has its one-GPU twin for scaling efficiency."""
    from dataclasses import replace

    from .config import ConfigError
    counts = [str(c) for c in counts]
    for c in counts:
        if c not in names_of("gpus"):
            raise ConfigError("gpus", c, f"choose from {', '.join(names_of('gpus'))}")
    return [replace(stage, gpus=c) for stage in stages for c in counts]
