"""A two-node Ray cluster on this one machine, for tests/cluster and benchmarks/cluster_overhead.py.

Each node is its own `ray start --block` process (the head, then a second node joining it) with one CPU, no
dashboard, its own ports and a `machine-<name>` resource that names it. `stop` kills exactly the process trees
it started (never `ray stop`, which would stop every Ray of this user on the machine).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
ROOT = Path(__file__).resolve().parents[1]
# A lost node is noticed in about a second, not Ray's default half a minute.
FAST_FAILURE = {"RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "3",
                "RAY_health_check_initial_delay_ms": "0", "RAY_USAGE_STATS_ENABLED": "0",
                # two busy cores start a node's agent slowly: wait for it rather than give the node up
                "RAY_agent_register_timeout_ms": "180000", "RAY_raylet_start_wait_time_s": "180"}


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def worker_port_ranges(nodes: int, seed: int) -> list[int]:
    """Each node's own 100 worker ports, all below the kernel's ephemeral range, where free_ports' picks (and so
    every other port a node is given) land: a worker range overlapping one of them stops the node from starting."""
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    slots = max(nodes, (ephemeral_low - 20000) // 100)
    return [20000 + ((seed + i) % slots) * 100 for i in range(nodes)]


def descendants(pid: int) -> list[int]:
    """pid and every process below it, from /proc (Ray's workers start their own sessions, not their groups)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def kill_tree(pid: int) -> None:
    for member in descendants(pid):
        try:
            os.kill(member, signal.SIGKILL)
        except ProcessLookupError:
            pass


class LocalCluster:
    def __init__(self, names: tuple[str, ...] = ("bench-a", "bench-b"), cpus: int = 1):
        self.names, self.cpus = names, cpus
        self.temp = tempfile.mkdtemp(prefix="bench-ray-", dir="/tmp")  # Ray's socket paths must stay short
        self.port = free_ports(1)[0]
        self._worker_ranges = worker_port_ranges(len(names), self.port)
        self.address = f"127.0.0.1:{self.port}"
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = {**os.environ, **FAST_FAILURE,
                    "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}

    def _start(self, name: str, head: bool) -> None:
        ports = free_ports(7)
        worker_low = self._worker_ranges[len(self.procs)]
        cmd = [RAY, "start", "--block", "--num-cpus", str(self.cpus), "--num-gpus", "0", "--temp-dir", self.temp,
               "--resources", json.dumps({f"machine-{name}": 1}), "--disable-usage-stats",
               "--node-manager-port", str(ports[0]), "--object-manager-port", str(ports[1]),
               "--min-worker-port", str(worker_low), "--max-worker-port", str(worker_low + 99),
               "--object-store-memory", str(200 * 2**20),
               "--dashboard-agent-listen-port", str(ports[3]), "--dashboard-agent-grpc-port", str(ports[4]),
               "--runtime-env-agent-port", str(ports[5]), "--metrics-export-port", str(ports[6]),
               "--include-log-monitor=false"]
        # no dashboard, autoscaler monitor or log monitor: fewer processes for two cores to start
        cmd += (["--head", "--port", str(self.port), "--include-dashboard=false", "--no-monitor",
                 "--ray-client-server-port", str(ports[2])] if head else ["--address", self.address])
        log = open(os.path.join(self.temp, f"{name}.log"), "w")  # noqa: SIM115 (kept open for the node's life)
        self.procs[name] = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT,  # noqa: S603
                                            start_new_session=True)

    def start(self, timeout_s: float = 240.0) -> LocalCluster:
        """The head, then the other nodes; each is up once `ray start` says its runtime started (a joining node
        says so only after it registered with the head)."""
        self._start(self.names[0], head=True)
        self._wait(lambda: self._started(self.names[0]), timeout_s, "the head")
        for name in self.names[1:]:
            self._start(name, head=False)
        self._wait(lambda: all(self._started(n) for n in self.names[1:]), timeout_s, "every node")
        return self

    def _started(self, name: str) -> bool:
        if self.procs[name].poll() is not None:
            raise RuntimeError(f"ray node {name} exited: {self.log(name)[-2000:]}")
        return "Ray runtime started" in self.log(name)

    @staticmethod
    def _wait(predicate, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.5)
        raise TimeoutError(f"{what} of the Ray cluster did not come up in {timeout_s:.0f} s")

    def log(self, name: str) -> str:
        try:
            return Path(self.temp, f"{name}.log").read_text()
        except OSError:
            return ""

    def kill_node(self, name: str) -> None:
        """The node dies at once: its raylet, its Ray workers and their stage workers, all with SIGKILL."""
        kill_tree(self.procs[name].pid)
        self.procs[name].wait(timeout=30)

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            kill_tree(self.procs[name].pid)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
