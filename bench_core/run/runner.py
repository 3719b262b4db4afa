"""The one loop over a run's stages: each stage, in each round, in its own worker process; events folded into
immutable StageResults. The CLI and the dashboard's JobManager both call `run_all`.
"""
from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from bench_core.config.bench_config import BenchConfig, resolve_device
from bench_core.levers.changes import SurgeryReport
from bench_core.levers.stage import Stage
from bench_core.machine.ceilings import Ceilings, CeilingsProcess
from bench_core.machine.conditions import Conditions
from bench_core.machine.probe import Probe
from bench_core.measure.warmup import WarmupTrace
from bench_core.models.families import estimate_memory, param_count
from bench_core.results.phase import save_costs
from bench_core.results.records import STAGE_FINISHED, RunResult, StageResult, Status, initial_stage
from bench_core.run import events as ev
from bench_core.run.memory_plan import overlap_fits
from bench_core.run.processes import (
    SpareWorkers,
    StageJob,
    WorkerHandle,
    WorkerPool,
    describe_exit,
    meaningful_stderr,
)
from bench_core.run.quiet import QuietHost, QuietWindow, pins_timed

WORKERS_AHEAD_CUDA = 8   # processes started (and models built) before the first stage's measured work
PREVIOUS_EXIT_S = 60.0    # the longest a warm-up waits for the last stage's process to exit (_reap's grace)
BUILD_AHEAD_SHARE = 0.25  # of free GPU memory that idle, pre-built workers' weights may hold
# How long the read loop blocks on a worker's line queue once nothing waits on a release: a line wakes it at once,
# so this bounds only how late a cancel or a stage's time limit is noticed, and the parent sleeps in between.
IDLE_WAIT_S = 0.5
# While a release is pending the loop also watches other processes (the next worker built, the last one exited),
# which send it no line: a short wait then. Nothing is timed yet; a late release only lengthens the warm-up.
RELEASE_WAIT_S = 0.02


class CeilingsMeasurer(Protocol):
    """Measures the GPU's GEMM and copy ceilings in its own process (machine.ceilings.CeilingsProcess)."""

    def start(self) -> None: ...

    def measure(self) -> Ceilings | None: ...

    def close(self) -> None: ...


@dataclass
class RunHooks:
    on_update: Callable[[RunResult], None] | None = None         # every change (live views)
    on_stage_done: Callable[[RunResult, StageResult], None] | None = None  # a stage's round ended (persistence)
    cancel: threading.Event = field(default_factory=threading.Event)
    worker_env: dict | None = None                                  # None: this process's environment
    worker_threads: int | None = None                               # torch CPU threads per worker; None: torch's
    timeout_s: float = 900.0
    ceilings: CeilingsMeasurer | None = None   # None: a CeilingsProcess on CUDA when the probe has no ceilings
    spares: SpareWorkers | None = None         # workers started while the probe ran; the pool adopts them
    ahead: int | None = None                   # workers started ahead; None: WORKERS_AHEAD_CUDA on CUDA, else 1
    pause_others: bool = True                  # quiet windows stop (and pin away) the run's other processes
    isolate_host: bool = False                 # also hold on_update while a window is open, sent once it closes
    quiet: threading.Event = field(default_factory=threading.Event)  # set while a quiet window is open


def new_run(cfg: BenchConfig, stages: Iterable[Stage], probe: Probe, preset: str) -> RunResult:
    device = resolve_device(cfg.device, probe.cuda_available)
    return RunResult(config=cfg, machine=probe, device=device, preset=preset,
                     stages=tuple(initial_stage(i, s, cfg.iters) for i, s in enumerate(stages)))


class StageFold:
    """Folds one worker's events into successive immutable StageResults (several rounds accumulate)."""

    def __init__(self, result: StageResult, on_update: Callable[[StageResult], None]):
        self.result = result
        self.on_update = on_update
        self.round_start = len(result.times_ms)
        self.timeline: dict[str, float] = {}   # this process's events: seconds since it started
        self.wall: dict[str, float] = {}       # the same events on the run's wall clock
        self.timelines_before = result.timelines

    def update(self, result: StageResult) -> None:
        self.result = result
        self.on_update(result)

    def apply(self, event: ev.Event) -> None:
        r = self.result
        if isinstance(event, (ev.Ready, ev.Built, ev.Started, ev.FirstStep, ev.Warmup, ev.Memory, ev.Profiled,
                              ev.Kernels, ev.Finished)):
            self.timeline[event.name] = event.t
            if event.at:
                self.wall[event.name] = event.at
            self.result = replace(r, timeline=dict(self.timeline),
                                  timelines=self.timelines_before + ((dict(self.wall),) if self.wall else ()))
        if isinstance(event, ev.Built):
            self.result = replace(self.result, params=event.params, optimizer_class=event.optimizer_class,
                                  norm_class=event.norm_class, norm_modules=dict(event.norm_modules),
                                  surgery=SurgeryReport.from_dict(event.surgery) if event.surgery else None)
        elif isinstance(event, (ev.Started, ev.FirstStep)):  # the live view's phase reads the timeline
            self.update(replace(self.result, status=Status.RUNNING))
        elif isinstance(event, ev.WarmupProgress) and not r.rounds:  # the first round's warm-up is the one kept
            self.update(replace(self.result, warmup_steps=event.steps, warmup_s=event.seconds))
        elif isinstance(event, ev.Warmup):  # every process's trace is kept, in round order
            traces = r.warmups + ((WarmupTrace.from_dict(event.trace),) if event.trace is not None else ())
            first = self.result if r.rounds else replace(self.result, warmup_s=event.seconds, warmup_steps=event.iters)
            self.update(replace(first, warmups=traces))
        elif isinstance(event, ev.Iter):
            host = (float(event.host_ms),) if event.host_ms is not None else ()
            self.update(replace(self.result, times_ms=r.times_ms + (float(event.ms),),
                                losses=r.losses + (float(event.loss),), host_ms=r.host_ms + host))
        elif isinstance(event, ev.Memory):
            self.update(replace(self.result, peak_allocated_mib=_max(r.peak_allocated_mib, event.peak_allocated_mib),
                                peak_reserved_mib=_max(r.peak_reserved_mib, event.peak_reserved_mib),
                                peak_rss_mib=_max(r.peak_rss_mib, event.peak_rss_mib),
                                rank_peak_mib=tuple(event.rank_peak_mib or ()),
                                energy_j=_sum(r.energy_j, event.energy_j),
                                skipped_steps=_sum(r.skipped_steps, event.skipped_steps),
                                conditions=_merge(r.conditions, event.conditions),
                                rounds=r.rounds + (len(r.times_ms) - self.round_start,)))
        elif isinstance(event, ev.Kernels):
            from bench_core.measure.breakdown import StageProfile
            from bench_core.measure.gemms import GemmShare
            self.update(replace(self.result, kernels=event.seen, sdpa_backend=event.sdpa_backend,
                                verdict=event.verdict, warnings=tuple(event.warnings),
                                autocast_dtype=event.autocast_dtype,
                                profile=StageProfile.from_dict(event.profile) if event.profile else None,
                                gemm_share=GemmShare.from_dict(event.gemm_share) if event.gemm_share else None))
        elif isinstance(event, ev.Unavailable):
            self.update(replace(self.result, status=Status.UNAVAILABLE, reason=event.reason))
        elif isinstance(event, ev.Error):
            status = Status.OOM if event.kind == "oom" else Status.FAILED
            self.update(replace(self.result, status=status, reason=event.message))


def _max(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _merge(kept: Conditions | None, new: dict[str, Any] | None) -> Conditions | None:
    """Another process's conditions join the stage's (machine.conditions.Conditions.merged)."""
    if new is None:
        return kept
    return Conditions.from_dict(new) if kept is None else kept.merged(Conditions.from_dict(new))


def _sum(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else a + b


def plan_jobs(run: RunResult, probe: Probe, threads: int | None = None,
              timed_cores: int | None = None) -> list[tuple[int, StageJob]]:
    """(stage index, job) for every runnable stage in every round; odd rounds run the ladder backwards."""
    runnable = [s.index for s in run.stages if s.stage.unavailable_reason(probe, run.device) is None]
    free = probe.free_bytes.get(run.device)
    singles = [i for i in runnable if run.stages[i].stage.world_size == 1]
    held = param_count(run.config) * 4 * min(len(singles) * run.config.repeats, WORKERS_AHEAD_CUDA)
    build_ahead = free is None or held < BUILD_AHEAD_SHARE * free
    if run.device == "cuda" and free is not None and estimate_memory(run.config)["total_bytes"] + held > free:
        build_ahead = False  # the measured stage must never run short because idle workers hold weights
    jobs = []
    for rnd in range(run.config.repeats):
        order = runnable if rnd % 2 == 0 else list(reversed(runnable))
        for i in order:
            jobs.append((i, StageJob(config=run.config, stage=run.stages[i].stage, device=run.device, round=rnd,
                                     profile=rnd == 0, build_ahead=build_ahead, threads=threads,
                                     timed_cores=timed_cores)))
    return jobs


def run_all(run: RunResult, probe: Probe, hooks: RunHooks | None = None) -> RunResult:
    """Every stage of a run, round after round; one stage's failure never stops the next."""
    hooks = hooks or RunHooks()
    holder = {"run": run}
    held = threading.Event()  # an update held back by a window (isolate_host), sent when it closes

    def publish(result: StageResult) -> None:
        holder["run"] = holder["run"].with_stage(result)
        if hooks.isolate_host and hooks.quiet.is_set():
            held.set()
        elif hooks.on_update:
            hooks.on_update(holder["run"])

    def window_changed(is_open: bool) -> None:
        if is_open:
            hooks.quiet.set()
            return
        hooks.quiet.clear()
        if held.is_set():
            held.clear()
            if hooks.on_update:
                hooks.on_update(holder["run"])

    for stage in run.stages:  # stages that cannot run here say so at once, and keep saying so
        reason = stage.stage.unavailable_reason(probe, run.device)
        if reason:
            publish(replace(stage, status=Status.UNAVAILABLE, reason=reason))
            if hooks.on_stage_done:
                hooks.on_stage_done(holder["run"], holder["run"].stages[stage.index])
    measurer = hooks.ceilings or (CeilingsProcess(env=hooks.worker_env)
                                  if run.device == "cuda" and probe.ceilings is None else None)
    done: list[WorkerHandle] = []   # workers whose stage is over; one may still be exiting

    def others() -> list[int]:
        ceilings = getattr(measurer, "group", None)  # a CeilingsProcess is a group of its own
        return pool.groups() + [h.proc.pid for h in done if h.alive] + ([ceilings] if ceilings else [])

    quiet = QuietHost(others, pause=hooks.pause_others, on_change=window_changed,
                      pin_timed=pins_timed(run.device))
    jobs = plan_jobs(run, probe, hooks.worker_threads, quiet.timed_core_count)
    singles = [job for _, job in jobs if job.stage.world_size == 1]
    ahead = hooks.ahead or (WORKERS_AHEAD_CUDA if run.device == "cuda" else 1)
    # No worker creates its CUDA context ahead: that is device work, done when the runner lets it build.
    pool = WorkerPool(singles, hooks.worker_env, ahead, warm_cuda=False, spares=hooks.spares)
    pool.start()
    taken = ran = 0
    previous: WorkerHandle | None = None
    after_exit = not overlap_fits(run, probe)
    try:
        for index, job in jobs:
            stage = holder["run"].stages[index]
            if hooks.cancel.is_set():
                break
            if stage.finished and stage.status != Status.OK:
                taken += job.stage.world_size == 1  # its worker, started for it, must not run the next job
                continue  # failed in an earlier round: not run again
            if job.stage.world_size == 1:
                handle = pool.take(taken)
                taken += 1
                following = pool.peek(taken)   # builds during this one's warm-up
            else:
                handle = WorkerHandle(job, hooks.worker_env, world=job.stage.world_size)
                following = None
            result = run_worker(handle, stage, hooks, publish, pool.top_up, last_round=job.round ==
                                run.config.repeats - 1, following=following, previous=previous,
                                after_exit=after_exit, quiet=quiet)
            previous = handle
            done[:] = [h for h in done if h.alive] + [handle]
            publish(result)
            if hooks.on_stage_done:
                hooks.on_stage_done(holder["run"], result)
            if measurer is not None and not ran:
                measurer.start()  # after the first stage, never before it: its import and CUDA context only
            ran += 1
    finally:
        quiet.close()  # no process is left stopped, whatever ended the loop
        pool.close()
    cancelled = hooks.cancel.is_set()
    # The ceilings are measured after the last stage, not between stages: until then the pool's idle workers hold
    # GPU memory and may still be building models, and the next stage's warm-up follows at once, so a GEMM or copy
    # there would share the GPU with them. Started after the first stage, the process's import and CUDA context
    # overlap the rest of the run; the measurement itself is a few seconds once the GPU is idle.
    try:
        if measurer is not None and ran and not cancelled:
            measured = measurer.measure()
            if measured is not None:
                holder["run"] = replace(holder["run"], machine=holder["run"].machine.with_ceilings(measured))
    finally:
        if measurer is not None:
            measurer.close()
    final = holder["run"]
    for stage in final.stages:
        if not stage.finished:  # never-run stages keep their own status; cancelled ones say so
            stage = replace(stage, status=Status.CANCELLED if cancelled else Status.FAILED,
                            reason="job cancelled" if cancelled else "did not run")
            final = final.with_stage(stage)
            if hooks.on_stage_done:
                hooks.on_stage_done(final, stage)
    final = replace(final, status=Status.CANCELLED if cancelled else Status.DONE)
    save_costs(final)   # the next estimate here counts this run's measured process and compile costs
    if hooks.on_update:
        hooks.on_update(final)
    return final


def run_worker(handle: WorkerHandle, stage: StageResult, hooks: RunHooks, publish: Callable[[StageResult], None],
               top_up: Callable[[], None], last_round: bool = True,
               following: WorkerHandle | None = None, previous: WorkerHandle | None = None,
               after_exit: bool = False, quiet: QuietHost | None = None) -> StageResult:
    """One round of one stage in `handle`'s process. The stage is `running` until its last round ends.

    `following`, the next stage's worker, is let build once this one has started its warm-up; this one's warm-up
    is released (its timed steps may begin) once `following` has built and `previous`, the last stage's worker,
    has exited (its CUDA teardown, about a second, runs after its result is in): so no other process of the run
    does device work while this one is timed or profiled. With `after_exit` (the last stage's step, this one's and
    the next worker's weights do not fit the device at once: memory_plan.overlap_fits) this one's warm-up too waits
    for `previous` to exit.

    With `quiet`, a quiet window (run.quiet) is open from the release (or `go`, for a worker that is not gated)
    to the end of the measured work (`profiled` when it profiles, else `memory`): the run's other processes are
    stopped meanwhile, and the next worker is started (`top_up`) only after the window has closed."""
    fold = StageFold(replace(stage, status=Status.RUNNING if stage.status == Status.PENDING else stage.status),
                     publish)
    lines = handle.lines
    reader = handle.reader
    released = not handle.job.gated
    started = time.monotonic()
    if stage.started_at is None:
        fold.update(replace(fold.result, started_at=time.time()))
    deadline = time.monotonic() + PREVIOUS_EXIT_S
    while after_exit and previous is not None and previous.alive and time.monotonic() < deadline:
        time.sleep(0.02)
    window: QuietWindow | None = None

    def open_window() -> QuietWindow | None:
        return quiet.open(handle.proc.pid, handle.job.round) if quiet is not None else None

    def close_window() -> None:
        nonlocal window
        record = window.close() if window is not None else None
        window = None
        if record is not None:
            fold.update(replace(fold.result, quiet=fold.result.quiet + (record,)))

    stopped: tuple[Status, str] | None = None
    finished = False
    try:
        if released:
            window = open_window()  # not gated: its timed steps may follow `go` at once
        handle.go()
        while True:
            try:
                line = lines.get(timeout=IDLE_WAIT_S if released else RELEASE_WAIT_S)
            except queue.Empty:
                line = False
            if line is None:
                break
            if line:
                event = ev.decode(line)
                if event is not None:
                    fold.apply(event)
                    if isinstance(event, ev.Profiled) or (isinstance(event, ev.Memory) and not _profiles(handle)):
                        close_window()
                        top_up()  # measured work is over, the window closed: the next process may start now
                    if isinstance(event, ev.Started) and following is not None:
                        following.build()
                    finished = finished or isinstance(event, ev.Finished)
            if not released and (following is None or following.settled.is_set()) and \
                    (previous is None or not previous.alive):
                window = open_window()
                handle.release()
                released = True
            if finished:
                break  # its result is complete: the process's exit (CUDA teardown, ~1 s) need not hold the next
            if hooks.cancel.is_set():
                stopped = (Status.CANCELLED, "cancelled by user")
            elif time.monotonic() - started > hooks.timeout_s:
                stopped = (Status.TIMEOUT, f"stage exceeded its {hooks.timeout_s:.0f} s limit")
            if stopped:
                handle.kill()
                break
    finally:
        if window is not None:  # the worker died, was stopped or failed mid-window: the others run again
            window.close()
    result = replace(fold.result, wall_s=(stage.wall_s or 0) + time.monotonic() - started, finished_at=time.time())
    if finished and not stopped and not (result.status in STAGE_FINISHED and result.status != Status.OK):
        threading.Thread(target=_reap, args=(handle, reader), daemon=True).start()
        return replace(result, status=Status.OK if last_round else Status.RUNNING)
    code = handle.proc.wait()
    reader.join(timeout=5)
    tail = meaningful_stderr(handle.stderr_text())
    handle.close()
    if stopped:
        return replace(result, status=stopped[0], reason=stopped[1])
    if result.status in STAGE_FINISHED and result.status != Status.OK:
        return result
    if not finished:
        return replace(result, status=Status.FAILED, reason=describe_exit(code) + (f": {tail}" if tail else ""))
    return replace(result, status=Status.OK if last_round else Status.RUNNING)


def _reap(handle: WorkerHandle, reader: threading.Thread, grace_s: float = 60.0) -> None:
    """Wait for a finished worker to exit in the background; one that hangs on exit is killed."""
    try:
        handle.proc.wait(timeout=grace_s)
    except Exception:
        handle.kill()
    reader.join(timeout=5)
    handle.close()


def _profiles(handle: WorkerHandle) -> bool:
    return handle.job.profile


def run_stage(cfg: BenchConfig, stage: Stage, probe: Probe, hooks: RunHooks | None = None) -> StageResult:
    """One stage as a one-stage run (tests, tools): the same loop, the same worker, the same fold."""
    return run_all(new_run(cfg, [stage], probe, "custom"), probe, hooks).stages[0]
