"""The Ray executor: each run is one Ray task on its node, a streaming generator of the run loop's messages.

`ray` is imported here only, when a cluster address is configured; with none, nothing here is loaded. A task asks
for the GPUs its widest stage uses (`num_gpus`, so Ray sets its CUDA_VISIBLE_DEVICES and no other run shares them)
and, on a CPU node, the node's whole `machine-<name>` resource; node affinity pins it to the chosen node.
"""
from __future__ import annotations

import threading
from collections import Counter
from dataclasses import replace
from typing import Any

from bench_core.cluster import remote
from bench_core.cluster.executor import Crashed, NodeLost, QueuedMessages, RunHandle, drive
from bench_core.cluster.nodes import NAME_PREFIX, Node, Retry, from_ray
from bench_core.cluster.retry import resubmitter
from bench_core.machine.probe import Probe
from bench_core.results.records import RunResult
from bench_core.run.runner import RunHooks

# A probe task must see every GPU of its node: Ray would hide them from a task that asks for none.
PROBE_ENV = {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}


def _ray() -> Any:
    import ray
    return ray


class RayRun(QueuedMessages):
    """One run's task: a thread pulls its messages (ray.get of each streamed ref) into a queue."""

    def __init__(self, generator: Any, node: str, on_end: Any):
        super().__init__()
        self.node = node
        self._generator = generator
        self._on_end = on_end
        threading.Thread(target=self._pump, name=f"bench-ray-{node}", daemon=True).start()

    def _pump(self) -> None:
        ray = _ray()
        try:
            for ref in self._generator:
                self._messages.put(ray.get(ref))
        except ray.exceptions.RayTaskError as exc:  # our code raised on the node
            self._messages.put(Crashed(str(exc).splitlines()[-1] if str(exc) else type(exc).__name__))
        except ray.exceptions.RayError as exc:   # the node, its raylet or the task's worker died; or a cancel
            self._messages.put(NodeLost(self.node, type(exc).__name__))
        finally:
            self._on_end(self.node)

    def cancel(self) -> None:
        _ray().cancel(self._generator)  # KeyboardInterrupt in the task: it stops its worker process, then ends


class RayExecutor:
    name = "ray"
    concurrent = True

    def __init__(self, address: str, probe_timeout_s: float = 180.0):
        self.address = address
        self.probe_timeout_s = probe_timeout_s
        self._lock = threading.Lock()
        self._busy: Counter[str] = Counter()
        self._probes: dict[str, Probe] = {}       # node id -> its probe
        self._probing: dict[str, Any] = {}        # node id -> the probe task's ref

    def connect(self) -> Any:
        ray = _ray()
        with self._lock:
            if not ray.is_initialized():
                ray.init(address=self.address, namespace="bench_core", log_to_driver=False,
                         logging_level="WARNING")
        return ray

    # ---------------------------------------------------------------- nodes
    def nodes(self, wait_s: float = 0.0) -> list[Node]:
        """The cluster's nodes, their probes as far as they have come back (each node probes itself, once)."""
        ray = self.connect()
        with self._lock:
            busy = [name for name, n in self._busy.items() if n > 0]
        listed = [from_ray(entry, busy) for entry in ray.nodes()]
        for node in listed:
            if node.alive and node.node_id not in self._probes and node.node_id not in self._probing:
                self._probing[node.node_id] = self._probe_task(node)
        pending = {ref: nid for nid, ref in self._probing.items()}
        if pending:
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=wait_s)
            for ref in ready:
                node_id = pending[ref]
                try:
                    self._probes[node_id] = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    self._probes[node_id] = Probe.from_dict({"error": f"probe failed: {type(exc).__name__}"})
                del self._probing[node_id]
        return [_with_probe(n, self._probes.get(n.node_id)) for n in listed]

    def node(self, name: str) -> Node:
        for node in self.nodes():
            if node.name == name and node.alive:
                return node
        raise ValueError(f"machine: {name} is not an alive node of the cluster")

    def only_node(self) -> str:
        """The one alive node, for a run that names none; with more, the user must choose."""
        alive = sorted(n.name for n in self.nodes() if n.alive)
        if len(alive) != 1:
            raise ValueError(f"machine: the cluster has {len(alive)} alive nodes ({', '.join(alive) or 'none'}): "
                             "name the one to run on")
        return alive[0]

    def node_probe(self, node: str | None) -> Probe | None:
        if node is None:
            return None
        found = self.node(node)
        if found.probe is None:
            found = next(n for n in self.nodes(wait_s=self.probe_timeout_s) if n.node_id == found.node_id)
        return found.probe

    def _probe_task(self, node: Node) -> Any:
        ray = _ray()
        task = ray.remote(remote.node_probe).options(num_cpus=0, max_retries=0, scheduling_strategy=_pin(node),
                                                     runtime_env={"env_vars": PROBE_ENV})
        return task.remote()

    # ---------------------------------------------------------------- runs
    def submit(self, run: RunResult, probe: Probe, hooks: RunHooks) -> RunHandle:
        ray = self.connect()
        if run.node is None:
            raise ValueError("machine: a cluster run names the node it runs on")
        node = self.node(run.node)
        gpus = max((s.stage.world_size for s in run.stages), default=1) if node.gpus else 0
        whole_node = {f"{NAME_PREFIX}{node.name}": 1} if not node.gpus and _named(node, ray) else {}
        task = ray.remote(remote.stream_run).options(
            num_returns="streaming", num_cpus=0, num_gpus=gpus, resources=whole_node, max_retries=0,
            scheduling_strategy=_pin(node), name=f"bench_core run {run.run_id}")
        with self._lock:
            self._busy[node.name] += 1
        generator = task.remote(run, node.name, hooks.worker_threads, hooks.timeout_s)
        return RayRun(generator, node.name, self._ended)

    def run_all(self, run: RunResult, probe: Probe, hooks: RunHooks, retry: Retry = Retry.NEVER) -> RunResult:
        return drive(self.submit(run, probe, hooks), run, hooks,
                     resubmitter(self, probe, hooks, retry))

    def _ended(self, node: str) -> None:
        with self._lock:
            self._busy[node] -= 1


def _pin(node: Node) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    return NodeAffinitySchedulingStrategy(node_id=node.node_id, soft=False)


def _named(node: Node, ray: Any) -> bool:
    entry: dict = next((e for e in ray.nodes() if e.get("NodeID") == node.node_id), {})
    return f"{NAME_PREFIX}{node.name}" in (entry.get("Resources") or {})


def _with_probe(node: Node, probe: Probe | None) -> Node:
    return replace(node, probe=probe) if probe is not None else node
