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
# NVLink multicast stays off on shared hosts: a program using it can take the host's GPUs down for others.
DISTRIBUTED_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


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
        if kind in ("ready", "started", "warmup", "memory", "kernels", "finished") and "t" in event:
            self.result = replace(self.result, timeline={**self.result.timeline, kind: event["t"]})
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
                        peak_reserved_mib=event.get("peak_reserved_mib"), peak_rss_mib=event.get("peak_rss_mib"),
                        rank_peak_mib=tuple(event.get("rank_peak_mib") or ()))
        elif kind == "kernels":
            self.update(kernels=event["seen"], sdpa_backend=event.get("sdpa_backend"), verdict=event["verdict"],
                        warnings=tuple(event.get("warnings") or ()), autocast_dtype=event.get("autocast_dtype"))
        elif kind == "unavailable":
            self.update(status="unavailable", reason=event["reason"])
        elif kind == "error":
            self.update(status="oom" if event.get("kind") == "oom" else "failed", reason=event["message"])
        elif kind == "finished":
            self.update(status="ok" if not self.result.finished else self.result.status)


class Worker:
    """One stage's process. It imports torch at once, then waits for its job on stdin."""

    def __init__(self, env: dict | None, warm_cuda: bool = False, world: int = 1):
        self.stderr = tempfile.TemporaryFile(mode="w+")
        if world > 1:  # torchrun (through a launcher that dies with us), one worker per rank
            cmd = ["-m", "bench_core.launch", "--standalone", f"--nproc-per-node={world}", "-m", "bench_core.worker"]
        else:
            cmd = ["-m", "bench_core.worker"] + (["--warm-cuda"] if warm_cuda else [])
        self.proc = subprocess.Popen([sys.executable, *cmd], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True,
                                     start_new_session=True)

    def kill(self) -> None:
        """Kill the worker's whole process group; the driver frees its GPU memory when it dies."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def stderr_tail(self) -> str | None:
        self.stderr.seek(0)
        lines = [ln for ln in self.stderr.read().strip().splitlines() if ln.strip()]
        return lines[-1][:300] if lines else None

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout, self.stderr):
            if stream and not stream.closed:
                stream.close()


class WorkerSpawner:
    """Keeps at most one idle worker importing torch ahead of its stage, so process start-up
    overlaps the previous stage's untimed profiling and teardown instead of adding to the wall time."""

    def __init__(self, env: dict | None = None, device: str = "auto"):
        self.env = env
        self.warm_cuda = device in ("auto", "cuda")  # a CPU run must not carry a CUDA context in its RSS
        self._idle: Worker | None = None

    def prepare(self) -> None:
        if self._idle is None:
            self._idle = Worker(self.env, self.warm_cuda)

    def take(self) -> Worker:
        worker, self._idle = self._idle, None
        if worker is None or worker.proc.poll() is not None:
            if worker is not None:
                worker.close()
            worker = Worker(self.env, self.warm_cuda)
        return worker

    def close(self) -> None:
        if self._idle is not None:
            self._idle.kill()
            self._idle.close()
            self._idle = None


def run_stage(cfg: BenchConfig, stage: Stage, index: int, device: str, probe: dict, *,
              on_update: OnUpdate | None = None, cancel: threading.Event | None = None,
              timeout_s: float = 900.0, env: dict | None = None,
              spawner: WorkerSpawner | None = None) -> StageResult:
    state = StageRun(initial_stage(index, stage, cfg.iters), on_update)
    reason = stage.unavailable_reason(probe, device)
    if reason:
        state.update(status="unavailable", reason=reason)
        return state.result
    if cancel is not None and cancel.is_set():
        state.update(status="cancelled", reason="cancelled before it started")
        return state.result

    env = spawner.env if spawner is not None else env
    job = json.dumps({"config": cfg.to_dict(), "stage": stage.as_dict(), "device": device})
    job_file = None
    if stage.world_size > 1:
        job_file = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        job_file.write(job)
        job_file.close()
        worker = Worker({**(env or os.environ), **DISTRIBUTED_ENV, "BENCH_JOB_FILE": job_file.name,
                         **({"OMP_NUM_THREADS": "1"} if device == "cpu" else {})}, world=stage.world_size)
    else:
        worker = spawner.take() if spawner is not None else Worker(env)
    started = time.monotonic()
    state.update(started_at=time.time())
    events: queue.Queue = queue.Queue()

    def read() -> None:
        for line in worker.proc.stdout:
            try:
                events.put(json.loads(line))
            except json.JSONDecodeError:
                continue
        events.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if job_file is None:
            worker.proc.stdin.write(job)
        worker.proc.stdin.close()
    except BrokenPipeError:
        pass  # the worker died before reading its job; its exit code says why
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
            if event.get("event") == "memory" and spawner is not None:
                spawner.prepare()  # timed iterations are over: start the next stage's process now
        if cancel is not None and cancel.is_set():
            stopped = ("cancelled", "cancelled by user")
        elif time.monotonic() - started > timeout_s:
            stopped = ("timeout", f"stage exceeded its {timeout_s:.0f} s limit")
        if stopped:
            worker.kill()
            break
    code = worker.proc.wait()
    reader.join(timeout=5)
    tail = worker.stderr_tail()
    worker.close()
    if job_file is not None:
        os.unlink(job_file.name)
    end = {"wall_s": time.monotonic() - started, "finished_at": time.time()}
    if stopped:
        state.update(status=stopped[0], reason=stopped[1], **end)
    elif not state.result.finished:
        state.update(status="failed", reason=describe_exit(code) + (f": {tail}" if tail else ""), **end)
    else:
        state.update(**end)
    return state.result


def run_all(run: RunResult, probe: dict, *, on_update: Callable[[RunResult], None] | None = None,
            cancel: threading.Event | None = None, timeout_s: float = 900.0, env: dict | None = None,
            spawner: WorkerSpawner | None = None) -> RunResult:
    """Every stage of a run, one after another; one stage's failure never stops the next."""
    stages = [Stage.of(s) for s in run.stages]
    holder = {"run": run}

    def stage_update(result: StageResult) -> None:
        holder["run"] = holder["run"].with_stage(result)
        if on_update:
            on_update(holder["run"])

    spawner = spawner or WorkerSpawner(env, run.device)
    try:
        for index, stage in enumerate(stages):
            run_stage(run.config, stage, index, run.device, probe, on_update=stage_update, cancel=cancel,
                      timeout_s=timeout_s, spawner=spawner)
    finally:
        spawner.close()
    final = replace(holder["run"], status="cancelled" if cancel is not None and cancel.is_set() else "done")
    if on_update:
        on_update(final)
    return final
