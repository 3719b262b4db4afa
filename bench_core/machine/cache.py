"""A per-user cache of facts that are slow to measure and only change with the machine or its software.

``environment_fingerprint()`` hashes what such a fact depends on: the host, the Python interpreter, the versions of
torch / apex / triton, the build time of Apex's CUDA extensions, the NVIDIA driver and the visible GPUs. It never
imports torch (it runs in the dashboard process, in well under 50 ms).

``load(kind, fingerprint)`` / ``save(kind, fingerprint, data)`` keep one JSON file per kind and fingerprint under
``$BENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/bench_core``, else ``~/.cache/bench_core``. A cache is a convenience:
a corrupt, foreign or unwritable file is a miss (``None``) or a skipped save, never an exception.

Torch-free on purpose.
"""
from __future__ import annotations

import glob
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from typing import Any

from bench_core.machine.packages import KernelPackage

SCHEMA = 2                       # bump when the meaning of cached data changes: old files become misses
KEEP_PER_KIND = 8                # older fingerprints of one kind are pruned on save
DISTRIBUTIONS = ("torch", "apex", "triton", "pytorch-triton")  # plus the kernel packages a caller names
APEX_EXTENSIONS = ("amp_C", "fused_layer_norm_cuda")
_KIND = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def cache_dir() -> str:
    if os.environ.get("BENCH_CACHE_DIR"):
        return os.environ["BENCH_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "bench_core")


def _read(path: str, limit: int = 4096) -> str | None:
    try:
        with open(path, errors="replace") as fh:
            return fh.read(limit).strip()
    except OSError:
        return None


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except Exception:
        return None


def _extension_stamp(name: str) -> str | None:
    """Path, size and mtime of an extension's shared object: a rebuild changes it, the version '0.1' does not."""
    try:
        spec = importlib.util.find_spec(name)  # top-level name: locates the file, imports nothing
    except Exception:
        return None
    origin = getattr(spec, "origin", None) if spec else None
    if not origin:
        return None
    try:
        st = os.stat(origin)
        return f"{origin}:{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        return origin


def _cpu_model() -> str | None:
    text = _read("/proc/cpuinfo", 1 << 16) or ""
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    return match.group(1).strip() if match else platform.processor() or None


def gpu_list() -> list[str]:
    """The GPUs the driver reports, cheaply: /proc first, then NVML if importable, then ``nvidia-smi -L``.

    ``CUDA_VISIBLE_DEVICES`` is part of the fingerprint separately, so the full list is enough here."""
    gpus = []
    for info in sorted(glob.glob("/proc/driver/nvidia/gpus/*/information")):
        text = _read(info) or ""
        model = re.search(r"^Model:\s*(.+)$", text, re.M)
        uuid = re.search(r"^GPU UUID:\s*(.+)$", text, re.M)
        gpus.append(" ".join(m.group(1).strip() for m in (model, uuid) if m) or os.path.basename(os.path.dirname(info)))
    if gpus:
        return gpus
    if importlib.util.find_spec("pynvml") is not None:
        try:
            import pynvml
            pynvml.nvmlInit()
            try:
                for i in range(pynvml.nvmlDeviceGetCount()):
                    handle = pynvml.nvmlDeviceGetHandleByIndex(i)
                    name, uuid = pynvml.nvmlDeviceGetName(handle), pynvml.nvmlDeviceGetUUID(handle)
                    gpus.append(f"{_text(name)} {_text(uuid)}")
            finally:
                pynvml.nvmlShutdown()
            return gpus
        except Exception:
            gpus = []
    smi = shutil.which("nvidia-smi")
    if smi and os.path.exists("/proc/driver/nvidia/version"):  # a driver without /proc/…/gpus: rare
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=5).stdout  # noqa: S603
            gpus = [line.strip() for line in out.splitlines() if line.strip()]
        except Exception:
            gpus = []
    return gpus


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def environment_facts(packages: Iterable[KernelPackage] = ()) -> dict[str, Any]:
    """What the fingerprint hashes, as plain data (for display and for debugging a cache miss)."""
    return {
        "schema": SCHEMA,
        "host": socket.gethostname(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": sys.executable,
        "python_version": sys.version,
        "distributions": {name: _version(name) for name in
                          DISTRIBUTIONS + tuple(d for p in packages for d in p.distributions)},
        "apex_extensions": {name: _extension_stamp(name) for name in APEX_EXTENSIONS},
        "driver": _read("/proc/driver/nvidia/version"),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "gpus": gpu_list(),
    }


def environment_fingerprint(packages: Iterable[KernelPackage] = ()) -> str:
    """A short hash that changes when the machine or the software environment changes (the kernel `packages`
    included, where the cached fact depends on them). Imports no torch."""
    blob = json.dumps(environment_facts(packages), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _path(kind: str, fingerprint: str) -> str | None:
    if not (_KIND.match(kind or "") and _KIND.match(fingerprint or "")):
        return None
    return os.path.join(cache_dir(), f"{kind}-{fingerprint}.json")


def load(kind: str, fingerprint: str) -> dict | None:
    """The cached data for this kind and fingerprint, or None (absent, corrupt, foreign or of an old schema)."""
    path = _path(kind, fingerprint)
    if path is None:
        return None
    try:
        with open(path) as fh:
            entry = json.load(fh)
    except (OSError, ValueError):
        return None
    if not (isinstance(entry, dict) and entry.get("schema") == SCHEMA and entry.get("kind") == kind
            and entry.get("fingerprint") == fingerprint and isinstance(entry.get("data"), dict)):
        return None
    return entry["data"]


def save(kind: str, fingerprint: str, data: dict) -> bool:
    """Write atomically (a temporary file, then os.replace). False, never an exception, when it cannot."""
    path = _path(kind, fingerprint)
    if path is None:
        return False
    folder = os.path.dirname(path)
    entry = {"schema": SCHEMA, "kind": kind, "fingerprint": fingerprint, "saved_at": time.time(), "data": data}
    tmp = None
    try:
        text = json.dumps(entry, indent=1, sort_keys=True)
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{kind}-", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        tmp = None
    except (OSError, TypeError, ValueError):
        return False
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    _prune(kind, folder, keep=path)
    return True


def _prune(kind: str, folder: str, keep: str) -> None:
    try:
        paths = sorted(glob.glob(os.path.join(folder, f"{kind}-*.json")), key=os.path.getmtime, reverse=True)
        for path in [p for p in paths if p != keep][KEEP_PER_KIND - 1:]:
            os.unlink(path)
    except OSError:
        pass
