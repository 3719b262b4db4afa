"""Wall time of a whole preset through the CLI, process starts included, and where it goes.

    python benchmarks/time_to_result.py -- --preset seed --model gpt2-small --warmup 10 --iters 30 --json r.json
Target: seed on gpt2-small (10 + 30) <= 40 s on an H200. With --json, the breakdown is printed from the
stages' timelines: start-up (CLI start to the first stage's go), each stage from go to its end split into
warm-up, timed steps, profiled steps and trace processing, the gaps between stages, and the tail.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time


def breakdown(doc: dict, start_epoch: float, end_epoch: float) -> list[str]:
    lines = []
    stages = [s for s in doc["stages"] if s.get("started_at")]
    if not stages:
        return ["no stage ran"]
    lines.append(f"start-up (CLI start -> first stage's go): {stages[0]['started_at'] - start_epoch:.1f} s")
    prev_end = None
    for s in stages:
        tl = s.get("timeline") or {}
        go = tl.get("started")
        parts = []
        for name, a, b in (("warm-up", "started", "warmup"), ("timed", "warmup", "memory"),
                           ("profiled", "memory", "profiled"), ("trace", "profiled", "kernels")):
            if tl.get(a) is not None and tl.get(b) is not None:
                parts.append(f"{name} {tl[b] - tl[a]:.1f}")
        ahead = f"ready {tl.get('ready')}, built {tl.get('built')}, go {go} s after spawn"
        gap = f"gap {s['started_at'] - prev_end:.1f} s, " if prev_end else ""
        lines.append(f"{s['key']}: {gap}{s['finished_at'] - s['started_at']:.1f} s ({', '.join(parts)}); {ahead}")
        prev_end = s["finished_at"]
    lines.append(f"tail (last stage end -> CLI exit): {end_epoch - prev_end:.1f} s")
    return lines


def main() -> int:
    args = sys.argv[1:]
    if args and args[0] == "--":
        args = args[1:]
    start, start_epoch = time.perf_counter(), time.time()
    proc = subprocess.run([sys.executable, "-m", "bench_core", "run", "--quiet", *args])
    elapsed, end_epoch = time.perf_counter() - start, time.time()
    if "--json" in args:
        with open(args[args.index("--json") + 1]) as fh:
            for line in breakdown(json.load(fh), start_epoch, end_epoch):
                print("  " + line)
    print(f"time to result: {elapsed:.1f} s (exit code {proc.returncode}) for: {' '.join(args)}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
