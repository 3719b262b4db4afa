"""A stage process's one-off costs, measured on this machine by its runs and cached: what the estimate of the next
run adds to its steps.

- compile: a compiled stage's first step (torch.compile traces and builds its kernels there), less one step. Each
  process pays it: a later one may find inductor's on-disk cache and pay less, so the cached figure is the median.
- fixed: a process's seconds beyond its steps (timed, warm-up and profiled steps): start-up not hidden, the first
  step's allocations, the profiler, reading its trace.
- steps: each stage's median step time, keyed by the stage and the model's shape (results/phase.step_key): the next
  run of that stage at that shape is estimated from it, labelled as measured.

Both are read from a finished run's per-process timelines (results/phase: the `started` and `first_step` events)
and saved per device under the machine cache (machine/cache), so they follow the machine and its software.
Torch-free.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bench_core.machine import cache as machine_cache

CACHE_KIND = "stage-costs"
# Until a run has measured them here, assumed (and shown as assumed): a process's fixed cost, and a compile; a CPU
# inductor compile of even the tiny model takes minutes on 2 cores, a GPU's tens of seconds.
ASSUMED_FIXED_S = 3.0
ASSUMED_COMPILE_S = {"cpu": 120.0, "cuda": 60.0}


@dataclass(frozen=True)
class StageCosts:
    device: str
    fixed_s: float
    compile_s: float
    measured_fixed: bool = False      # False: assumed (not measured on this machine yet)
    measured_compile: bool = False
    steps: Mapping[str, float] = field(default_factory=dict)   # step_key -> median step seconds, measured here

    @property
    def compile_label(self) -> str:
        how = "measured on this machine" if self.measured_compile else "assumed: not measured on this machine yet"
        return f"compile about {self.compile_s:.0f} s a process ({how})"


def save(device: str, fixed_s: float | None, compile_s: float | None,
         steps: Mapping[str, float] | None = None) -> None:
    """Keep what a finished run measured for the next estimate on this machine (a figure it did not measure keeps
    its earlier value; `steps` adds to or replaces the stages it names)."""
    if fixed_s is None and compile_s is None and not steps:
        return
    key = machine_cache.environment_fingerprint()
    data = dict(machine_cache.load(CACHE_KIND, key) or {})
    entry = dict(data.get(device) or {})
    entry.update({k: v for k, v in (("fixed_s", fixed_s), ("compile_s", compile_s)) if v is not None})
    if steps:
        known = entry.get("steps")
        entry["steps"] = {**(known if isinstance(known, dict) else {}), **steps}
    machine_cache.save(CACHE_KIND, key, {**data, device: entry})


def load(device: str) -> StageCosts:
    """The costs measured here for `device`, each figure assumed where no run has measured it yet."""
    entry = (machine_cache.load(CACHE_KIND, machine_cache.environment_fingerprint()) or {}).get(device) or {}
    fixed, compile_, steps = entry.get("fixed_s"), entry.get("compile_s"), entry.get("steps")
    steps = {k: v for k, v in steps.items() if isinstance(v, float) and v > 0} if isinstance(steps, dict) else {}
    return StageCosts(device, fixed if isinstance(fixed, float) else ASSUMED_FIXED_S,
                      compile_ if isinstance(compile_, float) else ASSUMED_COMPILE_S.get(device, 60.0),
                      measured_fixed=isinstance(fixed, float), measured_compile=isinstance(compile_, float),
                      steps=steps)
