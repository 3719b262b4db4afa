"""A thread-safe job manager: one FIFO queue, one worker thread, stages never two at a time.

Streamlit-free. Readers get immutable snapshots; the worker thread replaces them as events arrive.
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TypeVar

from bench_core.cluster.executor import Executor
from bench_core.cluster.nodes import Retry
from bench_core.config.bench_config import BenchConfig
from bench_core.config.environment import child_env
from bench_core.config.settings import Limits, allowed_model_dirs
from bench_core.levers.presets import family_errors
from bench_core.levers.registry import KERNEL_PACKAGES
from bench_core.levers.stage import Stage
from bench_core.machine.probe import Probe, run_probe
from bench_core.models.families import collect_errors, parts_family
from bench_core.results.eta import eta
from bench_core.results.formats import ImportRejected, incomplete_note, parse_upload
from bench_core.results.records import RUN_ACTIVE, RunResult, Status
from bench_core.results.store import Store
from bench_core.run.runner import RunHooks, new_run, run_all
from bench_core.service.access import OPERATOR
from bench_core.service.sources import server_source_errors

RunAll = Callable[[RunResult, Probe, RunHooks], RunResult]


def _disk_full(path: str) -> str:
    """SQLite reports a full disk as a plain 'disk I/O error': say what it is when the filesystem is full."""
    try:
        stat = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return ""
    full = stat.f_bavail * stat.f_frsize < 64 * 1024
    return " — No space left on device: the disk holding it is full" if full else ""


def cpu_threads_for_server() -> int:
    return max(1, (os.cpu_count() or 2) - 1)


StoreT = TypeVar("StoreT")


class LimitExceeded(ValueError):
    def __init__(self, limit: str, message: str):
        self.limit = limit
        super().__init__(message)


class NotAllowed(PermissionError):
    pass


def check_import(role: str, store: StoreT | None, data: bytes, limits: Limits) -> StoreT:
    """The history a saved sweep's or recommendation's JSON goes into, when it may be imported: by an operator,
    into a history, within the upload limit; else the refusal that says which."""
    if role != OPERATOR:
        raise NotAllowed("only an operator may import")
    if store is None:
        raise LimitExceeded("store", "this server keeps no history")
    if len(data) > limits.max_upload_mib * 2 ** 20:
        raise ImportRejected(f"the file is larger than {limits.max_upload_mib} MiB")
    return store


@dataclass(frozen=True)
class JobSnapshot:
    job_id: str
    session_id: str
    status: Status                # queued | running | done | cancelled | interrupted
    run: RunResult
    submitted_at: float
    started_at: float | None = None
    finished_at: float | None = None
    position: int | None = None   # 0 = next in the queue
    version: int = 0

    @property
    def active(self) -> bool:
        return self.status in RUN_ACTIVE

    @property
    def iters_done(self) -> int:
        return sum(len(s.times_ms) for s in self.run.stages)

    @property
    def iters_total(self) -> int:
        return sum(s.iters_total for s in self.run.stages)

    def eta_s(self) -> float | None:
        """Time left while the job runs (results/eta computes it); None when unknown or not running."""
        if not self.active or self.started_at is None:
            return None
        return eta(self.run).seconds


class _Job:
    def __init__(self, snapshot: JobSnapshot, threads: int | None, retry: Retry = Retry.NEVER):
        self.snapshot = snapshot
        self.threads = threads
        self.retry = retry
        self.cancel = threading.Event()


class JobManager:
    def __init__(self, store: Store | None, limits: Limits, probe: Probe | None = None, env: dict | None = None,
                 runner: RunAll = run_all, probe_runner: Callable[..., Probe] | None = None,
                 executor: Executor | None = None, isolate_host: bool = False):
        self.store, self.limits, self.env = store, limits, env
        # isolate_host: a job's live updates are held while a stage is timed (RunHooks.isolate_host), so the
        # pages' refreshes find nothing new to draw then; `quiet` is set while such a window is open
        self.isolate_host = isolate_host
        self.quiet = threading.Event()
        self.executor = executor  # None: this machine; a cluster's runs each go to the node they name
        self._run_all = runner  # without an executor; with one, its run_all (and the job's retry)
        self._probe_runner = probe_runner or partial(run_probe, packages=KERNEL_PACKAGES)
        self._lock = threading.RLock()
        self._wake = threading.Condition(self._lock)
        self._jobs: dict[str, _Job] = {}
        self._order: list[str] = []
        self._queue: deque[str] = deque()
        self._stop = False
        self._probe = probe
        self._reprobe = probe is None  # a given probe (tests, CLI) is kept; a measured one is refreshed
        self._probe_ready = threading.Event()
        self._device = threading.Lock()  # one measurement on the device at a time: jobs and component views
        self.persistence_error: str | None = None
        self._unsaved: list[tuple[str, tuple]] = []
        self._persist_lock = threading.Lock()
        self._persist("mark_interrupted")  # a run left unfinished by a crash or restart is 'interrupted'
        if probe is None:
            threading.Thread(target=self._refresh_probe, name="bench-probe", daemon=True).start()
        else:
            self._probe_ready.set()
        self._thread = threading.Thread(target=self._loop, name="bench-jobs", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- probe
    def _refresh_probe(self, measure_again: bool = False) -> None:
        probe = self._probe_runner(measure_again) if measure_again else self._probe_runner()
        with self._lock:
            self._probe = probe
        self._probe_ready.set()

    def reprobe(self, role: str = "operator") -> None:
        """Measure again in the background (after installing Apex, say); the old probe serves meanwhile."""
        if role != "operator":
            raise NotAllowed("only an operator may probe the machine again")
        threading.Thread(target=self._refresh_probe, args=(True,), name="bench-probe", daemon=True).start()

    def import_file(self, name: str, data: bytes, role: str = "operator") -> str:
        """Import runs from a CSV/JSON file into the history; a message saying what happened.

        Raises NotAllowed for viewers, ImportRejected for a bad file (nothing is imported then)."""
        if role != "operator":
            raise NotAllowed("only an operator may import runs")
        if self.store is None:
            raise ImportRejected("this server keeps no history")
        from bench_core.components.rows import is_components_json, parse_report
        if is_components_json(data):  # a components report: into the Components page's history
            report = parse_report(name, data, self.limits.max_upload_mib * 2**20)
            return f"Imported components report {self.store.save_components(report.to_dict())} from {name}."
        runs = parse_upload(name, data, max_bytes=self.limits.max_upload_mib * 2**20)
        notes = []
        for run in runs:
            new_id, renamed = self.store.import_run(run)
            incomplete = incomplete_note(run)
            notes.append((f"a duplicate: run {run.run_id} already exists here, so it was imported again as run {new_id}"
                          if renamed else f"run {new_id}") + (f" ({incomplete})" if incomplete else ""))
        return f"Imported {len(runs)} run(s) from {name}: " + "; ".join(notes) + "."

    def run_components(self, model: str, role: str = "operator", timeout_s: float = 600) -> str:
        """Measure the components view in a fresh process, never beside a running job; store it; its id."""
        if role != "operator":
            raise NotAllowed("only an operator may measure")
        if self.store is None:
            raise LimitExceeded("store", "this server keeps no history")
        if not self._device.acquire(timeout=1):
            raise LimitExceeded("device", "a run is using the device: measure the components when it is over")
        try:
            cmd = [sys.executable, "-m", "bench_core.components.cli", "--model", model, "--json", "-", "--no-db"]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,  # noqa: S603
                                  env=child_env(self.env))
        finally:
            self._device.release()
        if proc.returncode != 0:
            raise LimitExceeded("components", (proc.stderr.strip().splitlines() or ["failed"])[-1])
        return self.store.save_components(json.loads(proc.stdout))

    @property
    def device(self) -> threading.Lock:
        """Held by whatever measures on the device (a job, the components view, a sweep): one at a time."""
        return self._device

    def probe(self, timeout: float | None = 0) -> Probe | None:
        """The latest probe; None while the first one is still running (after waiting `timeout` s)."""
        self._probe_ready.wait(timeout)
        with self._lock:
            return self._probe

    # ---------------------------------------------------------------- persistence that is never silent
    def _persist(self, method: str, *args):
        """Write through the store; on failure keep the write, say so, and replay it before the next one."""
        if self.store is None:
            return None
        with self._persist_lock:
            self._unsaved.append((method, args))
            try:
                result = None
                while self._unsaved:
                    pending_method, pending_args = self._unsaved[0]
                    result = getattr(self.store, pending_method)(*pending_args)
                    self._unsaved.pop(0)
                self.persistence_error = None
                return result
            except (sqlite3.Error, OSError) as exc:
                self.persistence_error = (f"{len(self._unsaved)} write(s) kept in memory, NOT saved to "
                                          f"{self.store.path}: {type(exc).__name__}: {exc}"
                                          f"{_disk_full(self.store.path)}")
                return None

    # ---------------------------------------------------------------- API
    def submit(self, cfg: BenchConfig, stages: Sequence[Stage], preset: str, session_id: str,
               role: str = "operator", machine: str | None = None, retry: Retry = Retry.NEVER) -> JobSnapshot:
        """`machine`: the cluster node to run on (with a cluster executor); None: this machine. `retry`: where the
        rest of the run goes if that node is lost mid-run."""
        if role != "operator":
            raise NotAllowed("only an operator may start a run" + (" on the cluster" if machine else ""))
        stages = list(stages)
        if not stages:
            raise LimitExceeded("stages", "pick at least one stage")
        if len(stages) > self.limits.max_stages_per_job:
            raise LimitExceeded("max_stages_per_job", f"{len(stages)} stages exceed the limit of "
                                f"{self.limits.max_stages_per_job} stages per job")
        node_probe = self.executor.node_probe(machine) if self.executor is not None and machine else None
        probe = node_probe or self.probe(timeout=180) or Probe.from_dict({})
        errors = server_source_errors(cfg, allowed_model_dirs()) or \
            collect_errors(cfg, self.limits, probe.cuda_available, probe.free_bytes) or \
            family_errors(stages, parts_family(cfg))
        if errors:
            raise errors[0]
        with self._lock:
            if len(self._queue) >= self.limits.max_queue_length:
                raise LimitExceeded("max_queue_length", f"the queue is full ({self.limits.max_queue_length} "
                                    "jobs waiting); try again when one has finished")
            mine = [j for j in self._jobs.values() if j.snapshot.session_id == session_id and j.snapshot.active]
            if len(mine) >= self.limits.max_jobs_per_session:
                raise LimitExceeded("max_jobs_per_session", f"you already have {len(mine)} jobs queued or "
                                    f"running (limit {self.limits.max_jobs_per_session} per session)")
            run = replace(new_run(cfg, stages, probe, preset), status=Status.QUEUED, node=machine)
            # leave the server a core, or every viewer waits on the benchmark (a cluster node hosts no server)
            threads = cpu_threads_for_server() if run.device == "cpu" and machine is None else None
            job_id = run.run_id
            job = _Job(JobSnapshot(job_id, session_id, Status.QUEUED, run, time.time()), threads, retry)
            self._jobs[job_id] = job
            self._order.append(job_id)
            self._queue.append(job_id)
            self._persist("save_run", run)
            self._wake.notify_all()
            return self._snapshot(job_id)

    def cancel(self, job_id: str, role: str = "operator") -> JobSnapshot:
        if role != "operator":
            raise NotAllowed("only an operator may cancel a run")
        with self._lock:
            job = self._jobs[job_id]
            job.cancel.set()
            if job.snapshot.status == Status.QUEUED:
                self._queue.remove(job_id)
                self._finish_cancelled(job)
            return self._snapshot(job_id)

    def snapshot(self, job_id: str) -> JobSnapshot | None:
        with self._lock:
            return self._snapshot(job_id) if job_id in self._jobs else None

    def jobs(self) -> list[JobSnapshot]:
        """Every job of this server process, newest first."""
        with self._lock:
            return [self._snapshot(j) for j in reversed(self._order)]

    def active(self) -> JobSnapshot | None:
        with self._lock:
            return next((self._snapshot(j) for j in self._order
                         if self._jobs[j].snapshot.status == Status.RUNNING), None)

    def queued(self) -> list[JobSnapshot]:
        with self._lock:
            return [self._snapshot(j) for j in self._queue]

    def shutdown(self, timeout: float = 10) -> None:
        with self._lock:
            self._stop = True
            for job in self._jobs.values():
                job.cancel.set()
            self._wake.notify_all()
        self._thread.join(timeout)

    # ---------------------------------------------------------------- worker thread
    def _snapshot(self, job_id: str) -> JobSnapshot:
        snap = self._jobs[job_id].snapshot
        position = self._queue.index(job_id) if job_id in self._queue else None
        return snap if snap.position == position else replace(snap, position=position)

    def _set(self, job: _Job, **changes) -> None:
        with self._lock:
            job.snapshot = replace(job.snapshot, version=job.snapshot.version + 1, **changes)

    def _finish_cancelled(self, job: _Job) -> None:
        """A job cancelled before it started: stages that could never run here keep `unavailable`."""
        run = job.snapshot.run
        probe = self.probe(timeout=0) or run.machine
        for stage in run.stages:
            if not stage.finished:
                reason = stage.stage.unavailable_reason(probe, run.device)
                run = run.with_stage(replace(stage, status=Status.UNAVAILABLE, reason=reason) if reason else
                                     replace(stage, status=Status.CANCELLED, reason="job cancelled"))
        run = replace(run, status=Status.CANCELLED)
        self._set(job, status=Status.CANCELLED, run=run, finished_at=time.time())
        self._persist("save_run", run)

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._stop:
                    self._wake.wait()
                if self._stop:
                    return
                job = self._jobs[self._queue.popleft()]
                self._set(job, status=Status.RUNNING, started_at=time.time(),
                          run=replace(job.snapshot.run, status=Status.RUNNING))
            self._persist("save_run", job.snapshot.run)
            if self.executor is not None and self.executor.concurrent:  # each on its own node: side by side
                threading.Thread(target=self._run_job, args=(job,), name="bench-job", daemon=True).start()
                continue
            with self._device:
                self._run_job(job)

    def _run_job(self, job: _Job) -> None:
        probe = self.probe(timeout=180) or Probe.from_dict({})
        env = dict(self.env or os.environ)

        def on_update(run: RunResult) -> None:
            self._set(job, run=run)

        hooks = RunHooks(on_update=on_update, on_stage_done=lambda run, stage: self._persist("save_stage", run, stage),
                         cancel=job.cancel, worker_env=env, worker_threads=job.threads,
                         timeout_s=self.limits.stage_timeout_s, isolate_host=self.isolate_host, quiet=self.quiet)
        final = self.executor.run_all(job.snapshot.run, probe, hooks, job.retry) if self.executor is not None \
            else self._run_all(job.snapshot.run, probe, hooks)
        self._set(job, status=final.status, run=final, finished_at=time.time())
        self._persist("save_run", final)
        if self._reprobe:
            self._refresh_probe()  # free GPU memory changes between jobs
