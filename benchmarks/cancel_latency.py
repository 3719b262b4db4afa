"""Cancel latency: from cancel() to the stage marked cancelled, its worker process gone.

    python benchmarks/cancel_latency.py --repeats 5
Target: within one iteration plus the process teardown.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from bench_core.config.bench_config import BenchConfig
from bench_core.config.settings import Limits
from bench_core.levers.stage import Stage
from bench_core.measure.stats import timing_stats
from bench_core.results.store import Store
from bench_core.service.jobs import JobManager


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    cfg = BenchConfig(depth=4, width=384, heads=6, seq_len=256, batch_size=8, vocab_size=4096, warmup=2,
                      iters=2000, device="cpu")
    manager = JobManager(Store(os.path.join(tempfile.mkdtemp(), "r.sqlite3")), Limits())
    manager.probe(timeout=120)
    latencies, steps = [], []
    for _ in range(args.repeats):
        job = manager.submit(cfg, [Stage(), Stage("adam-fused")], "custom", "bench")
        while len(manager.snapshot(job.job_id).run.stages[0].times_ms) < 5:
            time.sleep(0.02)
        start = time.perf_counter()
        manager.cancel(job.job_id)
        while manager.snapshot(job.job_id).active:
            time.sleep(0.005)
        latencies.append(time.perf_counter() - start)
        steps.append(timing_stats(manager.snapshot(job.job_id).run.stages[0].times_ms).median_ms / 1e3)
    manager.shutdown()
    print(f"cancel -> job cancelled, worker killed and reaped: median {statistics.median(latencies) * 1e3:.0f} ms, "
          f"max {max(latencies) * 1e3:.0f} ms (one iteration here: {statistics.median(steps) * 1e3:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
