"""The cluster's machines as the dashboard shows and picks them. Ray-free: the Ray executor fills these in.

A node is named by a custom resource `machine-<name>` given at `ray start` (`--resources '{"machine-h200": 1}'`);
a node without one is named by its host and address.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol, runtime_checkable

from bench_core.machine.probe import Probe

NAME_PREFIX = "machine-"
EVERY_GPU_TYPE = "every GPU type once"


@dataclass(frozen=True)
class Node:
    node_id: str
    name: str
    address: str
    alive: bool
    gpus: int
    accelerator: str | None = None   # Ray's accelerator_type resource, e.g. "H200"
    busy: bool = False               # one of this dashboard's runs is on it
    probe: Probe | None = None       # measured on the node itself; None until its probe task returned

    @property
    def gpu_type(self) -> str:
        """What the cross-GPU comparison groups by: the GPU's own name, else Ray's accelerator type, else CPU."""
        if self.probe is not None and self.probe.cuda.available and self.probe.cuda.name:
            return self.probe.cuda.name
        if self.gpus:
            return self.accelerator or "GPU"
        return "CPU"


def node_name(resources: Mapping[str, float], host: str, address: str) -> str:
    named = sorted(k[len(NAME_PREFIX):] for k in resources if k.startswith(NAME_PREFIX))
    return named[0] if named else f"{host} ({address})"


def accelerator_type(resources: Mapping[str, float]) -> str | None:
    kinds = [k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:")]
    return kinds[0] if kinds else None


def from_ray(entry: Mapping, busy: Iterable[str] = ()) -> Node:
    """A Node from one entry of `ray.nodes()`."""
    resources = entry.get("Resources") or {}
    address = str(entry.get("NodeManagerAddress", ""))
    name = node_name(resources, str(entry.get("NodeManagerHostname", "")), f"{address}:{entry.get('NodeManagerPort')}")
    return Node(node_id=str(entry.get("NodeID", "")), name=name, address=address, alive=bool(entry.get("Alive")),
                gpus=int(resources.get("GPU", 0)), accelerator=accelerator_type(resources), busy=name in set(busy))


def pick(nodes: Sequence[Node], choice: Sequence[str]) -> list[str]:
    """The machines a run goes to: those named, or one alive node of every GPU type (a free one first)."""
    alive = [n for n in nodes if n.alive]
    if EVERY_GPU_TYPE in choice:
        chosen: dict[str, Node] = {}
        for node in sorted(alive, key=lambda n: (n.busy, n.name)):
            chosen.setdefault(node.gpu_type, node)
        return [n.name for n in chosen.values()]
    known = {n.name for n in alive}
    missing = [c for c in choice if c not in known]
    if missing:
        raise ValueError(f"machine: {', '.join(missing)} is not an alive node of the cluster")
    return list(dict.fromkeys(choice))


class Retry(Enum):
    """What a run does when its node is lost mid-run."""
    NEVER = "never"          # the rest reads 'node lost: <node> (did not run)'
    SAME_GPU = "same-gpu"    # the rest runs on another alive node of the lost node's GPU type
    ANY = "any"              # ... on any other alive node

    @property
    def label(self) -> str:
        return {Retry.NEVER: "no retry", Retry.SAME_GPU: "another machine of the same GPU type",
                Retry.ANY: "any other machine"}[self]


def fallback(nodes: Sequence[Node], lost: Sequence[str], gpu_type: str, retry: Retry) -> Node | None:
    """Another alive node (of `gpu_type` unless any will do), never one lost: a free one first, then by name."""
    if retry is Retry.NEVER:
        return None
    fits = [n for n in nodes if n.alive and n.name not in lost and (retry is Retry.ANY or n.gpu_type == gpu_type)]
    return min(fits, key=lambda n: (n.busy, n.name), default=None)


@runtime_checkable
class NodeLister(Protocol):
    """An executor that has machines to choose from (the Ray executor; a SLURM one would list partitions)."""

    def nodes(self, wait_s: float = 0.0) -> list[Node]: ...
