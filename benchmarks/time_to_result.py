"""Wall time of a whole preset through the CLI, process starts included, and where it goes.

    python benchmarks/time_to_result.py -- --preset seed --model gpt2-small --warmup 10 --iters 30 --json r.json
Targets on an H200: seed on gpt2-small, one process a stage, <= 40 s cold (issue 18); three processes a
stage (the CUDA default), probe cached, <= 45 s (issue 19). With --json, the breakdown is printed from the
stages' timelines: start-up (CLI start to the first stage's go), each stage from go to its end split into
warm-up, timed steps, profiled steps and trace processing, the gaps between stages, and the tail.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time


def breakdown(doc: dict, start_epoch: float, end_epoch: float) -> list[str]:
    """Where the wall time went, per stage summed over its processes (rounds): warm-up (each process's recorded
    warm-up), timed steps (their CUDA-event times), and the rest of the stage's go-to-end wall time (profiled steps
    and their analysis in round 0, hand-over to the next process)."""
    lines = []
    stages = [s for s in doc["stages"] if s.get("started_at")]
    if not stages:
        return ["no stage ran"]
    first_go = min(s["started_at"] for s in stages)
    lines.append(f"start-up (CLI start -> first stage's go): {first_go - start_epoch:.1f} s")
    totals = {"wall": 0.0, "warm-up": 0.0, "timed": 0.0}
    for s in stages:
        wall = s.get("wall_s") or 0.0
        warm = sum(w.get("seconds", 0.0) for w in s.get("warmups") or [])
        timed = sum(s.get("times_ms") or []) / 1e3
        tl = s.get("timeline") or {}
        totals["wall"] += wall
        totals["warm-up"] += warm
        totals["timed"] += timed
        lines.append(f"{s['key']}: {len(s.get('rounds') or [])} processes, {wall:.1f} s (warm-up {warm:.1f}, "
                     f"timed {timed:.1f} in {s.get('rounds')} steps, other {wall - warm - timed:.1f}); last process: "
                     f"ready {tl.get('ready')}, built {tl.get('built')}, go {tl.get('started')} s after spawn")
    last_end = max(s["finished_at"] for s in stages)
    lines.append(f"stages {totals['wall']:.1f} s: warm-up {totals['warm-up']:.1f}, timed {totals['timed']:.1f}, "
                 f"other {totals['wall'] - totals['warm-up'] - totals['timed']:.1f}")
    lines.append(f"tail (last stage end -> CLI exit): {end_epoch - last_end:.1f} s")
    return lines


def main() -> int:
    args = sys.argv[1:]
    if args and args[0] == "--":
        args = args[1:]
    start, start_epoch = time.perf_counter(), time.time()
    proc = subprocess.run([sys.executable, "-m", "bench_core", "run", "--quiet", *args])
    elapsed, end_epoch = time.perf_counter() - start, time.time()
    if "--json" in args and proc.returncode == 0:
        with open(args[args.index("--json") + 1]) as fh:
            for line in breakdown(json.load(fh), start_epoch, end_epoch):
                print("  " + line)
    print(f"time to result: {elapsed:.1f} s (exit code {proc.returncode}) for: {' '.join(args)}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
