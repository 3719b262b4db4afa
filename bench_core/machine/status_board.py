"""The probe as a status board (green / amber / red with reasons), and Apex install commands for this machine."""
from __future__ import annotations

from dataclasses import dataclass

from bench_core.machine.probe import Probe

GREEN, AMBER, RED = "green", "amber", "red"


@dataclass(frozen=True)
class BoardItem:
    section: str
    item: str
    state: str
    detail: str


def probe_board(probe: Probe) -> list[BoardItem]:
    cuda = probe.cuda
    cap = ".".join(map(str, cuda.capability or ()))
    rows = [
        BoardItem("Machine", "GPU", GREEN if cuda.available else AMBER,
                  f"{cuda.name} · capability {cap} · {(cuda.total_bytes or 0) / 2**30:.0f} GiB" if cuda.available
                  else "no CUDA device: CPU runs only; Apex, TF32, CUDA graphs and GPU figures are unavailable"),
        BoardItem("Machine", "Versions", GREEN,
                  f"torch {probe.torch}" + (f" · CUDA {probe.cuda_runtime}" if probe.cuda_runtime else " (CPU build)")
                  + (f" · driver {probe.driver}" if probe.driver else "")
                  + (f" · Python {probe.raw['python']}" if probe.raw.get("python") else "")),
    ]
    apex = probe.apex
    dist = apex.distribution or {}
    if apex.status == "genuine":
        rows.append(BoardItem("Apex", "Distribution", GREEN,
                              f"NVIDIA apex {dist.get('version', '(no metadata)')}: {dist.get('summary', '')}"))
    elif apex.status == "impostor":
        rows.append(BoardItem("Apex", "Distribution", RED,
                              f"not NVIDIA apex: found '{dist.get('name')}' {dist.get('version')} — "
                              f"\"{dist.get('summary')}\". Uninstall it (pip uninstall apex) and build NVIDIA's."))
    elif not cuda.available:
        rows.append(BoardItem("Apex", "Distribution", AMBER, "not installed — and Apex's kernels need a CUDA build "
                              "of torch and an NVIDIA GPU, which this machine does not have"))
    else:
        rows.append(BoardItem("Apex", "Distribution", AMBER,
                              "NVIDIA apex is not installed: Apex stages are unavailable"))
    for ext, info in apex.extensions.items():
        reason = probe.apex_reason(ext)  # the one judge of Apex health
        if reason is not None:
            rows.append(BoardItem("Apex", ext, RED, reason))
        elif info.smoke_ok:
            rows.append(BoardItem("Apex", ext, GREEN, f"found, loadable, smoke-tested on this GPU ({info.origin})"))
        else:
            rows.append(BoardItem("Apex", ext, AMBER, f"found and loadable; no GPU here to smoke-test ({info.origin})"))
    if apex.status == "genuine":
        mta = apex.multi_tensor_apply_available
        rows.append(BoardItem("Apex", "MultiTensorApply.available", GREEN if mta else RED,
                              str(mta) + ("" if mta else f" — {apex.multi_tensor_apply_error or 'amp_C missing'}")))
        if probe.apex_ln_reason() is None:  # the extension works: does it have FusedRMSNorm's entry points?
            rms = probe.apex_rms_reason()
            rows.append(BoardItem("Apex", "FusedRMSNorm entry points", GREEN if rms is None else AMBER,
                                  rms or "rms_forward_affine / rms_backward_affine in fused_layer_norm_cuda"))
    for name, state in probe.packages.items():  # the kernel packages the levers named when the probe ran
        reason = probe.package_reason(name)
        rows.append(BoardItem("Kernel libraries", state.title, GREEN if reason is None else AMBER,
                              f"{state.version or ''} importable".strip() if reason is None else reason))
    devices = ["cuda", "cpu"] if cuda.available else ["cpu"]
    for table, label in ((probe.bf16, "bf16 autocast"), (probe.fp16, "fp16 autocast"),
                         (probe.adam_fused, "Adam(fused=True)")):
        ok = [d for d in devices if table.get(d)]
        rows.append(BoardItem("PyTorch", label, GREEN if "cuda" in ok or (ok and not cuda.available) else AMBER,
                              "supported on " + (", ".join(ok) or "nothing here")))
    if cuda.available:
        tf32 = probe.raw.get("tf32") or {}
        rows.append(BoardItem("PyTorch", "TF32 defaults", GREEN,
                              f"matmul {tf32.get('matmul')} · cuDNN {tf32.get('cudnn')} (the fp32 stages force both "
                              "off; the tf32 lever turns them on)"))
        sdpa = probe.raw.get("sdpa") or {}
        rows.append(BoardItem("PyTorch", "SDPA backends", GREEN,
                              ", ".join(f"{k} {'on' if v else 'off'}" for k, v in sdpa.items() if k != "error")))
    for device in devices:
        usable, reason = probe.compile.get(device, (False, "unknown"))
        rows.append(BoardItem("PyTorch", f"torch.compile ({device})", GREEN if usable else AMBER, reason))
    return rows


def arch_list(probe: Probe) -> str | None:
    cap = probe.cuda.capability
    return f"{cap[0]}.{cap[1]}" if cap else None


def install_commands(probe: Probe) -> str | None:
    """The upstream source install of NVIDIA Apex, filled in for this machine; None where it cannot apply."""
    if not probe.cuda_runtime or not probe.cuda.available:
        return None  # a CPU build of torch, or no GPU: there is nothing Apex could be built for here
    nvcc = probe.raw.get("nvcc") or {}
    lines = [f"# torch {probe.torch} was built with CUDA {probe.cuda_runtime}; nvcc here: "
             f"{nvcc.get('version') or 'not found'} ({nvcc.get('path') or 'not on PATH'})"]
    if nvcc.get("version") and nvcc["version"] != probe.cuda_runtime:
        lines.append(f"# WARNING: Apex's setup.py refuses to build: nvcc {nvcc['version']} != torch CUDA "
                     f"{probe.cuda_runtime}. Install the matching CUDA toolkit first.")
    if probe.apex.status == "impostor":
        lines.append("pip uninstall -y apex   # the PyPI 'apex' is an unrelated package")
    lines += ["git clone https://github.com/NVIDIA/apex && cd apex",
              f"TORCH_CUDA_ARCH_LIST=\"{arch_list(probe)}\" APEX_PARALLEL_BUILD=8 NVCC_APPEND_FLAGS=\"--threads 4\" \\",
              "APEX_CPP_EXT=1 APEX_CUDA_EXT=1 pip install -v --no-build-isolation --no-deps .",
              "# older pip / Apex: pip install -v --no-build-isolation --config-settings "
              "\"--build-option=--cpp_ext\" --config-settings \"--build-option=--cuda_ext\" ."]
    return "\n".join(lines)
