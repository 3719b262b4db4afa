"""A worker's warm-up as it ran, and from which step it had settled.

WarmupTrace is raw: each warm-up step's time and start, and the SM clock samples over the warm-up, as the worker
recorded them (run.warmup_record). `settle` names the first point after which the process already measured what
its timed steps measured; the warm-up beyond it was spare (benchmarks/warmup_settle.py prints both per process).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# NVIDIA's SM clock moves in steps of 15 MHz (the supported-clocks table of Ampere and Hopper parts): a sample
# within one step of a figure is at that figure as closely as NVML can say.
CLOCK_STEP_MHZ = 15
# Consecutive in-band steps that show a process settled. A step whose time distribution still has its median
# outside the band falls inside it with probability at most 1/2, so k in a row happen by chance with probability
# at most 2**-k; 5 is the least k with 2**-k under 5% (3.1%). See `settle`.
SETTLED_RUN = 5


@dataclass(frozen=True)
class WarmupTrace:
    """One process's warm-up (one round of a stage). Times are seconds from the warm-up's start."""
    steps: int = 0                          # warm-up steps run (as the Warmup event counts them)
    seconds: float = 0.0                    # the warm-up's length, start to the last step's end
    step_ms: tuple[float, ...] = ()         # each loop step: CUDA events on CUDA, perf_counter on CPU
    step_start_s: tuple[float, ...] = ()    # each loop step's start
    clock_mhz: tuple[int, ...] = ()         # SM clock samples over the warm-up (CUDA with NVML)
    clock_s: tuple[float, ...] = ()         # each sample's time

    @property
    def untimed_steps(self) -> int:
        """Steps before the first recorded one: a CUDA-graphs stage's eager steps and its capture."""
        return self.steps - len(self.step_ms)

    def to_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "seconds": self.seconds, "step_ms": list(self.step_ms),
                "step_start_s": list(self.step_start_s), "clock_mhz": list(self.clock_mhz),
                "clock_s": list(self.clock_s)}

    @classmethod
    def from_dict(cls, data: Any, where: str = "warm-up") -> WarmupTrace:
        """Checked: a bad field raises ValueError naming it and the limit it broke."""
        if not isinstance(data, dict):
            raise ValueError(f"{where}: not an object")
        steps = data.get("steps", 0)
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ValueError(f"{where}, field steps: {steps!r} is not a non-negative integer")
        seconds = _number(data.get("seconds", 0.0), f"{where}, field seconds")
        series = {name: tuple(_number(v, f"{where}, field {name}[{i}]") for i, v in enumerate(_list(data, name, where)))
                  for name in ("step_ms", "step_start_s", "clock_mhz", "clock_s")}
        for a, b in (("step_ms", "step_start_s"), ("clock_mhz", "clock_s")):
            if len(series[a]) != len(series[b]):
                raise ValueError(f"{where}, fields {a} and {b}: {len(series[a])} and {len(series[b])} values, "
                                 "not one each")
        if len(series["step_ms"]) > steps:
            raise ValueError(f"{where}, field step_ms: {len(series['step_ms'])} steps, over the {steps} run")
        return cls(steps=steps, seconds=seconds, step_ms=series["step_ms"], step_start_s=series["step_start_s"],
                   clock_mhz=tuple(int(v) for v in series["clock_mhz"]), clock_s=series["clock_s"])


def traces_from(data: Any) -> tuple[WarmupTrace, ...]:
    """A stage's `warmups` field as saved: a list of traces (absent in files written before it: none)."""
    if data is None:
        return ()
    if not isinstance(data, list):
        raise ValueError("warmups: not a list")
    return tuple(WarmupTrace.from_dict(item, f"warmups[{i}]") for i, item in enumerate(data))


def _list(data: dict, name: str, where: str) -> list:
    values = data.get(name) or []
    if not isinstance(values, list):
        raise ValueError(f"{where}, field {name}: not a list")
    return values


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{where}: {value!r} is not a non-negative number")
    return value


@dataclass(frozen=True)
class Settled:
    """Where a process had settled: it could have stopped warming up after `steps` steps, `seconds` in."""
    steps: int
    seconds: float
    clock_checked: bool     # False: no SM clock samples to judge (CPU, no NVML), step times only


def clock_settled_s(trace: WarmupTrace, target_mhz: float) -> float | None:
    """When the SM clock reached `target_mhz` for good: the first sample after the last one more than
    CLOCK_STEP_MHZ off it (0.0 when none was off); None when the warm-up's last sample was still off."""
    off = [i for i, mhz in enumerate(trace.clock_mhz) if abs(mhz - target_mhz) > CLOCK_STEP_MHZ]
    if not off:
        return 0.0
    last = off[-1]
    return trace.clock_s[last + 1] if last + 1 < len(trace.clock_s) else None


def settle(trace: WarmupTrace, clock_target_mhz: float | None, band_ms: tuple[float, float],
           run: int = SETTLED_RUN) -> Settled | None:
    """The first point of the warm-up after which (a) the SM clock sat at `clock_target_mhz`, the timed steps'
    median, within one clock step (CLOCK_STEP_MHZ) and stayed there, and (b) the next `run` steps each took a
    time inside `band_ms`, the stage's own timed-steps p10-p90; None when the warm-up never showed both.

    Why these and nothing fitted: the two things that move a warm-up step's time are the clock (boost ramps after
    idle, power and thermal limits) and one-off work (allocator growth, library heuristics, caches). (a) asks the
    clock for what NVML can resolve, and for every later sample, since a clock can fall back. (b) takes its band
    from the stage's timed steps, so no threshold is chosen: a settled step lands inside with probability 0.8 by
    the band's definition, while a step whose time still has its median outside lands inside with probability at
    most 1/2, so `run` = 5 in a row mislead with probability at most 1/32. A settled process shows 5 in a row with
    probability 0.8**5 (about 1/3) at each step, so the rule finds it some steps late: it errs toward a longer
    warm-up, the safe side for arguing a shorter one. Without clock samples or a target, (b) alone decides.

    The warm-up syncs after each step, so each of its steps starts on an empty GPU queue: its time includes the
    first kernel's launch, which a timed step (queued behind the one before) does not."""
    lo, hi = band_ms
    checked = clock_target_mhz is not None and bool(trace.clock_mhz)
    clock_from = clock_settled_s(trace, clock_target_mhz) if checked and clock_target_mhz is not None else 0.0
    if clock_from is None:
        return None
    inside = [lo <= ms <= hi for ms in trace.step_ms]
    for first in range(len(inside) - run + 1):
        if trace.step_start_s[first] >= clock_from and all(inside[first:first + run]):
            return Settled(trace.untimed_steps + first, trace.step_start_s[first], checked)
    return None
