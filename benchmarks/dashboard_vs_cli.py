"""The dashboard's engine path (JobManager, real stage processes) against the CLI's figures.

Runs a preset through the JobManager exactly as the app does, samples snapshots every 0.5 s to check
that live progress advances, then compares each stage's median with a CLI JSON of the same config.

    python -m bench_core run --preset seed --model gpt2-small --json cli.json
    python benchmarks/dashboard_vs_cli.py --preset seed --model gpt2-small --cli-json cli.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from bench_core.config.bench_config import WORKLOADS, BenchConfig, defaults_for
from bench_core.config.settings import load_limits
from bench_core.levers.presets import preset
from bench_core.measure.stats import timing_stats
from bench_core.results.records import Status
from bench_core.results.store import Store
from bench_core.service.jobs import JobManager


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="seed")
    ap.add_argument("--model", default="gpt2-small", choices=list(WORKLOADS))
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--cli-json", help="a CLI --json result of the same config to compare with")
    args = ap.parse_args()
    db = os.path.join(tempfile.mkdtemp(), "runs.sqlite3")
    manager = JobManager(Store(db), load_limits())
    probe = manager.probe(timeout=300)
    device = "cuda" if probe is not None and probe.cuda_available else "cpu"
    cfg = BenchConfig(**WORKLOADS[args.model], warmup=args.warmup, iters=args.iters, device=device) \
        if args.model else defaults_for(device)
    start = time.perf_counter()
    job = manager.submit(cfg, preset(args.preset), args.preset, session_id="benchmark")
    samples, last_version = [], -1
    while True:
        snap = manager.snapshot(job.job_id)
        if snap.version != last_version:
            samples.append((round(time.perf_counter() - start, 2), snap.iters_done))
            last_version = snap.version
        if not snap.active:
            break
        time.sleep(0.5)
    elapsed = time.perf_counter() - start
    distinct = sorted({done for _, done in samples})
    print(f"job {snap.status} in {elapsed:.1f} s; {len(samples)} distinct snapshots sampled at 0.5 s, "
          f"iterations seen advancing through {len(distinct)} values: {distinct[:12]}...")
    deadline = time.time() + 30  # the job is marked done just before its final state is written
    while (stored := Store(db).load_run(job.job_id)).status != snap.status and time.time() < deadline:
        time.sleep(0.2)
    print(f"stored in SQLite: {sum(s.status != Status.PENDING for s in stored.stages)}/{len(stored.stages)} stages, "
          f"run status {stored.status}")
    cli = {}
    if args.cli_json:
        with open(args.cli_json) as fh:
            cli = {s["key"]: timing_stats(s["times_ms"]).median_ms for s in json.load(fh)["stages"] if s["times_ms"]}
    print(f"{'stage':<40} {'dashboard ms':>13} {'CLI ms':>9} {'ratio':>7}")
    for stage in snap.run.stages:
        med = timing_stats(stage.times_ms).median_ms
        ref = cli.get(stage.key)
        ratio = f"{med / ref:7.3f}" if med and ref else "      —"
        print(f"{stage.key:<40} {med or 0:>13.2f} {ref or 0:>9.2f} {ratio}   {stage.status} {stage.reason[:60]}")
    manager.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
