"""The one registry of stage levers and their kinds. A lever is one entry in LEVERS; a kind is one entry in
KIND_SPECS, one lever class and its levers. Everything else (Stage, the CSV's columns, the kernel grid, the proof's
key kernels, the old-file defaults, the vendors' titles, the twins) is derived from these two.

One class per kind (levers.lever_types), each with its own typed `build`; a model not built with parts (a Hugging Face
one) gets the lever by the `surgery` its entry declares (levers.surgery). Every entry knows what it requires (a reason
when it is unavailable, judged from the probe), which key kernels prove it ran and which betray a fallback
(kernels.py), and the code snippet it changes. torch is imported lazily, so the dashboard can import this module.
"""
from __future__ import annotations

from dataclasses import dataclass

from bench_core.levers import builders
from bench_core.levers import kernels as kk
from bench_core.levers import requirements as impl
from bench_core.levers.kernels import KeyKernel
from bench_core.levers.lever_types import (
    APEX,
    CompileLever,
    GpusLever,
    HeadLever,
    Lever,
    MlpLever,
    NormLever,
    OptimizerLever,
    PartLever,
    PrecisionLever,
    PrecisionPlan,
    Proof,
    Vendor,
)
from bench_core.levers.requirements import Stage
from bench_core.levers.surgery import Float8Convert, LigerEntryPoint, NormSwap
from bench_core.machine.packages import KernelPackage
from bench_core.machine.probe import Probe
from bench_core.models.families import MlpType, NormType


@dataclass(frozen=True)
class Kind:
    name: str
    baseline: str              # a bare Stage's lever, and what an old file that lacks this kind's column ran
    always_in_key: bool = False  # named in every stage key; other kinds only when not plain
    key_prefix: str = ""       # gpus2: the key names a GPU count, not a lever
    key_last: bool = False
    in_every_file: bool = False  # a column since the first saved file; a later kind's is optional (its baseline)
    recipe_place: int = 0      # where its setup lines go in a recipe: the model's parts, conversions, wrappers, the
    #                            compile, then the optimizer over the final parameters (Stage.snippet)


KIND_SPECS: tuple[Kind, ...] = (
    Kind("optimizer", "adam", always_in_key=True, in_every_file=True, recipe_place=5),
    Kind("norm", "layernorm", always_in_key=True, in_every_file=True, recipe_place=0),
    Kind("precision", "fp32", always_in_key=True, in_every_file=True, recipe_place=2),
    Kind("compile", "eager", in_every_file=True, recipe_place=4),
    Kind("gpus", "1", key_prefix="gpus", key_last=True, recipe_place=3),
    Kind("head", "ce", recipe_place=6),
    Kind("mlp", "gelu", recipe_place=1),
)
KINDS = tuple(kind.name for kind in KIND_SPECS)
BASELINE_LEVERS = {kind.name: kind.baseline for kind in KIND_SPECS}


_LIGER_PACKAGE = KernelPackage("liger_kernel", "Liger-Kernel", ("liger-kernel",), "liger_kernel.transformers")
_TORCHAO_PACKAGE = KernelPackage("torchao", "torchao (float8)", ("torchao",), "torchao.float8")
_TORCHAO_OPTIM_PACKAGE = KernelPackage("torchao.optim", "torchao (8-bit optimizers)", ("torchao",), "torchao.optim")
_TE_PACKAGE = KernelPackage("transformer_engine", "Transformer Engine (optional)",
                            ("transformer-engine", "transformer_engine", "transformer-engine-torch"),
                            "transformer_engine.pytorch")
LIGER = Vendor("liger", "Liger-Kernel", (_LIGER_PACKAGE,))
TORCHAO = Vendor("torchao", "torchao", (_TORCHAO_PACKAGE, _TORCHAO_OPTIM_PACKAGE))
TE = Vendor("te", "Transformer Engine", (_TE_PACKAGE,))
# The kernel packages the probe imports and the probe cache's fingerprint hashes: the vendors' own.
KERNEL_PACKAGES: tuple[KernelPackage, ...] = tuple(p for v in (APEX, LIGER, TORCHAO, TE) for p in v.packages)


def _graph_replay(stage: Stage) -> bool:
    # A graph replay records no CPU ops, so there is no GEMM dtype to read in a graphs stage.
    return stage.compile_lever.captures_graph


def _native_norm_gone(stage: Stage) -> bool:
    # torch's own norm kernels: gone when compiled (Triton) or when the precision lever swaps in its own modules
    return stage.compile_lever.traces_model or stage.precision_lever.swaps_norm


# A precision's step wraps the forward, which the head lever writes (FORWARD: Stage.snippet puts it there, indented)
FORWARD = "FORWARD\n"
_AUTOCAST = 'with torch.autocast("cuda", dtype=torch.{dtype}):\n' + FORWARD
APEX_ADAM_CLASS = "apex.optimizers.fused_adam.FusedAdam"
APEX_LN_CLASS = "apex.normalization.fused_layer_norm.FusedLayerNorm"
APEX_RMS_CLASS = "apex.normalization.fused_layer_norm.FusedRMSNorm"
_LIGER = "Liger-Kernel (pip install liger-kernel)"
_TORCHAO = "torchao float8 (pip install torchao)"
_TE = "Transformer Engine (see docs/APEX.md: Transformer Engine)"
_NEEDS_LIGER = impl.all_of(impl.needs_cuda("Liger-Kernel (Triton)"), impl.needs_package(_LIGER_PACKAGE, _LIGER))
_FP8_HOST = "FP8 modules rescale from amax on the host between steps: not captured in this tool's graphs stage"


def _eager_ops(stage: Stage) -> bool:
    # compiled, torch's SiLU becomes Triton; a graph replay records no CPU ops
    return stage.compile_lever.traces_model or stage.compile_lever.captures_graph


def _both(*kernels: KeyKernel) -> tuple[Proof, ...]:
    return tuple(Proof(k) for k in kernels)


def _gemm(*kernels: KeyKernel) -> tuple[Proof, ...]:
    return tuple(Proof(k, hidden_when=_graph_replay) for k in kernels)


LEVERS: dict[str, Lever] = {lever.name: lever for lever in [
    OptimizerLever("adam", "Adam", "opt = torch.optim.Adam(model.parameters(), lr=3e-4)  # foreach kernels on CUDA\n",
                   expects=(Proof(kk.ATEN_FOREACH, on="cuda"),),
                   factory=builders.adam(), capturable=True, expected_class="torch.optim.adam.Adam"),
    OptimizerLever("adam-loop", "Adam (for-loop)",
                   "opt = torch.optim.Adam(model.parameters(), lr=3e-4, foreach=False)\n",
                   factory=builders.adam(foreach=False), expected_class="torch.optim.adam.Adam"),
    OptimizerLever("adam-fused", "Adam fused",
                   "opt = torch.optim.Adam(model.parameters(), lr=3e-4, fused=True)\n",
                   requires=impl.requires_fused_adam, expects=_both(kk.ATEN_FUSED_ADAM),
                   factory=builders.adam(fused=True), capturable=True, expected_class="torch.optim.adam.Adam"),
    OptimizerLever("apex-fusedadam", "Apex FusedAdam",
                   "from apex.optimizers import FusedAdam\n"
                   "opt = FusedAdam(model.parameters(), lr=3e-4, adam_w_mode=False)  # Adam, not AdamW\n",
                   requires=impl.requires_apex_adam, expects=_both(kk.APEX_ADAM),
                   betrayed_by=(kk.ATEN_FUSED_ADAM, kk.ATEN_FOREACH), vendor=APEX, native="adam-fused",
                   factory=builders.apex_fused_adam,
                   capturable=True, expected_class=APEX_ADAM_CLASS),
    OptimizerLever("zero-adam", "ZeRO Adam",
                   "from torch.distributed.optim import ZeroRedundancyOptimizer\n"
                   "opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=3e-4)\n",
                   requires=impl.requires_zero, factory=builders.zero_adam),
    OptimizerLever("apex-distadam", "Apex DistributedFusedAdam",
                   "from apex.contrib.optimizers.distributed_fused_adam import DistributedFusedAdam\n"
                   "opt = DistributedFusedAdam(model.parameters(), lr=3e-4, adam_w_mode=False)  # no DDP wrapper\n",
                   requires=impl.requires_apex_dist_adam, expects=_both(kk.APEX_ADAM), vendor=APEX,
                   factory=builders.apex_dist_adam, reduces_gradients=True),
    # Its step is torch.compile'd per parameter: Triton kernels on CUDA (their names inductor's, triton_*: not yet
    # seen on a GPU for this lever); torch's Adam kernels in its trace betray a fallback.
    OptimizerLever("adamw-8bit", "AdamW 8-bit (torchao)",
                   "from torchao.optim import AdamW8bit\n"
                   "opt = AdamW8bit(model.parameters(), lr=3e-4, weight_decay=0.0)  # 8-bit moments, block scales\n",
                   requires=impl.all_of(
                       impl.needs_cuda("torchao's 8-bit AdamW (its step is torch.compile'd per tensor to Triton; on "
                                       "CPU that is an inductor C++ build per shape, not measured here)"),
                       impl.needs_package(_TORCHAO_OPTIM_PACKAGE, "torchao 8-bit optimizers (pip install torchao)")),
                   expects=(Proof(kk.TRITON, on="cuda"),), betrayed_by=(kk.ATEN_FUSED_ADAM, kk.ATEN_FOREACH),
                   vendor=TORCHAO, imports=(_TORCHAO_OPTIM_PACKAGE,), factory=builders.torchao_adamw_8bit,
                   expected_class="torchao.optim.adam.AdamW8bit", moment_bytes=builders.int8_block_moment),
    NormLever("layernorm", "LayerNorm", "norm = torch.nn.LayerNorm(width)\n", factory=builders.layernorm,
              expects=(Proof(kk.ATEN_LAYER_NORM, hidden_when=_native_norm_gone),),
              expected_class="torch.nn.modules.normalization.LayerNorm", part_type=NormType.LAYERNORM),
    NormLever("apex-fusedln", "Apex FusedLayerNorm",
              "from apex.normalization import FusedLayerNorm\n"
              "norm = FusedLayerNorm(width)  # instead of torch.nn.LayerNorm\n",
              requires=impl.requires_apex_norm("FusedLayerNorm", "F.layer_norm", Probe.apex_ln_reason),
              expects=_both(kk.APEX_LAYERNORM),
              betrayed_by=(kk.ATEN_LAYER_NORM,), vendor=APEX, native="layernorm",
              factory=builders.apex_fused_ln, expected_class=APEX_LN_CLASS, part_type=NormType.LAYERNORM,
              surgery=NormSwap(NormType.LAYERNORM, builders.apex_fused_ln)),
    NormLever("liger-ln", "Liger LayerNorm",
              "from liger_kernel.transformers import LigerLayerNorm\n"
              "norm = LigerLayerNorm(width, eps=1e-5)  # Triton kernels, instead of torch.nn.LayerNorm\n",
              requires=_NEEDS_LIGER,
              expects=_both(kk.LIGER_LAYERNORM), betrayed_by=(kk.ATEN_LAYER_NORM,), vendor=LIGER,
              native="layernorm", factory=builders.liger_ln, part_type=NormType.LAYERNORM,
              surgery=LigerEntryPoint(("layer_norm",))),
    NormLever("rmsnorm", "RMSNorm", "norm = torch.nn.RMSNorm(width)\n", factory=builders.rmsnorm,
              expects=(Proof(kk.ATEN_RMS_NORM, hidden_when=_native_norm_gone),),
              expected_class="torch.nn.modules.normalization.RMSNorm", part_type=NormType.RMSNORM),
    NormLever("apex-fusedrms", "Apex FusedRMSNorm",
              "from apex.normalization import FusedRMSNorm\n"
              "norm = FusedRMSNorm(width)  # instead of torch.nn.RMSNorm\n",
              requires=impl.requires_apex_norm("FusedRMSNorm", "its Python manual_rms_norm", Probe.apex_rms_reason),
              expects=_both(kk.APEX_RMSNORM),
              betrayed_by=(kk.ATEN_RMS_NORM,), vendor=APEX, native="rmsnorm", factory=builders.apex_fused_rms,
              expected_class=APEX_RMS_CLASS, part_type=NormType.RMSNORM,
              surgery=NormSwap(NormType.RMSNORM, builders.apex_fused_rms)),
    NormLever("liger-rms", "Liger RMSNorm",
              "from liger_kernel.transformers import LigerRMSNorm\n"
              "norm = LigerRMSNorm(width, eps=1e-6)  # Triton kernels, instead of torch.nn.RMSNorm\n",
              requires=_NEEDS_LIGER,
              expects=_both(kk.LIGER_RMSNORM), betrayed_by=(kk.ATEN_RMS_NORM,), vendor=LIGER,
              native="rmsnorm", factory=builders.liger_rms, part_type=NormType.RMSNORM,
              surgery=LigerEntryPoint(("rms_norm",))),
    PrecisionLever("fp32", "FP32", "torch.backends.cuda.matmul.allow_tf32 = False  # true FP32 baseline\n"
                   "torch.backends.cudnn.allow_tf32 = False\n", expects=_gemm(kk.GEMM_FP32),
                   betrayed_by=(kk.GEMM_BF16, kk.GEMM_FP16), plan=PrecisionPlan(None, False, False)),
    PrecisionLever("tf32", "TF32",
                   "torch.backends.cuda.matmul.allow_tf32 = True\ntorch.backends.cudnn.allow_tf32 = True\n",
                   requires=impl.needs_cuda("TF32 (a tensor-core mode)"), expects=_gemm(kk.GEMM_TF32),
                   plan=PrecisionPlan(None, True, False)),
    PrecisionLever("bf16", "BF16", "", step=_AUTOCAST.format(dtype="bfloat16"), requires=impl.requires_dtype("bf16"),
                   expects=_gemm(kk.GEMM_BF16), betrayed_by=(kk.GEMM_FP32,),
                   plan=PrecisionPlan("bfloat16", False, False)),
    PrecisionLever("fp16", "FP16+GradScaler",
                   "scaler = torch.amp.GradScaler(\"cuda\")\n", step=_AUTOCAST.format(dtype="float16")
                   + "scaler.scale(loss).backward(); scaler.step(opt); scaler.update()\n",
                   requires=impl.requires_dtype("fp16"), expects=_gemm(kk.GEMM_FP16, kk.GRAD_SCALER),
                   betrayed_by=(kk.GEMM_FP32,), plan=PrecisionPlan("float16", False, True),
                   graph_blocker="GradScaler's inf checks sync with the host: FP16 + GradScaler cannot be captured "
                                 "in one graph"),
    PrecisionLever("fp8-torchao", "FP8 (torchao)",
                   "from torchao.float8 import convert_to_float8_training\n"
                   "convert_to_float8_training(model, module_filter_fn=lambda m, fqn: m is not model.lm_head\n"
                   "                           and m.in_features % 16 == 0 and m.out_features % 16 == 0)\n",
                   step=_AUTOCAST.format(dtype="bfloat16"),
                   requires=impl.all_of(impl.needs_fp8("torchao float8"),
                                        impl.needs_package(_TORCHAO_PACKAGE, _TORCHAO), impl.requires_dtype("bf16")),
                   expects=_both(kk.FP8_GEMM), share_of=kk.FP8_SHARE, vendor=TORCHAO, native="bf16", mfu_peak="bf16",
                   # eager, each converted linear's dynamic scaling (amax, scale, cast) runs as separate kernels that
                   # compile fuses: on HF Llama-3.2-1B eager FP8 was x0.47 of native BF16, compiled x1.57 (BENCHMARKS)
                   gemm_rate="fp8", eager_rate="bf16", imports=(_TORCHAO_PACKAGE,),
                   graph_blocker=_FP8_HOST, surgery=Float8Convert(),
                   plan=PrecisionPlan("bfloat16", False, False)),
    PrecisionLever("te-fp8", "FP8 (Transformer Engine)",
                   "import transformer_engine.pytorch as te  # blocks built from te.Linear / te.LayerNorm\n",
                   step="with te.fp8_autocast(enabled=True), torch.autocast(\"cuda\", dtype=torch.bfloat16):\n"
                   + FORWARD,
                   requires=impl.all_of(impl.needs_fp8("Transformer Engine FP8"),
                                        impl.needs_package(_TE_PACKAGE, _TE),
                                        impl.requires_native_norm("te-fp8 swaps in TE's own LayerNorm/RMSNorm")),
                   expects=_both(kk.TE_KERNELS), share_of=kk.FP8_SHARE, vendor=TE, native="bf16", mfu_peak="bf16",
                   gemm_rate="fp8",
                   graph_blocker=_FP8_HOST, swaps_norm=True,
                   plan=PrecisionPlan("bfloat16", False, False, convert=builders.transformer_engine_fp8,
                                      context=builders.te_fp8_context)),
    CompileLever("eager", "eager", "", mode="eager", plain=True),
    CompileLever("compile", "compile", "model = torch.compile(model)\n", requires=impl.requires_compile,
                 expects=(Proof(kk.TRITON, on="cuda"), Proof(kk.COMPILED_REGION, on="cpu")),
                 mode="compile"),
    CompileLever("graphs", "CUDA graphs", "",
                 step="# the optimizer built with capturable=True (torch's fused/foreach Adam); x, y static buffers\n"
                 "g = torch.cuda.CUDAGraph()  # captured once, after a few warm-up steps on a side stream\n"
                 "with torch.cuda.graph(g):\n" + FORWARD
                 + "    loss.backward(); opt.step()\n"
                 "g.replay()  # then each training step: the same kernels, one launch\n",
                 requires=impl.requires_graphs, expects=_both(kk.GRAPH_LAUNCH), mode="graphs"),
    HeadLever("ce", "LM head + CE", "", step="logits, loss = model(x, y)\n", factory=builders.cross_entropy_head,
              plain=True),
    HeadLever("liger-flce", "Liger fused linear CE",
              "from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss\n"
              "flce = LigerFusedLinearCrossEntropyLoss()\n",
              step="hidden = model.model(x)  # the last hidden state: the LM head is fused into the loss\n"
                   "loss = flce(model.lm_head.weight, hidden.view(-1, width), y.view(-1))  # no logits tensor\n",
              requires=_NEEDS_LIGER,
              expects=_both(kk.LIGER_FLCE), betrayed_by=(kk.LOG_SOFTMAX, kk.FULL_LOGITS), vendor=LIGER, native="ce",
              factory=builders.liger_flce_head, returns_logits=False,
              surgery=LigerEntryPoint(("fused_linear_cross_entropy",))),
    MlpLever("gelu", "GELU MLP", "", factory=builders.gelu_mlp, part_type=MlpType.GELU, plain=True),
    MlpLever("swiglu", "SwiGLU MLP", "", factory=builders.swiglu_mlp, part_type=MlpType.SWIGLU, plain=True,
             expects=(Proof(kk.ATEN_SILU, hidden_when=_eager_ops),)),
    MlpLever("liger-swiglu", "Liger SwiGLU",
             "from liger_kernel.transformers import LigerSwiGLUMLP\n"
             "mlp = LigerSwiGLUMLP(config)  # hidden_size, intermediate_size, hidden_act=\"silu\": one Triton kernel\n",
             requires=_NEEDS_LIGER, expects=_both(kk.LIGER_SWIGLU), betrayed_by=(kk.ATEN_SILU,), vendor=LIGER,
             native="swiglu", factory=builders.liger_swiglu, part_type=MlpType.SWIGLU,
             surgery=LigerEntryPoint(("swiglu",))),
    GpusLever("1", "1 GPU", "", world=1, plain=True),
] + [
    GpusLever(str(n), f"{n} GPUs",
              f"# torchrun --nproc-per-node {n} train.py  (NCCL; gloo on CPU)\n"
              "torch.distributed.init_process_group(\"nccl\")\n"
              "model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])\n",
              requires=impl.requires_gpus(n), world=n)
    for n in (2, 4, 8)
]}



def names_of(kind: str) -> list[str]:
    return [n for n, lever in LEVERS.items() if lever.kind == kind]


# Every key kernel some lever names, in the registry's order: proof, the kernel grid and the CSV read this.
KEY_KERNELS: dict[str, KeyKernel] = {k.key: k for lever in LEVERS.values() for k in lever.kernels}
VENDORS: tuple[Vendor, ...] = tuple(dict.fromkeys(lever.vendor for lever in LEVERS.values() if lever.vendor))


def twin(lever: Lever, part_type: str) -> Lever | None:
    """The same source's lever (PyTorch, Apex, Liger...) of this kind for another part type, or None."""
    return next((other for other in LEVERS.values() if other.kind == lever.kind and other.vendor == lever.vendor
                 and isinstance(other, PartLever) and other.part_type == part_type), None)
