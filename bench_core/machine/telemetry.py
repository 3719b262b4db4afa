"""Live GPU telemetry through NVML (nvidia-ml-py). Returns None where there is no NVIDIA GPU."""
from __future__ import annotations

import contextlib


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
                        "power_w": _safe(lambda h=h: pynvml.nvmlDeviceGetPowerUsage(h) / 1000),
                        "temp_c": _safe(lambda h=h: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU))})
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


class EnergyMeter:
    """NVML's total-energy counter (mJ since driver load), read around the timed steps. None where the GPU or
    driver does not support it: an energy figure is never estimated from power samples."""

    def __init__(self, index: int):
        self.index = index
        self._start: int | None = None
        self._handle = None
        try:
            import pynvml
            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:
            self._nvml = None

    def _read(self) -> int | None:
        if self._handle is None:
            return None
        try:
            return int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        except Exception:
            return None

    def start(self) -> None:
        self._start = self._read()

    def stop(self) -> float | None:
        end = self._read()
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
        if self._start is None or end is None or end < self._start:
            return None
        return (end - self._start) / 1e3  # joules


def free_memory_now() -> tuple[int | None, int | None]:
    """(free bytes on GPU 0 via NVML, MemAvailable of this host), without importing torch."""
    cuda_free = None
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            cuda_free = int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).free)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        cuda_free = None
    cpu_free = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    cpu_free = int(line.split()[1]) * 1024
    except OSError:
        pass
    return cuda_free, cpu_free
