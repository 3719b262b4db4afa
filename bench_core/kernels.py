"""Proof of use: classify profiler event names into the key kernels a stage claims to run.

Torch-free; the worker feeds it the names torch.profiler saw.
"""
from __future__ import annotations

from typing import Callable, Iterable

from .levers import Stage

# key -> (display name, matcher over a profiler event name)
KEY_KERNELS: dict[str, tuple[str, Callable[[str], bool]]] = {
    "apex_adam": ("Apex multi-tensor Adam",
                  lambda n: ("AdamFunctor" in n and "at::native" not in n) or "multi_tensor_adam" in n),
    "apex_layernorm": ("Apex LayerNorm",
                       lambda n: "cuApplyLayerNorm" in n or "cuComputeGradInput" in n
                       or n.startswith("apex::fused_layer_norm")),
    "aten_fused_adam": ("aten::_fused_adam_", lambda n: n.startswith("aten::_fused_adam")),
    "aten_foreach": ("aten::_foreach_*", lambda n: n.startswith("aten::_foreach_")),
    "aten_native_layer_norm": ("aten::native_layer_norm", lambda n: n.startswith("aten::native_layer_norm")),
    "grad_scaler": ("GradScaler unscale/update", lambda n: n.startswith(("aten::_amp_foreach_non_finite",
                                                                         "aten::_amp_update_scale"))),
}

SDPA_BACKENDS = {
    "flash": "aten::_scaled_dot_product_flash_attention",
    "mem_efficient": "aten::_scaled_dot_product_efficient_attention",
    "cudnn": "aten::_scaled_dot_product_cudnn_attention",
    "math": "aten::_scaled_dot_product_attention_math",
    "cpu_flash": "aten::_scaled_dot_product_flash_attention_for_cpu",
}


def classify(names: Iterable[str]) -> dict[str, list[str]]:
    """Key kernel -> the distinct event names that matched it (at most 3, for display)."""
    seen: dict[str, list[str]] = {key: [] for key in KEY_KERNELS}
    for name in sorted(set(names)):
        for key, (_, match) in KEY_KERNELS.items():
            if match(name) and len(seen[key]) < 3:
                seen[key].append(name)
    return seen


def sdpa_backend(names: Iterable[str]) -> str | None:
    names = set(names)
    for backend, op in SDPA_BACKENDS.items():
        if op in names:
            return backend
    return None


def verdict(stage: Stage, device: str, seen: dict[str, list[str]]) -> tuple[str, list[str]]:
    """('verified' | 'fallback' | 'unconfirmed', warnings) for the levers of a stage."""
    warnings, state = [], "verified"
    for lever in stage.levers:
        missing = [k for k in lever.expects(device, stage) if not seen.get(k)]
        betrayed = [k for k in lever.betrayed_by if seen.get(k)]
        if lever.is_apex and (missing or betrayed):
            state = "fallback"
            parts = []
            if missing:
                parts.append("no " + ", ".join(KEY_KERNELS[k][0] for k in missing) + " kernel in the trace")
            if betrayed:
                parts.append("trace shows " + ", ".join(KEY_KERNELS[k][0] for k in betrayed))
            warnings.append(f"{lever.title} fell back to PyTorch: {'; '.join(parts)}")
        elif missing:
            state = "unconfirmed" if state == "verified" else state
            warnings.append(f"{lever.title}: expected {', '.join(KEY_KERNELS[k][0] for k in missing)} "
                            "but the trace did not show it")
    return state, warnings
