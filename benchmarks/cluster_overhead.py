"""Cluster overhead: the same tiny native ladder through the job manager, once locally and once through a
two-node Ray cluster started on this machine (benchmarks/_ray_cluster.py), one run each; prints both wall times
and their ratio. Target: cluster ≤ 1.2 × local.

    python benchmarks/cluster_overhead.py
The cluster's start-up is not counted; its first task's worker start is (a dashboard pays it once per node).
"""
from __future__ import annotations

import os
import sys
import tempfile
import time

import _ray_cluster  # beside this script: Python puts a script's own folder first on sys.path

from bench_core.cluster.ray_executor import RayExecutor
from bench_core.config.bench_config import BenchConfig
from bench_core.config.settings import Limits
from bench_core.levers.presets import preset
from bench_core.results.records import Status
from bench_core.results.store import Store
from bench_core.service.jobs import JobManager

CFG = BenchConfig(depth=2, width=64, heads=4, seq_len=32, batch_size=2, vocab_size=256, warmup=1, iters=200,
                  device="cpu")


def timed(manager: JobManager, machine: str | None) -> float:
    started = time.monotonic()
    job = manager.submit(CFG, preset("native"), "native", "bench", machine=machine)
    while manager.snapshot(job.job_id).active:
        time.sleep(0.01)
    final = manager.snapshot(job.job_id).run
    bad = [(s.key, s.status.value, s.reason) for s in final.stages if s.status not in (Status.OK, Status.UNAVAILABLE)]
    if bad:
        raise SystemExit(f"stages did not run: {bad}")
    return time.monotonic() - started


def main() -> int:
    store = Store(os.path.join(tempfile.mkdtemp(), "runs.sqlite3"))
    local_manager = JobManager(store, Limits())
    probe = local_manager.probe(timeout=180)
    local_s = timed(local_manager, None)
    local_manager.shutdown()
    cluster = _ray_cluster.LocalCluster(("bench-a", "bench-b"))
    try:
        cluster.start()
        executor = RayExecutor(cluster.address)
        executor.nodes(wait_s=180)  # each node's probe, as the Machines page has it before a run is submitted
        manager = JobManager(store, Limits(), probe=probe, executor=executor)
        cluster_s = timed(manager, "bench-b")
        manager.shutdown()
    finally:
        import ray
        ray.shutdown()
        cluster.stop()
    print(f"native ladder, tiny model ({CFG.iters} iters cap), CPU, one run each")
    print(f"local:   {local_s:.2f} s")
    print(f"cluster: {cluster_s:.2f} s (node bench-b of a two-node Ray cluster on this machine)")
    print(f"ratio:   {cluster_s / local_s:.2f}x (target <= 1.2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
