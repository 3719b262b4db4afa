"""What the GPU and the host were doing while a worker timed its steps: NVML samples on a background thread (SM
clock, clock-event reasons, power, temperature, compute processes), the host's load average and the worker's own
CPU time. Raw figures only: measure.noise derives the stage's figures and its flags from them.

Without pynvml or an NVIDIA GPU every GPU field stays empty; nothing here raises.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import asdict, dataclass, fields, replace
from enum import StrEnum
from typing import Any

SAMPLE_EVERY_S = 0.1   # NVML's clock and reason counters update at about this rate; a sample costs ~0.1 ms of GIL
RUN_PID_ENV = "BENCH_RUN_PID"   # the runner's pid: the processes of this run descend from it

# NVML's clock-event (formerly throttle) reason bits, by name. gpu_idle and applications_clocks_setting are not a
# cause of a slow step: the first means there was no work, the second that clocks sit where someone set them.
REASON_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
               0x10: "sync_boost", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake",
               0x100: "display_clock_setting", 0x200: "board_limit", 0x400: "reliability"}
NOT_CAUSES = frozenset({"gpu_idle", "applications_clocks_setting"})
CLOCK_SETTING_BIT = 0x2


class ClocksLocked(StrEnum):
    YES = "yes"           # application clocks off their default, or NVML said a clock setting held the clocks
    NO = "no"             # application clocks at their default and no clock setting seen holding them
    UNKNOWN = "unknown"   # NVML could not say (no GPU, no pynvml, or the query is not supported)


def decode_reasons(mask: int) -> tuple[str, ...]:
    """The cause names of a reason bitmask, in bit order; an unnamed bit keeps its value."""
    names = [REASON_BITS.get(1 << b, f"bit_0x{1 << b:x}") for b in range(mask.bit_length()) if mask >> b & 1]
    return tuple(n for n in names if n not in NOT_CAUSES)


@dataclass(frozen=True)
class Conditions:
    """One process's timed steps (or, merged, a stage's processes): every NVML sample, and the host's figures."""
    sm_clock_mhz: tuple[int, ...] = ()     # every sample of every process
    power_w: tuple[float, ...] = ()
    temp_c_max: float | None = None
    throttle_reasons: tuple[str, ...] = ()  # causes seen in any sample (decode_reasons), in bit order
    other_processes: int | None = None     # compute processes on the GPU not of this run; None: NVML cannot say
    clocks_locked: ClocksLocked = ClocksLocked.UNKNOWN
    load_avg: float | None = None          # the host's 1-minute load average, the larger of start and end
    host_cores: int | None = None          # the host's logical cores, what the load average is counted against
    cpu_share: float | None = None         # worker CPU time ÷ wall time over the timed steps (the lowest process)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["clocks_locked"] = self.clocks_locked.value
        data["sm_clock_mhz"], data["power_w"] = list(self.sm_clock_mhz), list(self.power_w)
        data["throttle_reasons"] = list(self.throttle_reasons)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Conditions:
        if not isinstance(data, dict):
            raise TypeError(f"conditions: {data!r} is not an object")
        known = {f.name for f in fields(cls)}
        clean = {k: v for k, v in data.items() if k in known}
        for name in ("sm_clock_mhz", "power_w", "throttle_reasons"):
            clean[name] = tuple(clean.get(name) or ())
        clean["clocks_locked"] = ClocksLocked(clean.get("clocks_locked") or ClocksLocked.UNKNOWN)
        return cls(**clean)

    def merged(self, other: Conditions) -> Conditions:
        """Another process of the same stage: samples pooled, reasons united, the worst of each host figure."""
        reasons = dict.fromkeys(self.throttle_reasons + other.throttle_reasons)
        locks = {self.clocks_locked, other.clocks_locked}
        return replace(self, sm_clock_mhz=self.sm_clock_mhz + other.sm_clock_mhz, power_w=self.power_w + other.power_w,
                       temp_c_max=_pick(max, self.temp_c_max, other.temp_c_max),
                       throttle_reasons=tuple(sorted(reasons, key=_bit_order)),
                       other_processes=_pick(max, self.other_processes, other.other_processes),
                       clocks_locked=(ClocksLocked.YES if ClocksLocked.YES in locks else ClocksLocked.NO
                                      if locks == {ClocksLocked.NO} else ClocksLocked.UNKNOWN),
                       load_avg=_pick(max, self.load_avg, other.load_avg),
                       host_cores=_pick(max, self.host_cores, other.host_cores),
                       cpu_share=_pick(min, self.cpu_share, other.cpu_share))


_BITS = {name: bit for bit, name in REASON_BITS.items()}


def _bit_order(name: str) -> int:
    return _BITS.get(name) or _safe(lambda: int(name.removeprefix("bit_0x"), 16)) or 0


def _pick(fn: Any, a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else fn(a, b)


def _safe(fn: Any) -> Any:
    try:
        return fn()
    except Exception:
        return None


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])   # the command name may hold spaces and ')'
    except (OSError, ValueError, IndexError):
        return None


def of_this_run(pid: int, run_pid: int) -> bool:
    """Whether `pid` descends from the runner: this run's other workers (waiting for `go`, idle by design) and its
    ceilings process (idle until the last stage) hold CUDA contexts on the GPU, but take none of its time."""
    for _ in range(64):
        if pid == run_pid:
            return True
        parent = _parent(pid)
        if parent is None or parent <= 1:
            return False
        pid = parent
    return False


def count_others(pids: set[int], own: int, run_pid: int) -> int | None:
    """Compute processes on the GPU that are not this run's. NVML names processes by the host's pids; where ours is
    not among them (another pid namespace, as in most containers) they cannot be told apart, unless there is only
    one: the worker holds a context on this GPU while it times, so that one is the worker itself."""
    if own in pids:
        return sum(1 for pid in pids if pid != own and not of_this_run(pid, run_pid))
    return 0 if len(pids) == 1 else None


class ConditionsSampler:
    """Started just before the timed steps and stopped just after them, in the worker. `stop()` returns the
    process's Conditions; on a machine without NVML, only the host's figures."""

    def __init__(self, index: int, every_s: float = SAMPLE_EVERY_S):
        self.index, self.every_s = index, every_s
        self.own = os.getpid()
        self.run_pid = int(os.environ.get(RUN_PID_ENV) or os.getppid())
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._clocks: list[int] = []
        self._clock_at: list[float] = []   # perf_counter of each clock sample (the warm-up's record times them)
        self._power: list[float] = []
        self._temps: list[float] = []
        self._mask = 0
        self._reasons_read = False
        self._pids: set[int] = set()
        self._pids_read = False
        self._nvml: Any = None
        self._handle: Any = None
        self._app_clock: tuple[Any, Any] = (None, None)
        try:
            import pynvml
            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:
            self._handle = None

    def start(self) -> None:
        self._load_start = _safe(lambda: os.getloadavg()[0])
        self._wall0, self._cpu0 = time.perf_counter(), time.process_time()   # process_time: every thread's
        if self._handle is None:
            return
        nvml, h = self._nvml, self._handle
        self._app_clock = (_safe(lambda: nvml.nvmlDeviceGetApplicationsClock(h, nvml.NVML_CLOCK_SM)),
                           _safe(lambda: nvml.nvmlDeviceGetDefaultApplicationsClock(h, nvml.NVML_CLOCK_SM)))
        self._sample()   # at once: the shortest timed loop still has a first and a last sample
        self._thread = threading.Thread(target=self._loop, name="conditions-sampler", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self._sample()

    def _reasons(self) -> int | None:
        nvml, h = self._nvml, self._handle
        read = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)   # the older name, before driver 535
        return None if read is None else _safe(lambda: int(read(h)))

    def _sample(self) -> None:
        nvml, h = self._nvml, self._handle
        clock = _safe(lambda: int(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)))
        if clock is not None:
            self._clocks.append(clock)
            self._clock_at.append(time.perf_counter())
        mask = self._reasons()
        if mask is not None:
            self._mask |= mask
            self._reasons_read = True
        power = _safe(lambda: nvml.nvmlDeviceGetPowerUsage(h) / 1000)   # mW
        if power is not None:
            self._power.append(float(power))
        temp = _safe(lambda: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))
        if temp is not None:
            self._temps.append(float(temp))
        procs = _safe(lambda: nvml.nvmlDeviceGetComputeRunningProcesses(h))
        if procs is not None:
            self._pids.update(int(p.pid) for p in procs)
            self._pids_read = True

    def _locked(self) -> ClocksLocked:
        app, default = self._app_clock
        if (app is not None and default is not None and app != default) or self._mask & CLOCK_SETTING_BIT:
            return ClocksLocked.YES
        return ClocksLocked.NO if app is not None and default is not None and self._reasons_read else \
            ClocksLocked.UNKNOWN

    @property
    def clock_samples(self) -> tuple[tuple[float, int], ...]:
        """(perf_counter, MHz) of each SM clock sample so far; read after stop()."""
        return tuple(zip(self._clock_at, self._clocks, strict=True))

    def stop(self) -> Conditions:
        wall, cpu = time.perf_counter() - self._wall0, time.process_time() - self._cpu0
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._sample()
        loads = [v for v in (self._load_start, _safe(lambda: os.getloadavg()[0])) if v is not None]
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
        return Conditions(sm_clock_mhz=tuple(self._clocks), power_w=tuple(self._power),
                          temp_c_max=max(self._temps) if self._temps else None,
                          throttle_reasons=decode_reasons(self._mask),
                          other_processes=count_others(self._pids, self.own, self.run_pid) if self._pids_read
                          else None,
                          clocks_locked=self._locked(), load_avg=max(loads) if loads else None,
                          host_cores=os.cpu_count(), cpu_share=cpu / wall if wall > 0 else None)
