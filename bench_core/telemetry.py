"""Live GPU telemetry through NVML (nvidia-ml-py). Returns None where there is no NVIDIA GPU."""
from __future__ import annotations


def gpu_telemetry() -> list[dict] | None:
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            util = pynvml.nvmlDeviceGetUtilizationRates(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            name = pynvml.nvmlDeviceGetName(h)
            out.append({"index": i, "name": name.decode() if isinstance(name, bytes) else name,
                        "util_pct": util.gpu, "mem_used_mib": mem.used / 2**20, "mem_total_mib": mem.total / 2**20,
                        "power_w": _safe(lambda: pynvml.nvmlDeviceGetPowerUsage(h) / 1000),
                        "temp_c": _safe(lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU))})
        return out
    except Exception:
        return None
    finally:
        pynvml.nvmlShutdown()


def _safe(fn):
    try:
        return fn()
    except Exception:
        return None


def has_nvidia_gpu() -> bool:
    """Cheap check without torch, for choosing defaults before the probe is back."""
    devices = gpu_telemetry()
    return bool(devices)
