"""Collects what this machine can run: versions, GPU, dtypes, SDPA, compile, fused Adam and Apex.

Runs in its own process (``python -m bench_core.machine.probe_collect``): it imports torch and may create a CUDA
context, which a long-lived server process must not hold. ``bench_core.machine.probe`` reads its output.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from typing import Any

APEX_EXTENSIONS = {"amp_C": ("multi_tensor_adam",), "fused_layer_norm_cuda": ("forward_affine", "backward_affine")}
GENUINE_SUMMARY = "NVIDIA"
# How the CPU rates are measured (_cpu_matmul_gflops); a cached probe measured another way is measured again.
CPU_RATE_METHOD = "linear forward and backward"


def _guard(fn, *args) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # a probe reports, it never crashes
        return {"error": f"{type(exc).__name__}: {exc}"}


def nvcc_version() -> dict:
    path = shutil.which("nvcc") or (os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc")
                                    if os.environ.get("CUDA_HOME") else None)
    if not path or not os.path.exists(path):
        return {"path": None, "version": None}
    out = subprocess.run([path, "--version"], capture_output=True, text=True,  # noqa: S603 (nvcc from PATH)
                         timeout=30).stdout
    match = re.search(r"release (\d+\.\d+)", out)
    return {"path": path, "version": match.group(1) if match else None}


def gpu_topology() -> str | None:
    """`nvidia-smi topo -m`: how the GPUs are linked (NVLink, PCIe), for multi-GPU results."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    out = subprocess.run([smi, "topo", "-m"], capture_output=True, text=True, timeout=30)  # noqa: S603
    return out.stdout.strip() or None


def driver_version() -> str | None:
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            return pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None


def _mem_available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _cuda(torch) -> dict:
    if not torch.cuda.is_available():
        return {"available": False, "device_count": 0}
    props = torch.cuda.get_device_properties(0)
    free, total = torch.cuda.mem_get_info(0)
    return {"available": True, "device_count": torch.cuda.device_count(), "name": props.name,
            "capability": list(torch.cuda.get_device_capability(0)), "total_bytes": total,
            "free_bytes": free, "multiprocessors": props.multi_processor_count}


def _autocast_works(torch, device: str, dtype) -> bool:
    try:
        a = torch.randn(8, 8, device=device)
        with torch.autocast(device, dtype=dtype):
            return (a @ a).dtype == dtype
    except Exception:
        return False


def _fused_adam_works(torch, device: str) -> bool:
    """One step of the kernel `Adam(fused=True)` runs (`torch._fused_adam_`) on `device`, checked against Adam's
    arithmetic. Called directly: building a torch.optim optimizer imports torch._dynamo, seconds of a cold probe."""
    try:
        p, g = torch.full((4,), 1.0, device=device), torch.tensor([1.0, -2.0, 3.0, -4.0], device=device)
        m, v, step = torch.zeros_like(p), torch.zeros_like(p), torch.ones((), device=device)  # step already counted
        torch._fused_adam_([p], [g], [m], [v], [], [step], lr=0.1, beta1=0.9, beta2=0.999, weight_decay=0.0,
                           eps=1e-8, amsgrad=False, maximize=False)
        # first step: the bias-corrected moments are g and g², so each parameter moves by lr against sign(g)
        return bool(torch.allclose(p.cpu(), 1.0 - 0.1 * torch.sign(g.cpu()), atol=1e-5))
    except Exception:
        return False


def _compile_usable(torch, device: str, cuda: dict) -> dict:
    if not hasattr(torch, "compile"):
        return {"usable": False, "reason": "torch.compile missing"}
    if device == "cuda":
        if not cuda.get("available"):
            return {"usable": False, "reason": "no CUDA device"}
        if importlib.util.find_spec("triton") is None:
            return {"usable": False, "reason": "triton is not installed"}
        return {"usable": True, "reason": "triton found"}
    compiler = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
    return ({"usable": True, "reason": f"C++ compiler {compiler}"} if compiler
            else {"usable": False, "reason": "no C++ compiler for inductor's CPU backend"})


def _sdpa(torch) -> dict:
    b = torch.backends.cuda
    info = {"flash": b.flash_sdp_enabled(), "mem_efficient": b.mem_efficient_sdp_enabled(),
            "math": b.math_sdp_enabled()}
    if hasattr(b, "cudnn_sdp_enabled"):
        info["cudnn"] = b.cudnn_sdp_enabled()
    if hasattr(b, "is_flash_attention_available"):
        info["flash_built"] = b.is_flash_attention_available()
    return info


def apex_distribution() -> dict | None:
    try:
        meta = importlib.metadata.distribution("apex").metadata
    except importlib.metadata.PackageNotFoundError:
        return None
    return {"name": meta["Name"], "version": meta["Version"], "summary": meta["Summary"] or ""}


def _smoke(torch, ext: str) -> dict:
    """One real launch on this GPU: a build without its architecture imports fine and fails here."""
    try:
        if ext == "amp_C":
            from apex.optimizers import FusedAdam
            p = torch.nn.Parameter(torch.randn(1024, device="cuda"))
            ref = torch.nn.Parameter(p.detach().clone())
            p.grad = torch.randn_like(p)
            ref.grad = p.grad.clone()
            FusedAdam([p], lr=1e-2, adam_w_mode=False).step()
            torch.optim.Adam([ref], lr=1e-2).step()
            err = (p - ref).abs().max().item()
        else:
            from apex.normalization import FusedLayerNorm
            x = torch.randn(64, 256, device="cuda", requires_grad=True)
            ln = FusedLayerNorm(256).cuda()
            y = ln(x)
            y.sum().backward()
            err = (y - torch.nn.functional.layer_norm(x, (256,), ln.weight, ln.bias)).abs().max().item()
        torch.cuda.synchronize()
        return {"ok": err < 1e-3, "error": None if err < 1e-3 else f"max abs error {err:.2e} vs torch"}
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def probe_apex(torch, cuda_available: bool) -> dict:
    dist = apex_distribution()
    spec = importlib.util.find_spec("apex")
    if dist is None and spec is None:
        return {"status": "missing", "distribution": None, "extensions": {}}
    if dist is not None and GENUINE_SUMMARY not in dist["summary"]:
        return {"status": "impostor", "distribution": dist, "origin": spec.origin if spec else None,
                "extensions": {}}
    info: dict[str, Any] = {"status": "genuine", "distribution": dist, "origin": spec.origin if spec else None,
                            "extensions": {}}
    for ext, functions in APEX_EXTENSIONS.items():
        ext_spec = importlib.util.find_spec(ext)
        entry: dict[str, Any] = {"found": ext_spec is not None,
                                 "origin": ext_spec.origin if ext_spec else None, "loadable": False}
        if ext_spec is not None:
            try:
                module = importlib.import_module(ext)
                entry["functions"] = {f: hasattr(module, f) for f in functions}
                entry["loadable"] = all(entry["functions"].values())
                if not entry["loadable"]:
                    entry["error"] = "missing functions: " + ", ".join(
                        f for f, ok in entry["functions"].items() if not ok)
                if ext == "fused_layer_norm_cuda":  # FusedRMSNorm shares the extension (Apex >= 2021)
                    entry["rms"] = all(hasattr(module, f) for f in ("rms_forward_affine", "rms_backward_affine"))
            except Exception as exc:  # e.g. "undefined symbol": built against another torch
                entry["error"] = f"{type(exc).__name__}: {exc}"
        if entry["loadable"] and cuda_available:
            entry["smoke"] = _smoke(torch, ext)
        info["extensions"][ext] = entry
    try:
        from apex.multi_tensor_apply import multi_tensor_applier  # noqa: F401
        from apex.multi_tensor_apply.multi_tensor_apply import MultiTensorApply
        info["multi_tensor_apply_available"] = bool(MultiTensorApply.available)
    except Exception as exc:
        info["multi_tensor_apply_available"] = False
        info["multi_tensor_apply_error"] = f"{type(exc).__name__}: {exc}"
    info["distributed_adam"] = importlib.util.find_spec("distributed_adam_cuda") is not None
    return info


def probe_packages() -> dict:
    """Version and importability of each kernel package the caller named (packages.PACKAGES_ENV), imported here,
    in the probe's fresh process."""
    from bench_core.machine.packages import PACKAGES_ENV, decode
    out = {}
    for package in decode(os.environ.get(PACKAGES_ENV)):
        name, module = package.name, package.module
        version = next((v for v in map(_dist_version, package.distributions) if v), None)
        entry: dict[str, Any] = {"title": package.title, "version": version, "importable": False, "error": None}
        if importlib.util.find_spec(name) is None:
            entry["error"] = "not installed"
        else:
            try:
                importlib.import_module(module)
                entry["importable"] = True
            except Exception as exc:  # e.g. TE built for another torch or CUDA: the exact reason is the point
                entry["error"] = f"import {module} failed: {type(exc).__name__}: {str(exc)[:300]}"
        out[name] = entry
    return out


def collect() -> dict:
    """Every fact, each section timed (`timings`, seconds): what a cold probe spends its time on."""
    timings: dict[str, float] = {}

    def timed(name: str, fn: Any, *args: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            timings[name] = round(time.perf_counter() - start, 3)

    torch = timed("import torch", importlib.import_module, "torch")
    cuda = timed("cuda", _guard, _cuda, torch)
    cuda_ok = bool(cuda.get("available"))
    devices = ["cpu"] + (["cuda"] if cuda_ok else [])
    facts = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "driver": timed("driver", driver_version),
        "nvcc": timed("nvcc", _guard, nvcc_version),
        "cuda": cuda,
        "cpu": {"cores": os.cpu_count(), "available_bytes": _mem_available_bytes(),
                "processor": platform.processor(), "matmul_gflops": timed("cpu matmul", _guard, _cpu_matmul_gflops,
                                                                         torch),
                "capability": _guard(torch.backends.cpu.get_cpu_capability),
                "bf16_flags": sorted(BF16_FLAGS & _cpu_flags()),
                "bf16_matmul_gflops": timed("cpu bf16 matmul", _guard, _cpu_matmul_gflops, torch, torch.bfloat16),
                "rate_method": CPU_RATE_METHOD},
        "bf16": timed("bf16", lambda: {d: (torch.cuda.is_bf16_supported() if d == "cuda" else
                                           _autocast_works(torch, d, torch.bfloat16)) for d in devices}),
        "fp16": timed("fp16", lambda: {d: _autocast_works(torch, d, torch.float16) for d in devices}),
        "tf32": {"matmul": torch.backends.cuda.matmul.allow_tf32, "cudnn": torch.backends.cudnn.allow_tf32},
        "sdpa": timed("sdpa", _guard, _sdpa, torch),
        "triton": _guard(lambda: {"available": importlib.util.find_spec("triton") is not None,
                                  "version": _dist_version("triton")}),
        "compile": {d: _compile_usable(torch, d, cuda) for d in ("cpu", "cuda")},
        "adam_fused": timed("adam fused", lambda: {d: _fused_adam_works(torch, d) for d in devices}),
        "apex": timed("apex", _guard, probe_apex, torch, cuda_ok),
        "packages": timed("packages", _guard, probe_packages),
        "ceilings": timed("ceilings", _guard, _ceilings, torch) if cuda_ok else None,
        "nccl": _guard(lambda: ".".join(map(str, torch.cuda.nccl.version())) if cuda_ok else None),
        "topology": timed("topology", _guard, gpu_topology) if cuda_ok else None,
    }
    return {**facts, "timings": timings}


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_matmul_gflops(torch: Any, dtype: Any = None) -> float:
    """A linear layer's forward and backward on this CPU (its three GEMMs, 6·n³ FLOPs), best of 5 after one
    untimed pass: the rate behind run-time estimates. A training step's GEMMs run in these layouts (the weight
    transposed, and the backward's two); a plain `a @ b` can take another kernel, ten times slower for emulated BF16.
    fp32: n = 512 (about 40 ms); bf16: n = 256, since without BF16 instructions it is emulated (about 30 ms a pass).
    Measured before any worker starts (cli): a process importing torch beside it slowed it about seven-fold."""
    import time
    n = 512 if dtype is None else 256
    x = torch.randn(n, n, dtype=dtype, requires_grad=True)
    w = torch.randn(n, n, dtype=dtype, requires_grad=True)
    grad = torch.ones(n, n, dtype=dtype)

    def step() -> None:
        torch.nn.functional.linear(x, w).backward(grad)

    step()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    return 6 * n ** 3 / best / 1e9


# /proc/cpuinfo flags of the instructions native BF16 matmuls use (oneDNN): AVX512-BF16 and AMX. Without them a
# BF16 matmul is converted to fp32 and back (emulated).
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _ceilings(torch: Any) -> dict | None:
    """The cached GEMM and copy ceilings, or None: they are measured after a run's first stages (run.runner),
    never here, so a first run is not held up by them. BENCH_REFRESH_CEILINGS=1 (probe again) measures them now."""
    from bench_core.machine.ceilings import cached, cached_or_measure
    if os.environ.get("BENCH_REFRESH_CEILINGS") == "1":
        found = cached_or_measure(torch, refresh=True)
    else:
        found = cached()
    return found.to_dict() if found else None


def print_collected(collect_facts: Any) -> int:
    """Print what `collect_facts()` returns as one JSON line, the only thing on stdout (for the parent to read)."""
    import contextlib
    import json
    with contextlib.redirect_stdout(sys.stderr):  # stray prints of imported libraries must not corrupt the JSON
        data = collect_facts()
    print(json.dumps(data, default=str))
    return 0


def main() -> int:
    """`python -m bench_core.machine.probe_collect`: print the probe as JSON (run by the parent in a fresh process)."""
    return print_collected(collect)


if __name__ == "__main__":
    sys.exit(main())
