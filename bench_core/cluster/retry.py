"""A lost node's run goes on elsewhere, where the user allowed it: the stages not yet measured run on another node.

Each stage's rounds stay on one machine (its interval is across processes of one GPU): the stage being measured
when the node died fails 'node lost: <node>'; stages that had not begun, or sat between rounds, start afresh on
the other node. Every stage of a run that spanned nodes names the node that ran it (`StageResult.node`).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from bench_core.cluster.executor import Done, Message, Progress, Resubmit, RunHandle, StageDone
from bench_core.cluster.nodes import Node, Retry, fallback
from bench_core.machine.probe import Probe
from bench_core.results.records import RunResult, StageResult, Status, initial_stage
from bench_core.run.runner import RunHooks


class Submitter(Protocol):
    """An executor with machines: the Ray executor (the tests' fake one)."""

    def submit(self, run: RunResult, probe: Probe, hooks: RunHooks) -> RunHandle: ...

    def nodes(self, wait_s: float = 0.0) -> list[Node]: ...


def in_flight(stage: StageResult) -> bool:
    """Being measured when the node died: its first round had begun, or a later round has timed steps."""
    return stage.status == Status.RUNNING and (not stage.rounds or len(stage.times_ms) > sum(stage.rounds))


def after_loss(run: RunResult, lost: str) -> tuple[RunResult, list[int]]:
    """The run once `lost` is gone: the stage in flight fails, the unfinished rest is pending again (their indexes
    returned); every stage the lost node finished or failed is named with it."""
    rest = []
    for stage in run.stages:
        if in_flight(stage):
            stage = replace(stage, status=Status.FAILED, reason=f"node lost: {lost}", node=stage.node or lost)
        elif not stage.finished:
            stage = initial_stage(stage.index, stage.stage, stage.iters_total)
            rest.append(stage.index)
        else:
            stage = replace(stage, node=stage.node or lost)
        run = run.with_stage(stage)
    return run, rest


class Resumed:
    """The rest of a run on another node: its messages with each stage back in its place in the whole run."""

    def __init__(self, handle: RunHandle, whole: RunResult, indexes: Sequence[int]):
        self.node = handle.node
        self._handle, self._whole, self._indexes = handle, whole, list(indexes)

    def _merge(self, part: RunResult) -> RunResult:
        run = replace(self._whole, status=part.status)
        for stage in part.stages:
            ran = stage.status != Status.PENDING
            run = run.with_stage(replace(stage, index=self._indexes[stage.index], node=self.node if ran else None))
        self._whole = run
        return run

    def next_message(self, timeout: float) -> Message | None:
        message = self._handle.next_message(timeout)
        if isinstance(message, StageDone):
            return StageDone(self._merge(message.run), self._indexes[message.index])
        if isinstance(message, Progress | Done):
            return type(message)(self._merge(message.run))
        return message

    def cancel(self) -> None:
        self._handle.cancel()


def resubmitter(executor: Submitter, probe: Probe, hooks: RunHooks, retry: Retry) -> Resubmit | None:
    """For `drive`: given the run as it stood when a node was lost, the run after the loss and the handle of its
    rest on another node; None (the rest then reads 'did not run') when no retry is allowed or no node fits."""
    if retry is Retry.NEVER:
        return None
    lost_nodes: list[str] = []

    def resubmit(run: RunResult, lost: str) -> tuple[RunResult, RunHandle] | None:
        lost_nodes.append(lost)
        nodes = executor.nodes()
        gpu_type = next((n.gpu_type for n in nodes if n.name == lost), run.gpu)
        after, rest = after_loss(run, lost)
        target = fallback(nodes, lost_nodes, gpu_type, retry) if rest else None
        if target is None:
            return None
        part = replace(run, node=target.name, status=Status.RUNNING,
                       stages=tuple(replace(after.stages[i], index=j) for j, i in enumerate(rest)))
        try:
            handle = executor.submit(part, probe, hooks)
        except ValueError:   # the node went too, between the listing and the submit
            return None
        return after, Resumed(handle, after, rest)

    return resubmit
