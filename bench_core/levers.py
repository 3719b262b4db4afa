"""The one registry of stage levers. A new lever is one entry in LEVERS, nothing else.

One class per kind, each with its own typed `build`. Every entry knows what it requires (a reason when it is
unavailable, judged from the probe), which key kernels prove it ran and which betray a fallback (see proof.py),
and the code snippet it changes. torch is imported lazily, so the dashboard can import this module.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from .probe import Probe

if TYPE_CHECKING:
    import torch

LR = 3e-4
KINDS = ("optimizer", "norm", "precision", "compile", "gpus")
MAX_CPU_PROCESSES = 2  # gloo ranks on CPU: a functional check of the DDP path, not a speed figure

Requirement = Callable[[Probe, str, "Stage"], "str | None"]
Expectation = Callable[[str, "Stage"], "tuple[str, ...]"]


def _no_requirement(probe: Probe, device: str, stage: Stage) -> str | None:
    return None


def _nothing_expected(device: str, stage: Stage) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class Lever:
    kind: ClassVar[str] = ""
    name: str
    title: str
    snippet: str
    requires: Requirement = _no_requirement
    expects: Expectation = _nothing_expected    # key kernels (proof.KEY_KERNELS) that must be in the trace
    betrayed_by: tuple[str, ...] = ()           # key kernels whose presence means a fallback ran instead
    is_apex: bool = False


@dataclass(frozen=True)
class OptimizerLever(Lever):
    kind: ClassVar[str] = "optimizer"
    factory: Callable[..., Any] = field(default=None, repr=False)  # type: ignore[assignment]
    reduces_gradients: bool = False   # all-reduces gradients itself: no DDP wrapper around the model
    capturable: bool = False          # can run inside a CUDA graph (capturable=True)
    expected_class: str | None = None  # the class the worker must report, or the stage is a fallback

    def build(self, params: Any, capturable: bool = False) -> torch.optim.Optimizer:
        return self.factory(params, capturable)


@dataclass(frozen=True)
class NormLever(Lever):
    kind: ClassVar[str] = "norm"
    factory: Callable[[], Any] = field(default=None, repr=False)  # type: ignore[assignment]
    expected_class: str | None = None

    def build(self) -> type[torch.nn.Module]:
        return self.factory()


@dataclass(frozen=True)
class PrecisionPlan:
    autocast_dtype: str | None   # "bfloat16" | "float16" | None
    tf32: bool
    grad_scaler: bool


@dataclass(frozen=True)
class PrecisionLever(Lever):
    kind: ClassVar[str] = "precision"
    plan: PrecisionPlan = PrecisionPlan(None, False, False)

    def build(self) -> PrecisionPlan:
        return self.plan


@dataclass(frozen=True)
class CompileLever(Lever):
    kind: ClassVar[str] = "compile"
    mode: str = "eager"              # eager | compile | graphs

    @property
    def captures_graph(self) -> bool:
        return self.mode == "graphs"

    def build(self, model: Any) -> Any:
        if self.mode == "compile":
            import torch
            return torch.compile(model)
        return model  # graphs: the worker captures the whole step after warm-up


@dataclass(frozen=True)
class GpusLever(Lever):
    kind: ClassVar[str] = "gpus"
    world: int = 1

    def build(self) -> int:
        return self.world


# ---------------------------------------------------------------- requirement checks
def _needs_cuda(what: str) -> Requirement:
    def check(probe: Probe, device: str, stage: Stage) -> str | None:
        return None if device == "cuda" else f"{what} needs a CUDA device"
    return check


def _requires_apex_adam(probe: Probe, device: str, stage: Stage) -> str | None:
    if device != "cuda":
        return "Apex FusedAdam runs CUDA kernels only (amp_C); no CPU path"
    return probe.apex_reason("amp_C")


def _requires_apex_ln(probe: Probe, device: str, stage: Stage) -> str | None:
    if stage.compile == "compile":
        return "Apex FusedLayerNorm falls back to F.layer_norm under torch.compile"
    if device != "cuda":
        return "Apex FusedLayerNorm falls back to F.layer_norm on CPU"
    return probe.apex_reason("fused_layer_norm_cuda")


def _requires_fused_adam(probe: Probe, device: str, stage: Stage) -> str | None:
    if probe.adam_fused.get(device):
        return None
    return f"torch.optim.Adam(fused=True) is not supported on {device} in torch {probe.torch or '?'}"


def _requires_dtype(dtype: str) -> Requirement:
    def check(probe: Probe, device: str, stage: Stage) -> str | None:
        if getattr(probe, dtype).get(device):
            return None
        where = "this GPU" if device == "cuda" else "this CPU build of torch"
        return f"{dtype} autocast not supported on {where}"
    return check


def _requires_gpus(n: int) -> Requirement:
    def check(probe: Probe, device: str, stage: Stage) -> str | None:
        if device == "cuda":
            have = probe.cuda.device_count
            return None if n <= have else f"needs {n} GPUs; this machine has {have}"
        return None if n <= MAX_CPU_PROCESSES else f"on CPU at most {MAX_CPU_PROCESSES} gloo processes"
    return check


def _requires_zero(probe: Probe, device: str, stage: Stage) -> str | None:
    return None if stage.world_size > 1 else "ZeroRedundancyOptimizer shards Adam state across ranks: needs gpus > 1"


def _requires_apex_dist_adam(probe: Probe, device: str, stage: Stage) -> str | None:
    if stage.world_size < 2 or device != "cuda":
        return "Apex DistributedFusedAdam needs gpus > 1 on CUDA"
    if not probe.apex.distributed_adam:
        return "Apex built without DistributedFusedAdam (rebuild with APEX_DISTRIBUTED_ADAM=1)"
    return probe.apex_reason("amp_C")


def _requires_compile(probe: Probe, device: str, stage: Stage) -> str | None:
    usable, reason = probe.compile.get(device, (False, "unknown"))
    return None if usable else f"torch.compile not usable on {device}: {reason}"


def _requires_graphs(probe: Probe, device: str, stage: Stage) -> str | None:
    if device != "cuda":
        return "CUDA graphs capture GPU work: needs a CUDA device"
    if stage.world_size > 1:
        return "the graphs stage captures one process's step: gpus must be 1"
    if stage.precision == "fp16":
        return "GradScaler's inf checks sync with the host: FP16 + GradScaler cannot be captured in one graph"
    if not LEVERS[stage.optimizer].capturable:  # type: ignore[attr-defined]
        return f"{LEVERS[stage.optimizer].title} has no capturable mode for CUDA graphs"
    return None


# ---------------------------------------------------------------- builders (torch imported lazily)
def _adam(**kw: Any) -> Callable[..., Any]:
    def build(params: Any, capturable: bool = False) -> Any:
        import torch
        return torch.optim.Adam(params, lr=LR, **kw, **({"capturable": True} if capturable else {}))  # type: ignore[arg-type]
    return build


def _apex_fused_adam(params: Any, capturable: bool = False) -> Any:
    from apex.optimizers import FusedAdam
    return FusedAdam(params, lr=LR, adam_w_mode=False, capturable=capturable)


def _zero_adam(params: Any, capturable: bool = False) -> Any:
    import torch
    from torch.distributed.optim import ZeroRedundancyOptimizer
    return ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.Adam, lr=LR)


def _apex_dist_adam(params: Any, capturable: bool = False) -> Any:
    from apex.contrib.optimizers.distributed_fused_adam import DistributedFusedAdam
    return DistributedFusedAdam(params, lr=LR, adam_w_mode=False)


def _layernorm() -> Any:
    import torch.nn as nn
    return nn.LayerNorm


def _apex_fused_ln() -> Any:
    from apex.normalization import FusedLayerNorm
    return FusedLayerNorm


def _unless_compiled(*keys: str) -> Expectation:
    return lambda device, stage: () if stage.compile == "compile" else keys


def _gemm_dtype(*keys: str) -> Expectation:
    # A graph replay records no CPU ops, so there is no GEMM dtype to read in a graphs stage.
    return lambda device, stage: () if stage.compile == "graphs" else keys


_AUTOCAST = 'with torch.autocast("cuda", dtype=torch.{dtype}):\n    logits, loss = model(x, y)\n'
APEX_ADAM_CLASS = "apex.optimizers.fused_adam.FusedAdam"
APEX_LN_CLASS = "apex.normalization.fused_layer_norm.FusedLayerNorm"

LEVERS: dict[str, Lever] = {lever.name: lever for lever in [
    OptimizerLever("adam", "Adam", "opt = torch.optim.Adam(model.parameters(), lr=3e-4)  # foreach kernels on CUDA\n",
                   expects=lambda device, stage: ("aten_foreach",) if device == "cuda" else (),
                   factory=_adam(), capturable=True, expected_class="torch.optim.adam.Adam"),
    OptimizerLever("adam-loop", "Adam (for-loop)",
                   "opt = torch.optim.Adam(model.parameters(), lr=3e-4, foreach=False)\n", factory=_adam(foreach=False),
                   expected_class="torch.optim.adam.Adam"),
    OptimizerLever("adam-fused", "Adam fused",
                   "opt = torch.optim.Adam(model.parameters(), lr=3e-4, fused=True)\n", requires=_requires_fused_adam,
                   expects=lambda device, stage: ("aten_fused_adam",), factory=_adam(fused=True), capturable=True,
                   expected_class="torch.optim.adam.Adam"),
    OptimizerLever("apex-fusedadam", "Apex FusedAdam",
                   "from apex.optimizers import FusedAdam\n"
                   "opt = FusedAdam(model.parameters(), lr=3e-4, adam_w_mode=False)  # Adam, not AdamW\n",
                   requires=_requires_apex_adam, expects=lambda device, stage: ("apex_adam",),
                   betrayed_by=("aten_fused_adam", "aten_foreach"), is_apex=True, factory=_apex_fused_adam,
                   capturable=True, expected_class=APEX_ADAM_CLASS),
    OptimizerLever("zero-adam", "ZeRO Adam",
                   "from torch.distributed.optim import ZeroRedundancyOptimizer\n"
                   "opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=3e-4)\n",
                   requires=_requires_zero, factory=_zero_adam),
    OptimizerLever("apex-distadam", "Apex DistributedFusedAdam",
                   "from apex.contrib.optimizers.distributed_fused_adam import DistributedFusedAdam\n"
                   "opt = DistributedFusedAdam(model.parameters(), lr=3e-4, adam_w_mode=False)  # no DDP wrapper\n",
                   requires=_requires_apex_dist_adam, expects=lambda device, stage: ("apex_adam",), is_apex=True,
                   factory=_apex_dist_adam, reduces_gradients=True),
    NormLever("layernorm", "LayerNorm", "norm = torch.nn.LayerNorm(width)\n", factory=_layernorm,
              expects=_unless_compiled("aten_native_layer_norm"),
              expected_class="torch.nn.modules.normalization.LayerNorm"),
    NormLever("apex-fusedln", "Apex FusedLN",
              "from apex.normalization import FusedLayerNorm\n"
              "norm = FusedLayerNorm(width)  # instead of torch.nn.LayerNorm\n",
              requires=_requires_apex_ln, expects=lambda device, stage: ("apex_layernorm",),
              betrayed_by=("aten_native_layer_norm",), is_apex=True, factory=_apex_fused_ln,
              expected_class=APEX_LN_CLASS),
    PrecisionLever("fp32", "FP32", "torch.backends.cuda.matmul.allow_tf32 = False  # true FP32 baseline\n"
                   "torch.backends.cudnn.allow_tf32 = False\n", expects=_gemm_dtype("gemm_fp32"),
                   betrayed_by=("gemm_bf16", "gemm_fp16"), plan=PrecisionPlan(None, False, False)),
    PrecisionLever("tf32", "TF32",
                   "torch.backends.cuda.matmul.allow_tf32 = True\ntorch.backends.cudnn.allow_tf32 = True\n",
                   requires=_needs_cuda("TF32 (a tensor-core mode)"), expects=_gemm_dtype("gemm_tf32"),
                   plan=PrecisionPlan(None, True, False)),
    PrecisionLever("bf16", "BF16", _AUTOCAST.format(dtype="bfloat16"), requires=_requires_dtype("bf16"),
                   expects=_gemm_dtype("gemm_bf16"), betrayed_by=("gemm_fp32",),
                   plan=PrecisionPlan("bfloat16", False, False)),
    PrecisionLever("fp16", "FP16+GradScaler",
                   "scaler = torch.amp.GradScaler(\"cuda\")\n" + _AUTOCAST.format(dtype="float16")
                   + "scaler.scale(loss).backward(); scaler.step(opt); scaler.update()\n",
                   requires=_requires_dtype("fp16"), expects=_gemm_dtype("gemm_fp16", "grad_scaler"),
                   betrayed_by=("gemm_fp32",), plan=PrecisionPlan("float16", False, True)),
    CompileLever("eager", "eager", "", mode="eager"),
    CompileLever("compile", "compile", "model = torch.compile(model)\n", requires=_requires_compile,
                 expects=lambda device, stage: ("triton",) if device == "cuda" else ("compiled_region",),
                 mode="compile"),
    CompileLever("graphs", "CUDA graphs",
                 "opt = torch.optim.Adam(model.parameters(), lr=3e-4, fused=True, capturable=True)\n"
                 "g = torch.cuda.CUDAGraph()  # after a few warm-up steps on a side stream\n"
                 "with torch.cuda.graph(g):\n    loss = model(x_static, y_static)[1]; loss.backward(); opt.step()\n"
                 "g.replay()  # each training step: the same kernels, one launch\n",
                 requires=_requires_graphs, expects=lambda device, stage: ("graph_launch",), mode="graphs"),
    GpusLever("1", "1 GPU", "", world=1),
] + [
    GpusLever(str(n), f"{n} GPUs",
              f"# torchrun --nproc-per-node {n} train.py  (NCCL; gloo on CPU)\n"
              "torch.distributed.init_process_group(\"nccl\")\n"
              "model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])\n",
              requires=_requires_gpus(n), world=n)
    for n in (2, 4, 8)
]}

BASELINE_LEVERS = {"optimizer": "adam", "norm": "layernorm", "precision": "fp32", "compile": "eager", "gpus": "1"}


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

    def __post_init__(self) -> None:
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
    def of(cls, result: Any) -> Stage:
        """The stage a StageResult (or any object with the lever fields) was run as."""
        return cls(**{kind: getattr(result, kind, BASELINE_LEVERS[kind]) for kind in KINDS})

    def lever(self, kind: str) -> Lever:
        return self.levers[KINDS.index(kind)]

    @property
    def optimizer_lever(self) -> OptimizerLever:
        return self.lever("optimizer")  # type: ignore[return-value]

    @property
    def norm_lever(self) -> NormLever:
        return self.lever("norm")  # type: ignore[return-value]

    @property
    def precision_lever(self) -> PrecisionLever:
        return self.lever("precision")  # type: ignore[return-value]

    @property
    def compile_lever(self) -> CompileLever:
        return self.lever("compile")  # type: ignore[return-value]

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

    def unavailable_reason(self, probe: Probe, device: str) -> str | None:
        for lever in self.levers:
            reason = lever.requires(probe, device, self)
            if reason:
                return reason
        return None

    def snippet(self) -> str:
        changed = [lever for lever in self.levers if BASELINE_LEVERS[lever.kind] != lever.name]
        if not changed:
            return "# baseline: a plain PyTorch loop\n" + LEVERS["adam"].snippet + LEVERS["fp32"].snippet
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
        Stage("adam-fused", "layernorm", "bf16", "graphs"),
    ),
}
PRESETS["all"] = tuple(dict.fromkeys(PRESETS["seed"] + PRESETS["native"] + (
    Stage("apex-fusedadam", "layernorm", "bf16"),
    Stage("apex-fusedadam", "apex-fusedln", "bf16", "graphs"),
    Stage("adam-loop", "layernorm", "fp32"),
    Stage("adam-fused", "layernorm", "tf32"),
    Stage("adam-fused", "layernorm", "fp16"),
)))


def preset(name: str) -> tuple[Stage, ...]:
    from .config import ConfigError
    if name not in PRESETS:
        raise ConfigError("preset", name, f"unknown preset; choose one of {', '.join(PRESETS)}")
    return PRESETS[name]


def across_gpus(stages: Any, counts: Any) -> list[Stage]:
    """Each stage at each GPU count, so every multi-GPU stage has its one-GPU twin for scaling efficiency."""
    from dataclasses import replace

    from .config import ConfigError
    counts = [str(c) for c in counts]
    for c in counts:
        if c not in names_of("gpus"):
            raise ConfigError("gpus", c, f"choose from {', '.join(names_of('gpus'))}")
    return [replace(stage, gpus=c) for stage in stages for c in counts]
