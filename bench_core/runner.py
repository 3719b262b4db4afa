"""The engine's parent side: one isolated worker process per stage, its events turned into a StageResult."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from typing import Callable, Iterable

from .config import BenchConfig, resolve_device
from .levers import Stage
from .probe import cuda_available
from .results import RunResult, StageResult

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OnUpdate = Callable[[StageResult], None]


def initial_stage(index: int, stage: Stage, iters: int) -> StageResult:
    return StageResult(index=index, key=stage.key, label=stage.label, iters_total=iters, **stage.as_dict())


def new_run(cfg: BenchConfig, stages: Iterable[Stage], probe: dict, preset: str) -> RunResult:
    device = resolve_device(cfg.device, cuda_available(probe))
    env = {k: v for k, v in probe.items()}
    return RunResult(config=cfg, env=env, device=device, preset=preset,
                     stages=tuple(initial_stage(i, s, cfg.iters) for i, s in enumerate(stages)))


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"worker killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"worker killed by signal {-code}"
    return f"worker exited with code {code}"


class StageRun:
    """Folds a worker's JSON events into successive immutable StageResults."""

    def __init__(self, result: StageResult, on_update: OnUpdate | None):
        self.result = result
        self.on_update = on_update
        self.times: list[float] = []
        self.losses: list[float] = []

    def update(self, **changes) -> None:
        self.result = replace(self.result, times_ms=tuple(self.times), losses=tuple(self.losses), **changes)
        if self.on_update:
            self.on_update(self.result)

    def apply(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "started":
            self.update(status="running", params=event.get("params"))
        elif kind == "warmup":
            self.update(warmup_s=event["seconds"])
        elif kind == "iter":
            self.times.append(float(event["ms"]))
            self.losses.append(float(event["loss"]))
            self.update()
        elif kind == "memory":
            self.update(peak_allocated_mib=event.get("peak_allocated_mib"),
                        peak_reserved_mib=event.get("peak_reserved_mib"), peak_rss_mib=event.get("peak_rss_mib"))
        elif kind == "kernels":
            self.update(kernels=event["seen"], sdpa_backend=event.get("sdpa_backend"), verdict=event["verdict"],
                        warnings=tuple(event.get("warnings") or ()), autocast_dtype=event.get("autocast_dtype"))
        elif kind == "unavailable":
            self.update(status="unavailable", reason=event["reason"])
        elif kind == "error":
            self.update(status="oom" if event.get("kind") == "oom" else "failed", reason=event["message"])
        elif kind == "finished":
            self.update(status="ok" if not self.result.finished else self.result.status)


def _kill(proc: subprocess.Popen) -> None:
    """Kill the worker's whole process group; the driver frees its GPU memory when it dies."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_stage(cfg: BenchConfig, stage: Stage, index: int, device: str, probe: dict, *,
              on_update: OnUpdate | None = None, cancel: threading.Event | None = None,
              timeout_s: float = 900.0, env: dict | None = None) -> StageResult:
    state = StageRun(initial_stage(index, stage, cfg.iters), on_update)
    reason = stage.unavailable_reason(probe, device)
    if reason:
        state.update(status="unavailable", reason=reason)
        return state.result
    if cancel is not None and cancel.is_set():
        state.update(status="cancelled", reason="cancelled before it started")
        return state.result

    job = json.dumps({"config": cfg.to_dict(), "stage": stage.as_dict(), "device": device})
    started = time.monotonic()
    with tempfile.TemporaryFile(mode="w+") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "bench_core.worker"], cwd=ROOT, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                start_new_session=True)
        events: queue.Queue = queue.Queue()

        def read() -> None:
            for line in proc.stdout:
                try:
                    events.put(json.loads(line))
                except json.JSONDecodeError:
                    continue
            events.put(None)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        proc.stdin.write(job)
        proc.stdin.close()
        stopped = None
        while True:
            try:
                event = events.get(timeout=0.05)
            except queue.Empty:
                event = False
            if event is None:
                break
            if event:
                state.apply(event)
            if cancel is not None and cancel.is_set():
                stopped = ("cancelled", "cancelled by user")
            elif time.monotonic() - started > timeout_s:
                stopped = ("timeout", f"stage exceeded its {timeout_s:.0f} s limit")
            if stopped:
                _kill(proc)
                break
        code = proc.wait()
        reader.join(timeout=5)
        stderr.seek(0)
        tail = [ln for ln in stderr.read().strip().splitlines() if ln.strip()][-1:]
    wall = time.monotonic() - started
    if stopped:
        state.update(status=stopped[0], reason=stopped[1], wall_s=wall)
    elif not state.result.finished:
        detail = f": {tail[0][:300]}" if tail else ""
        state.update(status="failed", reason=describe_exit(code) + detail, wall_s=wall)
    else:
        state.update(wall_s=wall)
    return state.result


def run_all(run: RunResult, probe: dict, *, on_update: Callable[[RunResult], None] | None = None,
            cancel: threading.Event | None = None, timeout_s: float = 900.0, env: dict | None = None) -> RunResult:
    """Every stage of a run, one after another; one stage's failure never stops the next."""
    stages = [Stage(s.optimizer, s.norm, s.precision, s.compile) for s in run.stages]
    holder = {"run": run}

    def stage_update(result: StageResult) -> None:
        holder["run"] = holder["run"].with_stage(result)
        if on_update:
            on_update(holder["run"])

    for index, stage in enumerate(stages):
        run_stage(run.config, stage, index, run.device, probe, on_update=stage_update, cancel=cancel,
                  timeout_s=timeout_s, env=env)
    final = replace(holder["run"], status="cancelled" if cancel is not None and cancel.is_set() else "done")
    if on_update:
        on_update(final)
    return final
