"""What this machine can run, as a typed, frozen record of the probe, and the one judge of Apex health.

Torch-free: the probe itself is collected in a fresh process (``bench_core.machine.probe_collect``), so a long-lived
server never holds a CUDA context. A CLI run reuses a probe cached for this machine and environment.
"""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench_core.config.environment import child_env
from bench_core.machine import cache as machine_cache
from bench_core.machine.ceilings import Ceilings
from bench_core.machine.packages import PACKAGES_ENV, KernelPackage, encode

APEX_EXTENSIONS = ("amp_C", "fused_layer_norm_cuda")
APEX_NEEDS = {"amp_C": "FusedAdam", "fused_layer_norm_cuda": "FusedLayerNorm"}


@dataclass(frozen=True)
class ExtensionState:
    found: bool = False
    loadable: bool = False
    origin: str | None = None
    error: str | None = None
    smoke_ok: bool | None = None      # None: no GPU here to try it on
    smoke_error: str | None = None


@dataclass(frozen=True)
class ApexState:
    status: str = "missing"           # missing | impostor | genuine
    distribution: Mapping[str, Any] | None = None
    extensions: Mapping[str, ExtensionState] = field(default_factory=dict)
    multi_tensor_apply_available: bool | None = None
    multi_tensor_apply_error: str | None = None
    distributed_adam: bool = False

    @property
    def label(self) -> str:
        version = (self.distribution or {}).get("version") or ""
        return self.status if self.status == "missing" else f"{self.status} {version}".strip()


@dataclass(frozen=True)
class PackageState:
    title: str = ""
    version: str | None = None
    importable: bool = False
    error: str | None = None          # "not installed", or the import's exact failure


# torch's CPU kernel levels below AVX-512 (torch.backends.cpu.get_cpu_capability): with one of these, even a CPU
# with BF16 instructions runs BF16 emulated (ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 simulates one).
BELOW_AVX512 = frozenset({"DEFAULT", "NO AVX", "AVX", "AVX2", "ZVECTOR", "VSX"})


@dataclass(frozen=True)
class CpuState:
    """What the CPU can do for the estimates: its kernel level, its BF16 instructions, its measured matmul rates."""
    capability: str | None = None          # torch.backends.cpu.get_cpu_capability(): AVX2, AVX512, ...
    bf16_flags: tuple[str, ...] = ()       # avx512_bf16 / amx_bf16 in /proc/cpuinfo
    matmul_gflops: float | None = None     # fp32
    bf16_matmul_gflops: float | None = None

    @property
    def bf16_emulated(self) -> bool | None:
        """True: BF16 matmuls run without BF16 instructions (converted through fp32); None: not probed."""
        if self.capability is None:
            return None
        return not self.bf16_flags or self.capability.upper() in BELOW_AVX512

    @property
    def bf16_note(self) -> str:
        """Why BF16 is slow here, in words, or "" where it is native or not known."""
        if not self.bf16_emulated:
            return ""
        why = (f"torch runs its {self.capability} kernels" if self.bf16_flags
               else "no AVX512-BF16 or AMX instructions")
        return f"BF16 is emulated on this CPU ({self.capability}: {why})"


@dataclass(frozen=True)
class CudaState:
    available: bool = False
    device_count: int = 0
    name: str | None = None
    capability: tuple[int, int] | None = None
    total_bytes: int | None = None
    free_bytes: int | None = None
    multiprocessors: int | None = None


@dataclass(frozen=True)
class Probe:
    """The probe's findings. `raw` is the collected JSON as is: it is what a run stores as its environment."""
    raw: Mapping[str, Any]
    torch: str | None
    cuda_runtime: str | None
    driver: str | None
    cuda: CudaState
    apex: ApexState
    cpu_available_bytes: int | None
    bf16: Mapping[str, bool]
    fp16: Mapping[str, bool]
    adam_fused: Mapping[str, bool]
    compile: Mapping[str, tuple[bool, str]]   # device -> (usable, reason)
    error: str | None = None
    packages: Mapping[str, PackageState] = field(default_factory=dict)  # liger_kernel, torchao, transformer_engine
    apex_rms: bool = False            # fused_layer_norm_cuda has the RMSNorm entry points
    ceilings: Ceilings | None = None  # measured GEMM/copy rates; None until measured (after a run's stages)
    cpu: CpuState = field(default_factory=CpuState)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Probe:
        data = dict(data or {})
        cuda = data.get("cuda") or {}
        apex = data.get("apex") or {}
        cap = cuda.get("capability")
        extensions = {}
        for name, info in (apex.get("extensions") or {}).items():
            smoke = info.get("smoke") or {}
            extensions[name] = ExtensionState(
                found=bool(info.get("found")), loadable=bool(info.get("loadable")), origin=info.get("origin"),
                error=info.get("error"), smoke_ok=smoke.get("ok"), smoke_error=smoke.get("error"))
        return cls(
            raw=data, torch=data.get("torch"), cuda_runtime=data.get("cuda_runtime"), driver=data.get("driver"),
            cuda=CudaState(available=bool(cuda.get("available")), device_count=int(cuda.get("device_count") or 0),
                           name=cuda.get("name"), capability=(int(cap[0]), int(cap[1])) if cap else None,
                           total_bytes=cuda.get("total_bytes"), free_bytes=cuda.get("free_bytes"),
                           multiprocessors=cuda.get("multiprocessors")),
            apex=ApexState(status=apex.get("status", "missing"), distribution=apex.get("distribution"),
                           extensions=extensions,
                           multi_tensor_apply_available=apex.get("multi_tensor_apply_available"),
                           multi_tensor_apply_error=apex.get("multi_tensor_apply_error"),
                           distributed_adam=bool(apex.get("distributed_adam"))),
            cpu_available_bytes=(data.get("cpu") or {}).get("available_bytes"),
            bf16=dict(data.get("bf16") or {}), fp16=dict(data.get("fp16") or {}),
            adam_fused=dict(data.get("adam_fused") or {}),
            compile={d: (bool(v.get("usable")), str(v.get("reason", "unknown")))
                     for d, v in (data.get("compile") or {}).items() if isinstance(v, dict)},
            error=data.get("error"),
            packages={name: PackageState(title=info.get("title") or name, version=info.get("version"),
                                         importable=bool(info.get("importable")), error=info.get("error"))
                      for name, info in (data.get("packages") or {}).items() if isinstance(info, dict)},
            apex_rms=bool(((apex.get("extensions") or {}).get("fused_layer_norm_cuda") or {}).get("rms")),
            ceilings=_ceilings_of(data.get("ceilings")), cpu=_cpu_of(data.get("cpu")))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.raw)

    def with_ceilings(self, ceilings: Ceilings | None) -> Probe:
        """This probe with ceilings measured after it was taken (raw follows, so the stored run keeps them)."""
        from dataclasses import replace
        return replace(self, ceilings=ceilings, raw={**self.raw,
                                                     "ceilings": ceilings.to_dict() if ceilings else None})

    # ------------------------------------------------------------ accessors
    @property
    def cuda_available(self) -> bool:
        return self.cuda.available

    @property
    def gpu_name(self) -> str | None:
        return self.cuda.name if self.cuda.available else None

    @property
    def free_bytes(self) -> dict[str, int | None]:
        """Free memory per device kind, for the memory check of a config."""
        return {"cuda": self.cuda.free_bytes, "cpu": self.cpu_available_bytes}

    @property
    def imported(self) -> bool:
        return bool(self.raw.get("imported"))

    def apex_reason(self, extension: str) -> str | None:
        """None when Apex's `extension` is genuine, built, loadable and (on a GPU) smoke-tested; else why not.

        The one place that judges Apex health: levers, the status board and the Kernels page all ask here.
        """
        apex = self.apex
        if apex.status == "missing":
            return "NVIDIA apex is not installed"
        if apex.status == "impostor":
            dist = apex.distribution or {}
            return f"not NVIDIA apex (found '{dist.get('name', 'apex')}' {dist.get('version', '?')})"
        info = apex.extensions.get(extension) or ExtensionState()
        if not info.found:
            return f"apex {extension} extension not built ({APEX_NEEDS.get(extension, 'it')} needs --cuda_ext)"
        if not info.loadable:
            return f"apex {extension} extension fails to load: {info.error or 'unknown error'}"
        if info.smoke_ok is False:
            return f"apex {extension} failed its smoke test on this GPU: {info.smoke_error}"
        return None

    def package_reason(self, name: str) -> str | None:
        """None when `name` imported in the probe; else why not (not installed, or the import's error)."""
        state = self.packages.get(name)
        if state is None:
            return "not probed (the probe predates it: measure the machine again)"
        if state.importable:
            return None
        return state.error or "not importable"

    def apex_ln_reason(self) -> str | None:
        return self.apex_reason("fused_layer_norm_cuda")

    def apex_rms_reason(self) -> str | None:
        """FusedRMSNorm shares fused_layer_norm_cuda, whose RMS entry points arrived in 2021."""
        reason = self.apex_reason("fused_layer_norm_cuda")
        if reason is None and not self.apex_rms:
            return "this Apex build's fused_layer_norm_cuda has no rms_forward_affine (an Apex older than 2021)"
        return reason

    @property
    def apex_healthy(self) -> bool:
        return all(self.apex_reason(ext) is None for ext in APEX_EXTENSIONS)


def _ceilings_of(data: Any) -> Ceilings | None:
    if not isinstance(data, Mapping):
        return None
    try:
        return Ceilings.from_dict(dict(data))
    except (TypeError, ValueError):
        return None  # a stored probe of another shape: as if not measured


def _cpu_of(data: Any) -> CpuState:
    data = data if isinstance(data, Mapping) else {}

    def rate(name: str) -> float | None:
        value = data.get(name)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None
    capability = data.get("capability")
    return CpuState(capability=capability if isinstance(capability, str) else None,
                    bf16_flags=tuple(str(f) for f in data.get("bf16_flags") or ()),
                    matmul_gflops=rate("matmul_gflops"), bf16_matmul_gflops=rate("bf16_matmul_gflops"))


FAILED_PROBE = {"cuda": {"available": False}, "apex": {"status": "missing", "extensions": {}}}


def run_probe(timeout: float = 180.0, env: dict | None = None, measure_again: bool = False,
              packages: Sequence[KernelPackage] = ()) -> Probe:
    """The probe in a fresh interpreter; on failure a Probe with `error` set and no CUDA.

    `measure_again` also re-measures the GPU ceilings; otherwise the probe carries the cached ones, if any (a run
    measures them after its stages, never before: see run.runner)."""
    cmd = [sys.executable, "-m", "bench_core.machine.probe_collect"]
    extra = {PACKAGES_ENV: encode(packages), **({"BENCH_REFRESH_CEILINGS": "1"} if measure_again else {})}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,  # noqa: S603 (our own argv)
                              env=child_env(env, **extra))
        return Probe.from_dict(json.loads(proc.stdout))
    except Exception as exc:  # a probe reports, it never crashes its caller
        return Probe.from_dict({**FAILED_PROBE, "error": f"probe failed: {type(exc).__name__}: {exc}"})


def cached_probe(refresh: bool = False, env: dict | None = None,
                 packages: Sequence[KernelPackage] = ()) -> tuple[Probe, bool]:
    """(probe, was_cached): the probe of this machine and environment, measured once and reused.

    Free memory changes between runs, so a cached probe has it refreshed through NVML/meminfo (no torch).
    """
    key = machine_cache.environment_fingerprint(packages)
    data = None if refresh else machine_cache.load("probe", key)
    if data is not None and is_current(data):
        return Probe.from_dict(_fresh_ceilings(_fresh_free_memory(data))), True
    probe = run_probe(env=env, measure_again=refresh, packages=packages)
    if not probe.error:
        machine_cache.save("probe", key, probe.to_dict())
    return probe, False


def is_current(data: dict | None) -> bool:
    """A cached probe that can be reused: no error, and its CPU rates measured as probe_collect measures them now."""
    from bench_core.machine.probe_collect import CPU_RATE_METHOD
    return data is not None and not data.get("error") and (data.get("cpu") or {}).get("rate_method") == CPU_RATE_METHOD


def has_cached_probe(packages: Sequence[KernelPackage] = ()) -> bool:
    """Whether cached_probe would reuse a probe rather than measure one."""
    return is_current(machine_cache.load("probe", machine_cache.environment_fingerprint(packages)))


def _fresh_free_memory(data: dict) -> dict:
    from bench_core.machine.telemetry import free_memory_now
    cuda_free, cpu_free = free_memory_now()
    data = dict(data)
    if cuda_free is not None and data.get("cuda"):
        data["cuda"] = {**data["cuda"], "free_bytes": cuda_free}
    if cpu_free is not None:
        data["cpu"] = {**(data.get("cpu") or {}), "available_bytes": cpu_free}
    return data


def _fresh_ceilings(data: dict) -> dict:
    """A cached probe taken before the ceilings were measured gets them from their own cache (torch-free; keyed
    without the kernel packages, as ceilings.cached_or_measure keys them)."""
    if data.get("ceilings"):
        return data
    from bench_core.machine.ceilings import CACHE_KIND
    found = machine_cache.load(CACHE_KIND, machine_cache.environment_fingerprint())
    return {**data, "ceilings": {**found, "from_cache": True}} if found else data
