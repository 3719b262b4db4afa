"""Where in a training step its peak memory falls, at 1, 2 and full depth (a GPU diagnostic for the sweep's depth
check): one warmed-up step of each stage, built as the sweep's predictor builds it (sweep.timing.builders.step_fn), run
under the allocator's history; from its alloc/free events, the allocated bytes over the step, the phase ends, and
where the peak lies (which phase, how far into it) with the largest blocks live there.

    python benchmarks/peak_timeline.py --model gpt2-small --batch-size 1 STAGE [STAGE...] > OUT.json
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

MIB = 2**20


def timeline(torch, call, baseline: int) -> dict:
    """One step under the allocator's history: the peak's place among the phase ends, and what was live there."""
    from bench_core.run.phases import StepPhase
    ends: dict[str, int] = {}
    events: list = []

    def mark(phase: StepPhase) -> None:   # the event count at each phase's end
        ends[phase.value] = len(torch.cuda.memory._snapshot()["device_traces"][0])
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=2_000_000)
    start = torch.cuda.memory_allocated()
    call.built.on_phase = mark
    try:
        call()
        torch.cuda.synchronize()
        events = torch.cuda.memory._snapshot()["device_traces"][0]
    finally:
        call.built.on_phase = None
        torch.cuda.memory._record_memory_history(enabled=None)
    live: dict[int, int] = {}
    now, peak, peak_at, peak_live = start, start, 0, {}
    for i, ev in enumerate(events):
        if ev["action"] == "alloc":
            live[ev["addr"]] = ev["size"]
            now += ev["size"]
        elif ev["action"] == "free_requested" and ev["addr"] in live:
            now -= live.pop(ev["addr"])
        if now > peak:
            peak, peak_at, peak_live = now, i, dict(live)
    order = [p.value for p in StepPhase]
    phase, begin = order[-1], 0
    for name in order:
        if peak_at < ends.get(name, len(events)):
            phase = name
            break
        begin = ends.get(name, begin)
    span = max(ends.get(phase, len(events)) - begin, 1)
    biggest = sorted(peak_live.values(), reverse=True)[:8]
    return {"start_mib": round((start - baseline) / MIB, 1), "peak_mib": round((peak - baseline) / MIB, 1),
            "peak_phase": phase, "peak_into_phase": round((peak_at - begin) / span, 3),
            "phase_ends": ends, "events": len(events),
            "step_allocated_at_peak_mib": round(sum(peak_live.values()) / MIB, 1),
            "largest_live_at_peak_mib": [round(b / MIB, 1) for b in biggest]}


def main() -> int:
    import torch

    from bench_core.config.bench_config import BenchConfig, workload
    from bench_core.levers.stage import Stage
    from bench_core.sweep.timing.builders import step_fn
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stages", nargs="+")
    ap.add_argument("--model", default="gpt2-small")
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--width", type=int, default=0)
    args = ap.parse_args()
    cfg = workload(args.model, BenchConfig(device="cuda"))
    cfg = replace(cfg, batch_size=args.batch_size, **({"width": args.width} if args.width else {}))
    found = []
    for key in args.stages:
        stage = Stage.from_key(key)
        for depth in (1, 2, cfg.depth):
            baseline = torch.cuda.memory_allocated()
            call = step_fn(torch, cfg, "cuda", stage, depth)
            for _ in range(3):
                call()
            torch.cuda.reset_peak_memory_stats()
            call()
            torch.cuda.synchronize()
            plain = (torch.cuda.max_memory_allocated() - baseline) / MIB
            found.append({"stage": key, "depth": depth, "step_peak_mib": round(plain, 1),
                          **timeline(torch, call, baseline)})
            print(json.dumps(found[-1]), file=sys.stderr)
            del call
            import gc
            gc.collect()
            torch.cuda.empty_cache()
    json.dump({"model": args.model, "batch_size": cfg.batch_size, "width": cfg.width, "results": found},
              sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
