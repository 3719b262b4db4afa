"""Proof of use: which key kernels a stage's profiler trace shows, the verdict on its levers, and the kernel
grid's cells. The worker decides the verdict once; summaries and figures read it, never re-judge it.

Torch-free; the worker feeds it the event names and GEMM input dtypes torch.profiler saw.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from bench_core.levers.registry import Lever
from bench_core.levers.stage import Stage


@dataclass(frozen=True)
class KeyKernel:
    label: str
    match: Callable[[str], bool]


# GEMM dtypes are read from the CPU-side aten::mm/addmm/bmm ops' input dtypes (kernel names do not always say);
# the worker reports them as pseudo-names "gemm:<dtype>" next to the real event names.
KEY_KERNELS: dict[str, KeyKernel] = {
    # AdamFunctor, or AdamCapturableFunctor for FusedAdam(capturable=True); torch's are in at::native
    "apex_adam": KeyKernel("Apex multi-tensor Adam", lambda n: ("AdamFunctor" in n or "AdamCapturableFunctor" in n)
                           and "at::native" not in n or "multi_tensor_adam" in n),
    "apex_layernorm": KeyKernel("Apex LayerNorm", lambda n: "cuApplyLayerNorm" in n or "cuComputeGradInput" in n
                                or n.startswith("apex::fused_layer_norm")),
    # CPU op names in eager steps; kernel names too, since a CUDA graph replay records no CPU ops
    "aten_fused_adam": KeyKernel("aten::_fused_adam_", lambda n: n.startswith("aten::_fused_adam")
                                 or "FusedAdamMathFunctor" in n),
    "aten_foreach": KeyKernel("aten::_foreach_*", lambda n: n.startswith("aten::_foreach_")),
    "aten_native_layer_norm": KeyKernel("aten::native_layer_norm", lambda n: n.startswith("aten::native_layer_norm")
                                        or (n.startswith("void at::native::") and "layer_norm" in n.lower())),
    "grad_scaler": KeyKernel("GradScaler unscale/update", lambda n: n.startswith(
        ("aten::_amp_foreach_non_finite", "aten::_amp_update_scale"))),
    "gemm_fp32": KeyKernel("FP32 GEMM", lambda n: n == "gemm:float"),
    "gemm_tf32": KeyKernel("TF32 GEMM", lambda n: ("tf32" in n.lower() and "gemm" in n.lower())
                           or n == "gemm:float+tf32"),
    "gemm_bf16": KeyKernel("BF16 GEMM", lambda n: n == "gemm:bfloat16"),
    "gemm_fp16": KeyKernel("FP16 GEMM", lambda n: n == "gemm:half"),
    "triton": KeyKernel("Triton kernels (torch.compile)", lambda n: n.startswith("triton_")),
    "compiled_region": KeyKernel("compiled region (CPU)", lambda n: n.startswith(
        ("CompiledFunction", "Torch-Compiled Region", "## Call CompiledFxGraph"))),
    "graph_launch": KeyKernel("CUDA graph launch", lambda n: n.startswith("cudaGraphLaunch")),
    "apex_rmsnorm": KeyKernel("Apex RMSNorm", lambda n: "cuApplyRMSNorm" in n or n.startswith("apex::fused_rms_norm")),
    # torch's RMSNorm: the fused op where torch has one (CUDA), else its decomposition's entry op
    "aten_rms_norm": KeyKernel("aten::_fused_rms_norm / rms_norm", lambda n: n.startswith(
        ("aten::_fused_rms_norm", "aten::rms_norm"))),
    # Liger-Kernel's Triton kernels are named after their Python functions
    "liger_layernorm": KeyKernel("Liger LayerNorm (Triton)", lambda n: n.startswith(
        ("_layer_norm_forward_kernel", "_layer_norm_backward_kernel"))),
    "liger_rmsnorm": KeyKernel("Liger RMSNorm (Triton)", lambda n: "_rms_norm_forward_kernel" in n
                               or "_rms_norm_backward_kernel" in n),
    "liger_flce": KeyKernel("Liger fused linear cross-entropy", lambda n: n.startswith("liger_cross_entropy_kernel")),
    # FP8 GEMMs: torch._scaled_mm (torchao) and cuBLASLt's e4m3/e5m2 kernels
    "fp8_gemm": KeyKernel("FP8 GEMM (_scaled_mm / cuBLASLt)", lambda n: n.startswith("aten::_scaled_mm")
                          or ("gemm" in n.lower() and ("e4m3" in n.lower() or "e5m2" in n.lower()))),
    "te_kernels": KeyKernel("Transformer Engine kernels", lambda n: "transformer_engine" in n
                            or n.startswith(("te::", "nvte_"))),
}

GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
# The input that is the GEMM's first operand: addmm/baddbmm take the addend (`self`) first, and a fused head such
# as Liger's FLCE adds bf16 x bf16 products into an fp32 accumulator, which is not an fp32 GEMM.
GEMM_OPERAND = {"aten::mm": 0, "aten::bmm": 0, "aten::addmm": 1, "aten::baddbmm": 1}


def gemm_operand_dtype(op: str, dtypes: list[str]) -> str | None:
    """The dtype of a GEMM op's first operand, from the profiler's input dtypes; None if not a GEMM or unknown."""
    index = GEMM_OPERAND.get(op)
    return dtypes[index] if index is not None and len(dtypes) > index and dtypes[index] else None
DTYPE_NAMES = {"c10::BFloat16": "bfloat16", "c10::Half": "half", "float": "float", "double": "double"}

SDPA_BACKENDS = {
    "flash": "aten::_scaled_dot_product_flash_attention",
    "mem_efficient": "aten::_scaled_dot_product_efficient_attention",
    "cudnn": "aten::_scaled_dot_product_cudnn_attention",
    "math": "aten::_scaled_dot_product_attention_math",
    "cpu_flash": "aten::_scaled_dot_product_flash_attention_for_cpu",
}


def gemm_pseudo_names(dtypes: Iterable[str], tf32: bool) -> set[str]:
    """'gemm:<dtype>' for each GEMM input dtype seen; fp32 GEMMs with TF32 on are 'gemm:float+tf32'."""
    out = set()
    for raw in dtypes:
        name = DTYPE_NAMES.get(raw, raw)
        out.add("gemm:float+tf32" if name == "float" and tf32 else f"gemm:{name}")
    return out


def classify(names: Iterable[str]) -> dict[str, list[str]]:
    """Key kernel -> the distinct event names that matched it (at most 3, for display)."""
    seen: dict[str, list[str]] = {key: [] for key in KEY_KERNELS}
    for name in sorted(set(names)):
        for key, kernel in KEY_KERNELS.items():
            if kernel.match(name) and len(seen[key]) < 3:
                seen[key].append(name)
    return seen


def sdpa_backend(names: Iterable[str]) -> str | None:
    names = set(names)
    return next((backend for backend, op in SDPA_BACKENDS.items() if op in names), None)


@dataclass(frozen=True)
class Facts:
    """What the worker saw, beyond the trace: the classes it built and the switches it set."""
    optimizer_class: str | None = None
    norm_class: str | None = None
    tf32_matmul: bool | None = None
    grad_scaler: bool | None = None


def verdict(stage: Stage, device: str, seen: Mapping[str, list[str]], facts: Facts = Facts()) -> tuple[str, list[str]]:
    """('verified' | 'fallback' | 'unconfirmed', warnings) for the levers of a stage."""
    warnings: list[str] = []
    state = "verified"
    for lever in stage.levers:
        missing = [k for k in lever.expects(device, stage) if not seen.get(k)]
        betrayed = [k for k in lever.betrayed_by if seen.get(k)]
        wrong_class = _wrong_class(lever, facts)
        if lever.vendor and (missing or betrayed or wrong_class):  # a named library (Apex, Liger...) not used
            state = "fallback"
            parts = [f"no {', '.join(KEY_KERNELS[k].label for k in missing)} kernel in the trace"] if missing else []
            parts += [f"trace shows {', '.join(KEY_KERNELS[k].label for k in betrayed)}"] if betrayed else []
            parts += [wrong_class] if wrong_class else []
            warnings.append(f"{lever.title} fell back to PyTorch: {'; '.join(parts)}")
        elif missing or betrayed or wrong_class:
            state = "unconfirmed" if state == "verified" else state
            parts = [f"expected {', '.join(KEY_KERNELS[k].label for k in missing)} but the trace did not show it"] \
                if missing else []
            parts += [f"the trace also shows {', '.join(KEY_KERNELS[k].label for k in betrayed)}"] if betrayed else []
            parts += [wrong_class] if wrong_class else []
            warnings.append(f"{lever.title}: {'; '.join(parts)}")
    switches = _switch_warnings(stage, facts)
    if switches:
        state = "unconfirmed" if state == "verified" else state
        warnings += switches
    return state, warnings


def _wrong_class(lever: Lever, facts: Facts) -> str | None:
    expected = getattr(lever, "expected_class", None)
    actual = facts.optimizer_class if lever.kind == "optimizer" else facts.norm_class
    if expected and actual and actual != expected:
        return f"the worker built {actual}, not {expected}"
    return None


def _switch_warnings(stage: Stage, facts: Facts) -> list[str]:
    plan = stage.precision_lever.plan
    out = []
    if facts.tf32_matmul is not None and facts.tf32_matmul != plan.tf32:
        out.append(f"TF32 matmul was {'on' if facts.tf32_matmul else 'off'}, the stage asked for "
                   f"{'on' if plan.tf32 else 'off'}")
    if facts.grad_scaler is not None and facts.grad_scaler != plan.grad_scaler:
        out.append("GradScaler " + ("ran though the stage does not use it" if facts.grad_scaler else "did not run"))
    return out


# ---------------------------------------------------------------- the kernel grid's cells
CELL_STATES = ("unavailable", "pending", "not used", "used", "expected, not seen", "fallback", "imported")


@dataclass(frozen=True)
class KernelCell:
    state: str
    why: str


def kernel_cells(stage: Stage, status: str, reason: str, kernels: Mapping[str, list[str]],
                 verdict_state: str | None, device: str, imported_from: str | None) -> dict[str, KernelCell]:
    """One cell per key kernel. An Apex lever's missing kernel is the fallback
    the worker's verdict already declared — the cell shows that verdict, it does not judge again."""
    if status == "unavailable":
        return {key: KernelCell("unavailable", reason) for key in KEY_KERNELS}
    if not kernels:
        return {key: KernelCell("pending", f"{status}: the profiler runs after the timed iterations")
                for key in KEY_KERNELS}
    cells = {}
    for key in KEY_KERNELS:
        names = kernels.get(key) or []
        expecting = [lv for lv in stage.levers if key in lv.expects(device, stage)]
        betraying = [lv for lv in stage.levers if key in lv.betrayed_by]
        if imported_from and names:
            cells[key] = KernelCell("imported", f"seen on {imported_from}, not here: " + ", ".join(names))
        elif names and betraying:
            cells[key] = KernelCell("fallback", f"{', '.join(lv.title for lv in betraying)} asked, but the trace "
                                    f"shows {names[0]}")
        elif names:
            cells[key] = KernelCell("used", "seen: " + "<br>".join(names))
        elif expecting and any(lv.vendor for lv in expecting) and verdict_state == "fallback":
            cells[key] = KernelCell("fallback", "not in the trace: the stage's verdict is fallback")
        elif expecting:
            cells[key] = KernelCell("expected, not seen", "not in the trace")
        else:
            cells[key] = KernelCell("not used", "not in the trace")
    return cells

