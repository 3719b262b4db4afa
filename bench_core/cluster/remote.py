"""The node's side of a cluster run, Ray-free: the run loop on this node, its hooks turned into messages.

`stream_run` is the body of the Ray task (a streaming generator): it runs `run_all` with this node's own probe, in
a thread, and yields the run as it stands at most every `interval_s`, every finished stage at once, then Done.
A cancel (Ray raises KeyboardInterrupt into the generator) sets the run loop's cancel flag, which kills the stage's
worker process at its next poll, and waits for the loop to end before it lets the task go.
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import replace

from bench_core.cluster.executor import Crashed, Done, Message, Progress, StageDone
from bench_core.config.bench_config import resolve_device
from bench_core.levers.registry import KERNEL_PACKAGES
from bench_core.machine.probe import Probe, cached_probe
from bench_core.results.records import RunResult
from bench_core.run.runner import RunHooks, run_all

CANCEL_GRACE_S = 30.0


def node_probe() -> Probe:
    """This node's probe (cached per machine and environment, as on the dashboard's own machine)."""
    return cached_probe(packages=KERNEL_PACKAGES)[0]


def on_node(run: RunResult, probe: Probe, node: str) -> RunResult:
    """The run as this node runs it: its probe, its device, its name."""
    return replace(run, machine=probe, device=resolve_device(run.config.device, probe.cuda_available), node=node)


def stream_run(run: RunResult, node: str, worker_threads: int | None, timeout_s: float,
               interval_s: float = 0.25, probe: Probe | None = None) -> Iterator[Message]:
    probe = probe or node_probe()
    run = on_node(run, probe, node)
    out: queue.Queue[Message] = queue.Queue()
    latest: dict[str, RunResult] = {}
    cancel = threading.Event()
    hooks = RunHooks(on_update=lambda r: latest.__setitem__("run", r),
                     on_stage_done=lambda r, s: out.put(StageDone(r, s.index)),
                     cancel=cancel, worker_threads=worker_threads, timeout_s=timeout_s)

    def body() -> None:
        try:
            out.put(Done(run_all(run, probe, hooks)))
        except Exception as exc:  # sent as a message: the driver records it against the run
            out.put(Crashed(f"{type(exc).__name__}: {exc}"))

    thread = threading.Thread(target=body, name="bench-node-run", daemon=True)
    thread.start()
    yield Progress(run)
    try:
        while True:
            try:
                message: Message | None = out.get(timeout=interval_s)
            except queue.Empty:
                message = None
            current = latest.pop("run", None)
            if message is not None:
                yield message
                if isinstance(message, Done | Crashed):
                    return
            if current is not None:
                yield Progress(current)
    except BaseException:  # ray.cancel, or the driver went away: stop the stage's worker, then let go
        cancel.set()
        thread.join(CANCEL_GRACE_S)
        raise
