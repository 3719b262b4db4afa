"""The executor interface: submit a run → a handle → its messages, its result, cancel.

Shaped like submitit's (submit → job → result/cancel) so a SLURM executor can sit beside the two built here:
`LocalExecutor` (this machine, the default, no Ray imported) and `cluster.ray_executor.RayExecutor`
(`cluster.address.executor_for` picks one). One `drive`
loop turns any handle's messages into the run loop's hooks, so the job manager sees the same events either way.
"""
from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from bench_core.cluster.nodes import Retry
from bench_core.machine.probe import Probe
from bench_core.results.records import STAGE_FINISHED, RunResult, Status
from bench_core.run.runner import RunHooks, run_all

POLL_S = 0.05  # how often a waiting driver looks at the cancel flag: well under one step


@dataclass(frozen=True)
class Progress:
    """The run as it stands (the run loop's on_update)."""
    run: RunResult


@dataclass(frozen=True)
class StageDone:
    """A stage's round ended (the run loop's on_stage_done): the dashboard persists it at once."""
    run: RunResult
    index: int


@dataclass(frozen=True)
class Done:
    run: RunResult


@dataclass(frozen=True)
class NodeLost:
    """The node (or its worker) died under the run: no more messages will come."""
    node: str
    detail: str


@dataclass(frozen=True)
class Crashed:
    """The run's own code raised on the node (not a lost node)."""
    detail: str


Message = Progress | StageDone | Done | NodeLost | Crashed


class RunHandle(Protocol):
    node: str

    def next_message(self, timeout: float) -> Message | None:
        """The next message; None when none came within `timeout` seconds."""

    def cancel(self) -> None: ...


class Executor(Protocol):
    name: str
    concurrent: bool   # runs on different machines at once (the job manager then runs jobs side by side)

    def submit(self, run: RunResult, probe: Probe, hooks: RunHooks) -> RunHandle: ...

    def run_all(self, run: RunResult, probe: Probe, hooks: RunHooks, retry: Retry = Retry.NEVER) -> RunResult:
        """`retry`: what the run does when its node is lost (a local run ignores it)."""

    def node_probe(self, node: str | None) -> Probe | None: ...


def finish_failed(run: RunResult, reason: str, on_stage_done: Callable | None) -> RunResult:
    """A run that ended under its stages (a lost node, a crash): the stage that was running fails with `reason`;
    finished stages stay as they are; stages that never started fail with `reason` and '(did not run)'."""
    for stage in run.stages:
        if stage.status in STAGE_FINISHED:
            continue
        started = stage.status == Status.RUNNING or bool(stage.times_ms)
        stage = replace(stage, status=Status.FAILED, reason=reason + ("" if started else " (did not run)"))
        run = run.with_stage(stage)
        if on_stage_done:
            on_stage_done(run, stage)
    return replace(run, status=Status.DONE)


def finish_cancelled(run: RunResult, on_stage_done: Callable | None) -> RunResult:
    for stage in run.stages:
        if stage.status not in STAGE_FINISHED:
            stage = replace(stage, status=Status.CANCELLED, reason="job cancelled")
            run = run.with_stage(stage)
            if on_stage_done:
                on_stage_done(run, stage)
    return replace(run, status=Status.CANCELLED)


# a lost node's run, as it stood -> the run after the loss and a handle of its rest elsewhere (cluster.retry)
Resubmit = Callable[[RunResult, str], tuple[RunResult, RunHandle] | None]


def drive(handle: RunHandle, run: RunResult, hooks: RunHooks, resubmit: Resubmit | None = None) -> RunResult:
    """Feed a handle's messages into the hooks until the run ends; pass a cancel on; a lost node or a crash ends
    the run with what had arrived (finished stages were persisted as they arrived), unless `resubmit` (a retry the
    user allowed: cluster.retry) sends the rest to another node."""
    latest, cancelled = run, False
    while True:
        if hooks.cancel.is_set() and not cancelled:
            handle.cancel()
            cancelled = True
        message = handle.next_message(POLL_S)
        if message is None:
            continue
        if isinstance(message, (Progress, StageDone, Done)):
            latest = message.run
            if hooks.on_update:
                hooks.on_update(latest)
        if isinstance(message, StageDone) and hooks.on_stage_done:
            hooks.on_stage_done(latest, latest.stages[message.index])
        if isinstance(message, Done):
            return latest
        if isinstance(message, NodeLost) and not cancelled and resubmit is not None:
            retried = resubmit(latest, message.node)
            if retried is not None:
                after, handle = retried
                for before, stage in zip(latest.stages, after.stages, strict=True):
                    if stage != before and stage.status in STAGE_FINISHED and hooks.on_stage_done:
                        hooks.on_stage_done(after, stage)  # failed there, or now named with the lost node
                latest = after
                if hooks.on_update:
                    hooks.on_update(latest)
                continue
        if isinstance(message, NodeLost | Crashed):
            if cancelled:
                final = finish_cancelled(latest, hooks.on_stage_done)
            elif isinstance(message, NodeLost):
                final = finish_failed(latest, f"node lost: {message.node}", hooks.on_stage_done)
            else:
                final = finish_failed(latest, f"the run failed on {handle.node}: {message.detail}",
                                      hooks.on_stage_done)
            if hooks.on_update:
                hooks.on_update(final)
            return final


class QueuedMessages:
    """A run handle's inbox: a thread of the handle (the local run loop, or the reader of a Ray task's stream)
    puts the run's messages here, and the driver takes them."""

    def __init__(self) -> None:
        self._messages: queue.Queue[Message] = queue.Queue()

    def next_message(self, timeout: float) -> Message | None:
        try:
            return self._messages.get(timeout=timeout)
        except queue.Empty:
            return None


class LocalRun(QueuedMessages):
    """run_all in a thread of this process: the same messages a remote run sends."""

    def __init__(self, run: RunResult, probe: Probe, hooks: RunHooks):
        super().__init__()
        self.node = os.uname().nodename
        self._cancel = threading.Event()
        own = replace(hooks, cancel=self._cancel,
                      on_update=lambda r: self._messages.put(Progress(r)),
                      on_stage_done=lambda r, s: self._messages.put(StageDone(r, s.index)))
        self._thread = threading.Thread(target=self._run, args=(run, probe, own), name="bench-local-run",
                                        daemon=True)
        self._thread.start()

    def _run(self, run: RunResult, probe: Probe, hooks: RunHooks) -> None:
        try:
            self._messages.put(Done(run_all(run, probe, hooks)))
        except Exception as exc:  # the driver records it; a thread's traceback would be lost
            self._messages.put(Crashed(f"{type(exc).__name__}: {exc}"))

    def cancel(self) -> None:
        self._cancel.set()


class LocalExecutor:
    """This machine, the default: `run_all` is the run loop itself, called in the caller's thread."""
    name = "local"
    concurrent = False

    def submit(self, run: RunResult, probe: Probe, hooks: RunHooks) -> RunHandle:
        return LocalRun(run, probe, hooks)

    def run_all(self, run: RunResult, probe: Probe, hooks: RunHooks, retry: Retry = Retry.NEVER) -> RunResult:
        return run_all(run, probe, hooks)

    def node_probe(self, node: str | None) -> Probe | None:
        return None
