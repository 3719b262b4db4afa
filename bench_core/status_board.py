"""The probe as a status board (green / amber / red with reasons), and Apex install commands for this machine."""
from __future__ import annotations

GREEN, AMBER, RED = "green", "amber", "red"


def _item(section: str, item: str, state: str, detail: str) -> dict:
    return {"section": section, "item": item, "state": state, "detail": detail}


def probe_board(probe: dict) -> list[dict]:
    cuda = probe.get("cuda") or {}
    rows = [
        _item("Machine", "GPU", GREEN if cuda.get("available") else AMBER,
              f"{cuda.get('name')} · capability {'.'.join(map(str, cuda.get('capability', [])))} · "
              f"{cuda.get('total_bytes', 0) / 2**30:.0f} GiB" if cuda.get("available")
              else "no CUDA device: CPU runs only; Apex, TF32 and GPU figures unavailable"),
        _item("Machine", "Versions", GREEN,
              f"torch {probe.get('torch')} · CUDA {probe.get('cuda_runtime') or '—'} · driver "
              f"{probe.get('driver') or '—'} · Python {probe.get('python')}"),
    ]
    apex = probe.get("apex") or {}
    status, dist = apex.get("status", "missing"), apex.get("distribution") or {}
    if status == "genuine":
        rows.append(_item("Apex", "Distribution", GREEN,
                          f"NVIDIA apex {dist.get('version', '(no metadata)')}: {dist.get('summary', '')}"))
    elif status == "impostor":
        rows.append(_item("Apex", "Distribution", RED,
                          f"not NVIDIA apex: found '{dist.get('name')}' {dist.get('version')} — "
                          f"\"{dist.get('summary')}\". Uninstall it (pip uninstall apex) and build NVIDIA's."))
    else:
        rows.append(_item("Apex", "Distribution", AMBER, "NVIDIA apex is not installed: Apex stages are unavailable"))
    for ext, info in (apex.get("extensions") or {}).items():
        smoke = (info.get("smoke") or {})
        if not info.get("found"):
            rows.append(_item("Apex", ext, RED, "not built (install with --cuda_ext / APEX_CUDA_EXT=1)"))
        elif not info.get("loadable"):
            rows.append(_item("Apex", ext, RED, f"found at {info.get('origin')} but fails to load: {info.get('error')}"))
        elif smoke.get("ok") is False:
            rows.append(_item("Apex", ext, RED, f"loads, but failed on this GPU: {smoke.get('error')}"))
        elif smoke.get("ok"):
            rows.append(_item("Apex", ext, GREEN, f"found, loadable, smoke-tested on this GPU ({info.get('origin')})"))
        else:
            rows.append(_item("Apex", ext, AMBER, f"found and loadable; no GPU here to smoke-test ({info.get('origin')})"))
    if status == "genuine":
        mta = apex.get("multi_tensor_apply_available")
        rows.append(_item("Apex", "MultiTensorApply.available", GREEN if mta else RED,
                          str(mta) + ("" if mta else f" — {apex.get('multi_tensor_apply_error', 'amp_C missing')}")))
    devices = ["cuda", "cpu"] if cuda.get("available") else ["cpu"]
    for key, label in (("bf16", "bf16 autocast"), ("fp16", "fp16 autocast"), ("adam_fused", "Adam(fused=True)")):
        table = probe.get(key) or {}
        ok = [d for d in devices if table.get(d)]
        rows.append(_item("PyTorch", label, GREEN if "cuda" in ok or (ok and not cuda.get("available")) else AMBER,
                          "supported on " + (", ".join(ok) or "nothing here")))
    tf32 = probe.get("tf32") or {}
    rows.append(_item("PyTorch", "TF32 defaults", GREEN,
                      f"matmul {tf32.get('matmul')} · cuDNN {tf32.get('cudnn')} (the fp32 stages force both off; "
                      "the tf32 lever turns them on)"))
    sdpa = probe.get("sdpa") or {}
    rows.append(_item("PyTorch", "SDPA backends", GREEN,
                      ", ".join(f"{k} {'on' if v else 'off'}" for k, v in sdpa.items() if k != "error")))
    for device in devices:
        info = (probe.get("compile") or {}).get(device) or {}
        rows.append(_item("PyTorch", f"torch.compile ({device})", GREEN if info.get("usable") else AMBER,
                          info.get("reason", "unknown")))
    return rows


def arch_list(probe: dict) -> str:
    cap = (probe.get("cuda") or {}).get("capability")
    return f"{cap[0]}.{cap[1]}" if cap else "9.0"


def install_commands(probe: dict) -> str:
    """The upstream source install of NVIDIA Apex, filled in for this machine."""
    nvcc = probe.get("nvcc") or {}
    torch_cuda = probe.get("cuda_runtime") or "(a CUDA build of torch is needed)"
    lines = [f"# torch {probe.get('torch')} was built with CUDA {torch_cuda}; nvcc here: "
             f"{nvcc.get('version') or 'not found'} ({nvcc.get('path') or 'not on PATH'})"]
    if nvcc.get("version") and probe.get("cuda_runtime") and nvcc["version"] != probe["cuda_runtime"]:
        lines.append(f"# WARNING: Apex's setup.py refuses to build: nvcc {nvcc['version']} != torch CUDA "
                     f"{probe['cuda_runtime']}. Install the matching CUDA toolkit first.")
    if not (probe.get("cuda") or {}).get("capability"):
        lines.append("# no GPU seen here: set TORCH_CUDA_ARCH_LIST to the target GPU's compute capability")
    if (probe.get("apex") or {}).get("status") == "impostor":
        lines.append("pip uninstall -y apex   # the PyPI 'apex' is an unrelated package")
    lines += ["git clone https://github.com/NVIDIA/apex && cd apex",
              f"TORCH_CUDA_ARCH_LIST=\"{arch_list(probe)}\" APEX_PARALLEL_BUILD=8 NVCC_APPEND_FLAGS=\"--threads 4\" \\",
              "APEX_CPP_EXT=1 APEX_CUDA_EXT=1 pip install -v --no-build-isolation --no-deps .",
              "# older pip / Apex: pip install -v --no-build-isolation --config-settings "
              "\"--build-option=--cpp_ext\" --config-settings \"--build-option=--cuda_ext\" ."]
    return "\n".join(lines)
