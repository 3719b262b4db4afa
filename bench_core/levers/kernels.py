"""The key kernels that prove a lever ran, or betray a fallback: each a label and a matcher over the profiler's event
names. Lever specs (registry.py) name them; proof.KEY_KERNELS is derived from the specs, never written again."""
from __future__ import annotations

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
ATEN_LAYER_NORM = KeyKernel("aten_native_layer_norm", "aten::native_layer_norm", lambda n: n.startswith(
    "aten::native_layer_norm") or (n.startswith("void at::native::") and "layer_norm" in n.lower()))
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
# torch's RMSNorm: the fused op where torch has one (CUDA), else its decomposition's entry op
ATEN_RMS_NORM = KeyKernel("aten_rms_norm", "aten::_fused_rms_norm / rms_norm", lambda n: n.startswith(
    ("aten::_fused_rms_norm", "aten::rms_norm")))
# Liger-Kernel's Triton kernels are named after their Python functions
LIGER_LAYERNORM = KeyKernel("liger_layernorm", "Liger LayerNorm (Triton)", lambda n: n.startswith(
    ("_layer_norm_forward_kernel", "_layer_norm_backward_kernel")))
LIGER_RMSNORM = KeyKernel("liger_rmsnorm", "Liger RMSNorm (Triton)", lambda n: "_rms_norm_forward_kernel" in n
                          or "_rms_norm_backward_kernel" in n)
LIGER_FLCE = KeyKernel("liger_flce", "Liger fused linear cross-entropy", lambda n: n.startswith(
    "liger_cross_entropy_kernel"))
# FP8 GEMMs: torch._scaled_mm (torchao) and cuBLASLt's e4m3/e5m2 kernels
FP8_GEMM = KeyKernel("fp8_gemm", "FP8 GEMM (_scaled_mm / cuBLASLt)", lambda n: n.startswith("aten::_scaled_mm")
                     or ("gemm" in n.lower() and ("e4m3" in n.lower() or "e5m2" in n.lower())))
TE_KERNELS = KeyKernel("te_kernels", "Transformer Engine kernels", lambda n: "transformer_engine" in n
                       or n.startswith(("te::", "nvte_")))
