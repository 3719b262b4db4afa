"""What a lever is: the Lever base (what every registry entry declares: its requirement, the kernels that prove it
ran or betray a fallback, its vendor, its snippet), one class per kind with its own typed `build`, and a vendor.
The entries themselves are in levers.registry."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from bench_core.levers import builders
from bench_core.levers import requirements as impl
from bench_core.levers.kernels import GemmShareRule, KeyKernel
from bench_core.levers.requirements import Requirement, Stage
from bench_core.levers.surgery import Surgery
from bench_core.machine.packages import KernelPackage

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Vendor:
    """A kernel library other than PyTorch: a lever of its own whose kernel is missing is a fallback."""
    name: str
    title: str
    packages: tuple[KernelPackage, ...] = ()   # what the probe imports for it (Apex: its own extension checks)


APEX = Vendor("apex", "Apex")  # its own extension checks, no package to import


def _always(stage: Stage) -> bool:
    return False


@dataclass(frozen=True)
class Proof:
    """A key kernel a lever expects in the trace: on one device only (None: both), and not in the stages where
    it cannot show (a compiled model runs Triton kernels; a graph replay records no CPU ops)."""
    kernel: KeyKernel
    on: str | None = None
    hidden_when: Callable[[Stage], bool] = field(default=_always, compare=False)


@dataclass(frozen=True)
class Lever:
    kind: ClassVar[str] = ""
    name: str
    title: str
    snippet: str                                # the setup lines a recipe adds (Stage.snippet orders them)
    requires: Requirement = impl.no_requirement
    expects: tuple[Proof, ...] = ()             # key kernels that must be in the trace
    betrayed_by: tuple[KeyKernel, ...] = ()     # key kernels whose presence means a fallback ran instead
    vendor: Vendor | None = None                # None: PyTorch's own
    native: str | None = None                   # a vendor lever's PyTorch twin: the lever it replaces
    plain: bool = False                         # changes nothing a stage's key or label must name (eager, 1 GPU)
    graph_blocker: str | None = None            # why a stage with this lever cannot be captured in a CUDA graph
    share_of: GemmShareRule | None = None       # the share of GEMM time that must run in the lever's own GEMMs
    surgery: Surgery | None = None              # how it acts on a model not built with parts (levers.surgery)
    imports: tuple[KernelPackage, ...] | None = None  # the packages the probe must check; None: its vendor's
    step: str = ""                              # the lines inside each training step (autocast, the loss head)

    @property
    def packages(self) -> tuple[KernelPackage, ...]:
        """The kernel packages this lever imports: what the probe must import to judge it."""
        if self.imports is not None:
            return self.imports
        return self.vendor.packages if self.vendor else ()

    @property
    def is_apex(self) -> bool:
        return self.vendor == APEX

    def expected(self, device: str, stage: Stage) -> tuple[str, ...]:
        """The keys of the kernels this lever must show in this stage's trace on this device."""
        return tuple(p.kernel.key for p in self.expects if p.on in (None, device) and not p.hidden_when(stage))

    @property
    def kernels(self) -> tuple[KeyKernel, ...]:
        return tuple(p.kernel for p in self.expects) + self.betrayed_by


@dataclass(frozen=True)
class OptimizerLever(Lever):
    kind: ClassVar[str] = "optimizer"
    factory: Callable[..., Any] = field(default=None, repr=False)  # type: ignore[assignment]
    reduces_gradients: bool = False   # all-reduces gradients itself: no DDP wrapper around the model
    capturable: bool = False          # can run inside a CUDA graph (capturable=True)
    expected_class: str | None = None  # the class the worker must report, or the stage is a fallback
    # bytes one moment (exp_avg or exp_avg_sq) of an n-element parameter holds: what a step reads and writes
    moment_bytes: Callable[[int], int] = field(default=builders.fp32_moment, repr=False)

    def __post_init__(self) -> None:
        if not self.capturable and self.graph_blocker is None:
            object.__setattr__(self, "graph_blocker", f"{self.title} has no capturable mode for CUDA graphs")

    def build(self, params: Any, capturable: bool = False) -> torch.optim.Optimizer:
        return self.factory(params, capturable)


@dataclass(frozen=True)
class PartLever(Lever):
    """A lever that is a part of the model (its norm, MLP or loss head); the family says which type it takes."""
    factory: Callable[[], Any] = field(default=None, repr=False)  # type: ignore[assignment]
    part_type: str | None = None     # the type a family must take (NormType...); None: every family
    expected_class: str | None = None
    stat_bytes: int = 4              # bytes per row of each saved statistic (mean, rstd): fp32 in every norm here
    param_bytes: int = 4             # bytes per element of gamma/beta and their grads

    def build(self) -> Any:
        return self.factory()


@dataclass(frozen=True)
class NormLever(PartLever):
    kind: ClassVar[str] = "norm"


@dataclass(frozen=True)
class PrecisionPlan:
    autocast_dtype: str | None   # "bfloat16" | "float16" | None
    tf32: bool
    grad_scaler: bool
    convert: Callable[[Any], Any] | None = field(default=None, compare=False)   # model -> model (FP8 modules)
    context: Callable[[], Any] | None = field(default=None, compare=False)     # around forward (te.fp8_autocast)


@dataclass(frozen=True)
class PrecisionLever(Lever):
    kind: ClassVar[str] = "precision"
    plan: PrecisionPlan = PrecisionPlan(None, False, False)
    mfu_peak: str = ""           # the datasheet peak MFU counts against; FP8 stages: the BF16 one, labelled so
    gemm_rate: str = ""          # the GEMM rate its matmuls run at (FP8 stages: fp8): the run estimate's ceiling
    eager_rate: str = ""         # the rate an uncompiled step reaches, where its extra kernels cost what it gains
    swaps_norm: bool = False     # replaces the model's norm modules with its own (TE): torch's norm kernel is gone

    @property
    def peak(self) -> str:
        return self.mfu_peak or self.name

    @property
    def gemm(self) -> str:
        return self.gemm_rate or self.name

    def build(self) -> PrecisionPlan:
        return self.plan


@dataclass(frozen=True)
class CompileLever(Lever):
    kind: ClassVar[str] = "compile"
    mode: str = "eager"              # eager | compile | graphs

    @property
    def captures_graph(self) -> bool:
        return self.mode == "graphs"

    @property
    def traces_model(self) -> bool:
        """torch.compile traces the model: torch's own kernels become Triton, extensions fall back."""
        return self.mode == "compile"

    def build(self, model: Any) -> Any:
        if self.mode == "compile":
            import torch
            return torch.compile(model)
        return model  # graphs: the worker captures the whole step after warm-up


@dataclass(frozen=True)
class HeadLever(PartLever):
    kind: ClassVar[str] = "head"
    returns_logits: bool = True      # False: a fused head; logits coming back means it did not run

    def build(self) -> Callable[..., Any]:
        """(hidden, lm_head weight, targets) -> (logits or None, loss): see model.LossHead."""
        return self.factory()


@dataclass(frozen=True)
class MlpLever(PartLever):
    kind: ClassVar[str] = "mlp"

    def build(self) -> Callable[[int, int], torch.nn.Module]:
        """(width, inner width) -> the block's MLP module."""
        return self.factory()


@dataclass(frozen=True)
class GpusLever(Lever):
    kind: ClassVar[str] = "gpus"
    world: int = 1

    def build(self) -> int:
        return self.world
