"""The key kernels that prove a lever ran, or betray a fallback: each a label and a matcher over the profiler's event
names. Lever specs (registry.py) name them; proof.KEY_KERNELS is derived from the specs, never written again."""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class KeyKernel:
    key: str                  # the name saved files carry (kernels_seen), so it never changes
    label: str
    match: Callable[[str], bool] = field(compare=False, repr=False)


# GEMM dtypes are read from the CPU-side aten::mm/addmm/bmm ops' input dtypes (kernel names do not always say);
# the worker reports them as pseudo-names "gemm:<dtype>" next to the real event names.
# AdamFunctor, or AdamCapturableFunctor for FusedAdam(capturable=True); torch's are in at::native
APEX_ADAM = KeyKernel("apex_adam", "Apex multi-tensor Adam", lambda n: (
    "AdamFunctor" in n or "AdamCapturableFunctor" in n) and "at::native" not in n or "multi_tensor_adam" in n)
APEX_LAYERNORM = KeyKernel("apex_layernorm", "Apex LayerNorm", lambda n: "cuApplyLayerNorm" in n
                           or "cuComputeGradInput" in n or n.startswith("apex::fused_layer_norm"))
# CPU op names in eager steps; kernel names too, since a CUDA graph replay records no CPU ops
ATEN_FUSED_ADAM = KeyKernel("aten_fused_adam", "aten::_fused_adam_", lambda n: n.startswith("aten::_fused_adam")
                            or "FusedAdamMathFunctor" in n)
ATEN_FOREACH = KeyKernel("aten_foreach", "aten::_foreach_*", lambda n: n.startswith("aten::_foreach_"))


def _last_template_arg(name: str) -> str:
    """The last argument of a kernel's template list: 'true' in `vectorized_layer_norm_kernel<float, float, true>`."""
    start = name.find("<")
    depth, args, current = 0, [], ""
    for ch in name[start + 1:] if start >= 0 else "":
        if ch == "<":
            depth += 1
        elif ch == ">" and depth == 0:
            args.append(current)
            break
        elif ch == ">":
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(current)
            current = ""
            continue
        current += ch
    return args[-1].strip() if args else ""


def _torch_norm_kernel(name: str, rms: bool) -> bool:
    """torch's layer_norm CUDA kernels serve RMSNorm too, told apart by their last template argument (`rms_norm`):
    `vectorized_layer_norm_kernel<float, float, true>` is RMSNorm, `<float, float, false>` LayerNorm (both seen on
    the H200: docs/data/h200_2026-12-03_call12_swiglu_llama-small_1.json, h200_2026-12-02_call2_native_gpt2-small_
    repeats2.json). Matching kernels, not only CPU ops, is what recognises them inside a CUDA graph replay."""
    return (name.startswith("void at::native::") and "layer_norm" in name.lower()
            and (_last_template_arg(name) == "true") == rms)


ATEN_LAYER_NORM = KeyKernel("aten_native_layer_norm", "aten::native_layer_norm", lambda n: n.startswith(
    "aten::native_layer_norm") or _torch_norm_kernel(n, rms=False))
GRAD_SCALER = KeyKernel("grad_scaler", "GradScaler unscale/update", lambda n: n.startswith(
    ("aten::_amp_foreach_non_finite", "aten::_amp_update_scale")))
GEMM_FP32 = KeyKernel("gemm_fp32", "FP32 GEMM", lambda n: n == "gemm:float")
GEMM_TF32 = KeyKernel("gemm_tf32", "TF32 GEMM", lambda n: ("tf32" in n.lower() and "gemm" in n.lower())
                      or n == "gemm:float+tf32")
GEMM_BF16 = KeyKernel("gemm_bf16", "BF16 GEMM", lambda n: n == "gemm:bfloat16")
GEMM_FP16 = KeyKernel("gemm_fp16", "FP16 GEMM", lambda n: n == "gemm:half")
TRITON = KeyKernel("triton", "Triton kernels (torch.compile)", lambda n: n.startswith("triton_"))
COMPILED_REGION = KeyKernel("compiled_region", "compiled region (CPU)", lambda n: n.startswith(
    ("CompiledFunction", "Torch-Compiled Region", "## Call CompiledFxGraph")))
GRAPH_LAUNCH = KeyKernel("graph_launch", "CUDA graph launch", lambda n: n.startswith("cudaGraphLaunch"))
APEX_RMSNORM = KeyKernel("apex_rmsnorm", "Apex RMSNorm", lambda n: "cuApplyRMSNorm" in n
                         or n.startswith("apex::fused_rms_norm"))
# torch's RMSNorm: the fused op where torch has one (CUDA), else its decomposition's entry op; and its kernels,
# which a CUDA graph replay shows without any CPU op
ATEN_RMS_NORM = KeyKernel("aten_rms_norm", "aten::_fused_rms_norm / rms_norm", lambda n: n.startswith(
    ("aten::_fused_rms_norm", "aten::rms_norm")) or _torch_norm_kernel(n, rms=True))
# Liger-Kernel's Triton kernels are named after their Python functions
LIGER_LAYERNORM = KeyKernel("liger_layernorm", "Liger LayerNorm (Triton)", lambda n: n.startswith(
    ("_layer_norm_forward_kernel", "_layer_norm_backward_kernel")))
LIGER_RMSNORM = KeyKernel("liger_rmsnorm", "Liger RMSNorm (Triton)", lambda n: "_rms_norm_forward_kernel" in n
                          or "_rms_norm_backward_kernel" in n)
LIGER_FLCE = KeyKernel("liger_flce", "Liger fused linear cross-entropy", lambda n: n.startswith(
    "liger_cross_entropy_kernel"))
# GEMM kernels by name (the breakdown's `gemm` category; attention's cutlass/flash kernels are taken before it).
GEMM_KERNEL_PATTERN = r"gemm|gemv|nvjet|cublas|splitKreduce|xmma|cutlass.*tensorop|^triton_tem_"
# cuBLASLt's nvjet kernels name their operand types after the arch: t bf16, h fp16, s fp32, q e4m3, r e5m2
# (`nvjet_sm90_qqtst_...` forward, `nvjet_sm90_qrtst_...` backward, `nvjet_sm90_tst_...` bf16: all seen on the
# H200 in docs/data/h200_2026-12-03_call8_peers_gpt2-medium_b16_run2.json); other libraries spell e4m3/e5m2.
_NVJET_TYPES = re.compile(r"^nvjet_(?:sm\d+_)?([a-z]+)_\d")


def is_fp8_gemm_kernel(name: str) -> bool:
    nvjet = _NVJET_TYPES.match(name)
    if nvjet:
        return bool(set(nvjet.group(1)) & {"q", "r"})
    lower = name.lower()
    return "e4m3" in lower or "e5m2" in lower


# FP8 GEMMs: torch._scaled_mm (torchao) and cuBLASLt's e4m3/e5m2 kernels
FP8_GEMM = KeyKernel("fp8_gemm", "FP8 GEMM (_scaled_mm / cuBLASLt)", lambda n: n.startswith("aten::_scaled_mm")
                     or (bool(re.search(GEMM_KERNEL_PATTERN, n, re.IGNORECASE)) and is_fp8_gemm_kernel(n)))
TE_KERNELS = KeyKernel("te_kernels", "Transformer Engine kernels", lambda n: "transformer_engine" in n
                       or n.startswith(("te::", "nvte_")))
# torch's SiLU of the native SwiGLU (forward and backward ops); Liger's SwiGLU runs one Triton kernel each way
ATEN_SILU = KeyKernel("aten_silu", "aten::silu", lambda n: n.startswith("aten::silu"))
LIGER_SWIGLU = KeyKernel("liger_swiglu", "Liger SwiGLU (Triton)", lambda n: n.startswith(
    ("_swiglu_forward_kernel", "_swiglu_backward_kernel")))
# What betrays a loss head that built the whole (tokens x vocab) logits. Liger's FLCE computes its softmax inside
# liger_cross_entropy_kernel, chunk by chunk: it launches no log-softmax, and no GEMM has all the tokens' logits.
# The log-softmax: the CPU ops, torch's CUDA kernel (cunn_SoftMaxForward<..., LogSoftMaxForwardEpilogue>, seen in
# docs/data/h200_2026-12-02_call1_all_gpt2-small_smoke.json, also under graphs) and Inductor's fusions of it.
LOG_SOFTMAX = KeyKernel("log_softmax", "log-softmax over the logits", lambda n: n.startswith(
    ("aten::log_softmax", "aten::_log_softmax")) or "LogSoftMaxForwardEpilogue" in n
    or (n.startswith("triton_") and "_log_softmax" in n))
# The full logits GEMM: the worker names each GEMM op whose output is all the step's tokens by the vocabulary
# (read from its input shapes) "logits:<rows>x<vocab> <op>" (see `logits_pseudo_name`).
FULL_LOGITS = KeyKernel("full_logits", "full-vocabulary logits GEMM", lambda n: n.startswith("logits:"))


@dataclass(frozen=True)
class GemmOp:
    """A CPU op that launched GEMM kernels, with its input shapes (torch.profiler's record_shapes)."""
    name: str
    shapes: tuple[tuple[int, ...], ...] = ()

    @property
    def text(self) -> str:
        return f"{self.name} " + " x ".join("[" + ", ".join(map(str, s)) + "]" for s in self.shapes if s)

    def inner(self) -> int | None:
        """The reduction length K of its (M, K) x (K, N) product; None when not a GEMM or its shapes are unknown."""
        index = 1 if self.name in ("aten::addmm", "aten::baddbmm") else 0   # the addend comes first
        if self.name not in GEMM_SHAPE_OPS or len(self.shapes) <= index or not self.shapes[index]:
            return None
        return self.shapes[index][-1]

    def output(self) -> tuple[int, int] | None:
        """(rows, columns) of the product, rows flattened over batch dims; None if not a GEMM or shapes unknown."""
        offset = 1 if self.name in ("aten::addmm", "aten::baddbmm") else 0
        shapes = [s for s in self.shapes[offset:offset + 2]]
        if len(shapes) < 2 or len(shapes[0]) < 2 or not shapes[1]:
            return None
        rows = math.prod(shapes[0][:-1])
        if self.name == "aten::linear":  # weight is (out, in)
            return rows, shapes[1][0]
        return (rows, shapes[1][-1]) if self.name in GEMM_SHAPE_OPS else None


GEMM_SHAPE_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
                  "aten::_scaled_mm")


def logits_pseudo_name(op: GemmOp, tokens: int, vocab: int) -> str | None:
    """'logits:<rows>x<vocab> <op>' when the op's product holds every token's logits over the whole vocabulary."""
    out = op.output()
    if out is None or out[1] != vocab or out[0] < tokens:
        return None
    return f"logits:{out[0]}x{out[1]} {op.name}"


@dataclass(frozen=True)
class ExpectedGemm:
    """A GEMM a share rule expects outside its numerator, named by role, recognised from its op."""
    role: str
    why: str
    match: Callable[[GemmOp, int], bool] = field(compare=False, repr=False)   # (op, vocab) -> is this one


@dataclass(frozen=True)
class GemmShareRule:
    """What share of GEMM time a lever must run in its own kind of GEMM, and which others it expects by name."""
    label: str
    counts: Callable[[str, GemmOp | None], bool] = field(compare=False, repr=False)  # (kernel, its op) -> numerator
    expected_other: tuple[ExpectedGemm, ...] = ()


# torchao's float8 conversion (and TE's swap) replace the blocks' nn.Linear only: the LM head stays BF16, and
# attention's batched GEMMs (SDPA's math path) are not Linears. Every other GEMM must be FP8: no fitted threshold.
LM_HEAD = ExpectedGemm("lm_head", "the LM head is not converted", lambda op, vocab: any(
    vocab in shape for shape in op.shapes))
ATTENTION_BMM = ExpectedGemm("attention", "attention's batched GEMMs are not Linears", lambda op, vocab: op.name in (
    "aten::bmm", "aten::baddbmm"))
# A K = 1 product is an outer product: no reduction for FP8 to speed up, and no Linear to convert (Hugging Face
# Llama's rotary embedding takes frequencies x positions so, in float32 by design; compiled, it is an aten::mm).
OUTER_PRODUCT = ExpectedGemm("outer product", "a K = 1 product has no reduction", lambda op, vocab: op.inner() == 1)
FP8_SHARE = GemmShareRule("FP8", lambda kernel, op: is_fp8_gemm_kernel(kernel) or (
    op is not None and op.name == "aten::_scaled_mm"), (LM_HEAD, ATTENTION_BMM, OUTER_PRODUCT))
