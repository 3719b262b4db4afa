"""The one registry of stage levers. A new lever is one entry in LEVERS, nothing else.

One class per kind, each with its own typed `build`. Every entry knows what it requires (a reason when it is
unavailable, judged from the probe), which key kernels prove it ran and which betray a fallback (see proof.py),
and the code snippet it changes. torch is imported lazily, so the dashboard can import this module.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from bench_core.levers import builders
from bench_core.levers import requirements as impl
from bench_core.levers.requirements import Requirement, Stage
from bench_core.machine.probe import Probe

if TYPE_CHECKING:
    import torch

KINDS = ("optimizer", "norm", "precision", "compile", "gpus", "head")
VENDOR_TITLES = {"apex": "Apex", "liger": "Liger-Kernel", "torchao": "torchao", "te": "Transformer Engine"}

Expectation = Callable[[str, Stage], "tuple[str, ...]"]


def _nothing_expected(device: str, stage: Stage) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class Lever:
    kind: ClassVar[str] = ""
    name: str
    title: str
    snippet: str
    requires: Requirement = impl.no_requirement
    expects: Expectation = _nothing_expected    # key kernels (proof.KEY_KERNELS) that must be in the trace
    betrayed_by: tuple[str, ...] = ()           # key kernels whose presence means a fallback ran instead
    vendor: str | None = None                   # apex | liger | torchao | te: a missing kernel is a fallback
    native: str | None = None                   # a vendor lever's PyTorch twin: the lever it replaces

    @property
    def is_apex(self) -> bool:
        return self.vendor == "apex"


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
    family: str = "gpt"          # LayerNorm levers serve the gpt family, RMSNorm levers the llama family
    twin: str = ""               # the same kernel source's norm for the other family (presets swap by it)

    def build(self) -> type[torch.nn.Module]:
        return self.factory()


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

    @property
    def peak(self) -> str:
        return self.mfu_peak or self.name

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
class HeadLever(Lever):
    kind: ClassVar[str] = "head"
    factory: Callable[[], Any] = field(default=None, repr=False)  # type: ignore[assignment]

    def build(self) -> Callable[..., Any]:
        """(hidden, lm_head weight, targets) -> (logits or None, loss): see model.LossHead."""
        return self.factory()


@dataclass(frozen=True)
class GpusLever(Lever):
    kind: ClassVar[str] = "gpus"
    world: int = 1

    def build(self) -> int:
        return self.world


def _gemm_dtype(*keys: str) -> Expectation:
    # A graph replay records no CPU ops, so there is no GEMM dtype to read in a graphs stage.
    return lambda device, stage: () if stage.compile == "graphs" else keys


def _native_norm(key: str) -> Expectation:
    # torch's own norm kernels: gone when compiled (Triton) or when TE swaps in its own modules
    return lambda device, stage: () if stage.compile == "compile" or stage.precision == "te-fp8" else (key,)


_AUTOCAST = 'with torch.autocast("cuda", dtype=torch.{dtype}):\n    logits, loss = model(x, y)\n'
APEX_ADAM_CLASS = "apex.optimizers.fused_adam.FusedAdam"
APEX_LN_CLASS = "apex.normalization.fused_layer_norm.FusedLayerNorm"
APEX_RMS_CLASS = "apex.normalization.fused_layer_norm.FusedRMSNorm"
_LIGER = "Liger-Kernel (pip install liger-kernel)"
_TORCHAO = "torchao float8 (pip install torchao)"
_TE = "Transformer Engine (see README: Transformer Engine)"
_NEEDS_LIGER = impl.all_of(impl.needs_cuda("Liger-Kernel (Triton)"), impl.needs_package("liger_kernel", _LIGER))


def _both(*keys: str) -> Expectation:
    return lambda device, stage: keys


LEVERS: dict[str, Lever] = {lever.name: lever for lever in [
    OptimizerLever("adam", "Adam", "opt = torch.optim.Adam(model.parameters(), lr=3e-4)  # foreach kernels on CUDA\n",
                   expects=lambda device, stage: ("aten_foreach",) if device == "cuda" else (),
                   factory=builders.adam(), capturable=True, expected_class="torch.optim.adam.Adam"),
    OptimizerLever("adam-loop", "Adam (for-loop)",
                   "opt = torch.optim.Adam(model.parameters(), lr=3e-4, foreach=False)\n",
                   factory=builders.adam(foreach=False), expected_class="torch.optim.adam.Adam"),
    OptimizerLever("adam-fused", "Adam fused",
                   "opt = torch.optim.Adam(model.parameters(), lr=3e-4, fused=True)\n",
                   requires=impl.requires_fused_adam, expects=_both("aten_fused_adam"),
                   factory=builders.adam(fused=True), capturable=True, expected_class="torch.optim.adam.Adam"),
    OptimizerLever("apex-fusedadam", "Apex FusedAdam",
                   "from apex.optimizers import FusedAdam\n"
                   "opt = FusedAdam(model.parameters(), lr=3e-4, adam_w_mode=False)  # Adam, not AdamW\n",
                   requires=impl.requires_apex_adam, expects=_both("apex_adam"),
                   betrayed_by=("aten_fused_adam", "aten_foreach"), vendor="apex", native="adam-fused",
                   factory=builders.apex_fused_adam,
                   capturable=True, expected_class=APEX_ADAM_CLASS),
    OptimizerLever("zero-adam", "ZeRO Adam",
                   "from torch.distributed.optim import ZeroRedundancyOptimizer\n"
                   "opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=3e-4)\n",
                   requires=impl.requires_zero, factory=builders.zero_adam),
    OptimizerLever("apex-distadam", "Apex DistributedFusedAdam",
                   "from apex.contrib.optimizers.distributed_fused_adam import DistributedFusedAdam\n"
                   "opt = DistributedFusedAdam(model.parameters(), lr=3e-4, adam_w_mode=False)  # no DDP wrapper\n",
                   requires=impl.requires_apex_dist_adam, expects=_both("apex_adam"), vendor="apex",
                   factory=builders.apex_dist_adam, reduces_gradients=True),
    NormLever("layernorm", "LayerNorm", "norm = torch.nn.LayerNorm(width)\n", factory=builders.layernorm,
              expects=_native_norm("aten_native_layer_norm"),
              expected_class="torch.nn.modules.normalization.LayerNorm", family="gpt", twin="rmsnorm"),
    NormLever("apex-fusedln", "Apex FusedLN",
              "from apex.normalization import FusedLayerNorm\n"
              "norm = FusedLayerNorm(width)  # instead of torch.nn.LayerNorm\n",
              requires=impl.requires_apex_norm("FusedLayerNorm", "F.layer_norm", Probe.apex_ln_reason),
              expects=_both("apex_layernorm"),
              betrayed_by=("aten_native_layer_norm",), vendor="apex", native="layernorm",
              factory=builders.apex_fused_ln,
              expected_class=APEX_LN_CLASS, family="gpt", twin="apex-fusedrms"),
    NormLever("liger-ln", "Liger LayerNorm",
              "from liger_kernel.transformers import LigerLayerNorm\n"
              "norm = LigerLayerNorm(width, eps=1e-5)  # Triton kernels, instead of torch.nn.LayerNorm\n",
              requires=_NEEDS_LIGER,
              expects=_both("liger_layernorm"), betrayed_by=("aten_native_layer_norm",), vendor="liger",
              native="layernorm", factory=builders.liger_ln, family="gpt", twin="liger-rms"),
    NormLever("rmsnorm", "RMSNorm", "norm = torch.nn.RMSNorm(width)\n", factory=builders.rmsnorm,
              expects=_native_norm("aten_rms_norm"), expected_class="torch.nn.modules.normalization.RMSNorm",
              family="llama", twin="layernorm"),
    NormLever("apex-fusedrms", "Apex FusedRMSNorm",
              "from apex.normalization import FusedRMSNorm\n"
              "norm = FusedRMSNorm(width)  # instead of torch.nn.RMSNorm\n",
              requires=impl.requires_apex_norm("FusedRMSNorm", "its Python manual_rms_norm", Probe.apex_rms_reason),
              expects=_both("apex_rmsnorm"),
              betrayed_by=("aten_rms_norm",), vendor="apex", native="rmsnorm", factory=builders.apex_fused_rms,
              expected_class=APEX_RMS_CLASS, family="llama", twin="apex-fusedln"),
    NormLever("liger-rms", "Liger RMSNorm",
              "from liger_kernel.transformers import LigerRMSNorm\n"
              "norm = LigerRMSNorm(width, eps=1e-6)  # Triton kernels, instead of torch.nn.RMSNorm\n",
              requires=_NEEDS_LIGER,
              expects=_both("liger_rmsnorm"), betrayed_by=("aten_rms_norm",), vendor="liger",
              native="rmsnorm", factory=builders.liger_rms, family="llama", twin="liger-ln"),
    PrecisionLever("fp32", "FP32", "torch.backends.cuda.matmul.allow_tf32 = False  # true FP32 baseline\n"
                   "torch.backends.cudnn.allow_tf32 = False\n", expects=_gemm_dtype("gemm_fp32"),
                   betrayed_by=("gemm_bf16", "gemm_fp16"), plan=PrecisionPlan(None, False, False)),
    PrecisionLever("tf32", "TF32",
                   "torch.backends.cuda.matmul.allow_tf32 = True\ntorch.backends.cudnn.allow_tf32 = True\n",
                   requires=impl.needs_cuda("TF32 (a tensor-core mode)"), expects=_gemm_dtype("gemm_tf32"),
                   plan=PrecisionPlan(None, True, False)),
    PrecisionLever("bf16", "BF16", _AUTOCAST.format(dtype="bfloat16"), requires=impl.requires_dtype("bf16"),
                   expects=_gemm_dtype("gemm_bf16"), betrayed_by=("gemm_fp32",),
                   plan=PrecisionPlan("bfloat16", False, False)),
    PrecisionLever("fp16", "FP16+GradScaler",
                   "scaler = torch.amp.GradScaler(\"cuda\")\n" + _AUTOCAST.format(dtype="float16")
                   + "scaler.scale(loss).backward(); scaler.step(opt); scaler.update()\n",
                   requires=impl.requires_dtype("fp16"), expects=_gemm_dtype("gemm_fp16", "grad_scaler"),
                   betrayed_by=("gemm_fp32",), plan=PrecisionPlan("float16", False, True)),
    PrecisionLever("fp8-torchao", "FP8 (torchao)",
                   "from torchao.float8 import convert_to_float8_training\n"
                   "convert_to_float8_training(model, module_filter_fn=lambda m, fqn: fqn.startswith(\"blocks.\"))\n"
                   + _AUTOCAST.format(dtype="bfloat16"),
                   requires=impl.all_of(impl.needs_fp8("torchao float8"), impl.needs_package("torchao", _TORCHAO),
                                        impl.requires_dtype("bf16")),
                   expects=_both("fp8_gemm"), vendor="torchao", native="bf16", mfu_peak="bf16",
                   plan=PrecisionPlan("bfloat16", False, False, convert=builders.torchao_float8)),
    PrecisionLever("te-fp8", "FP8 (Transformer Engine)",
                   "import transformer_engine.pytorch as te  # blocks built from te.Linear / te.LayerNorm\n"
                   "with te.fp8_autocast(enabled=True), torch.autocast(\"cuda\", dtype=torch.bfloat16):\n"
                   "    logits, loss = model(x, y)\n",
                   requires=impl.all_of(impl.needs_fp8("Transformer Engine FP8"),
                                        impl.needs_package("transformer_engine", _TE), impl.requires_te_norm),
                   expects=_both("te_kernels"), vendor="te", native="bf16", mfu_peak="bf16",
                   plan=PrecisionPlan("bfloat16", False, False, convert=builders.transformer_engine_fp8,
                                      context=builders.te_fp8_context)),
    CompileLever("eager", "eager", "", mode="eager"),
    CompileLever("compile", "compile", "model = torch.compile(model)\n", requires=impl.requires_compile,
                 expects=lambda device, stage: ("triton",) if device == "cuda" else ("compiled_region",),
                 mode="compile"),
    CompileLever("graphs", "CUDA graphs",
                 "opt = torch.optim.Adam(model.parameters(), lr=3e-4, fused=True, capturable=True)\n"
                 "g = torch.cuda.CUDAGraph()  # after a few warm-up steps on a side stream\n"
                 "with torch.cuda.graph(g):\n    loss = model(x_static, y_static)[1]; loss.backward(); opt.step()\n"
                 "g.replay()  # each training step: the same kernels, one launch\n",
                 requires=impl.requires_graphs, expects=_both("graph_launch"), mode="graphs"),
    HeadLever("ce", "LM head + CE", "", factory=builders.cross_entropy_head),
    HeadLever("liger-flce", "Liger fused linear CE",
              "from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss\n"
              "loss = LigerFusedLinearCrossEntropyLoss()(model.lm_head.weight, hidden.view(-1, width), y.view(-1))"
              "  # no logits tensor\n",
              requires=_NEEDS_LIGER,
              expects=_both("liger_flce"), vendor="liger", native="ce", factory=builders.liger_flce_head),
    GpusLever("1", "1 GPU", "", world=1),
] + [
    GpusLever(str(n), f"{n} GPUs",
              f"# torchrun --nproc-per-node {n} train.py  (NCCL; gloo on CPU)\n"
              "torch.distributed.init_process_group(\"nccl\")\n"
              "model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])\n",
              requires=impl.requires_gpus(n), world=n)
    for n in (2, 4, 8)
]}

BASELINE_LEVERS = {"optimizer": "adam", "norm": "layernorm", "precision": "fp32", "compile": "eager", "gpus": "1",
                   "head": "ce"}


def names_of(kind: str) -> list[str]:
    return [n for n, lever in LEVERS.items() if lever.kind == kind]
