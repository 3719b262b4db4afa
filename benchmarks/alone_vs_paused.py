"""Is a timed process slower while the run's other processes exist, stopped, beside it? Issue 41's open lead.

    python benchmarks/alone_vs_paused.py --stage apex-fusedadam+apex-fusedln+bf16 docs/data/*_quiet_engine_*.json

Every look-ahead worker imports torch, creates its CUDA context and builds its model before its turn; while another
is timed it is stopped (run.quiet: `tool_busy_s` 0), but its process, host memory and CUDA context still exist. A
run's last processes have none left beside them (`paused_groups` 0). For each run the stage's process medians are
printed with the stopped groups beside each; then, over the runs that have both kinds, how often a process timed with
none beside it was faster than the median of its run's others. Under no effect that is a coin toss per run; the
sign test's two-sided p is printed beside it, over all runs and over the launch-bound ones (the engine's verdict).
Read by the engine's loader (_raw_runs.runs_in)."""
from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

from _raw_runs import runs_in

from bench_core.measure.breakdown import Bound
from bench_core.results.summary import summarize


def sign_test_p(wins: int, n: int) -> float:
    """Two-sided binomial p of `wins` of `n` under a fair coin."""
    tail = sum(math.comb(n, k) for k in range(max(wins, n - wins), n + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stage", required=True)
    p.add_argument("files", nargs="+", type=Path)
    args = p.parse_args(argv)
    counts = {"all": [0, 0], str(Bound.LAUNCH): [0, 0]}   # [alone faster, runs with both kinds]
    for path in args.files:
        for run in runs_in(path):
            stage = next((s for s in run.stages if s.key == args.stage and s.quiet), None)
            if stage is None:
                continue
            verdict = next(str(s.bottleneck.verdict) for s in summarize(run).stages if s.result.key == args.stage)
            medians = [statistics.median(r) for r in stage.round_series if r]
            paused = [q.paused_groups for q in sorted(stage.quiet, key=lambda q: q.round)][:len(medians)]
            print(f"{path.name} ({verdict}): "
                  + ", ".join(f"{m:.2f} ms ({g} stopped beside)" for m, g in zip(medians, paused, strict=False)))
            alone = [m for m, g in zip(medians, paused, strict=False) if g == 0]
            others = [m for m, g in zip(medians, paused, strict=False) if g > 0]
            if alone and others:
                for key in ("all", verdict) if verdict in counts else ("all",):
                    counts[key][0] += statistics.median(alone) < statistics.median(others)
                    counts[key][1] += 1
    for key, (wins, n) in counts.items():
        if n:
            print(f"{key} runs: alone faster than with stopped processes beside it in {wins} of {n} "
                  f"(sign test, two-sided p = {sign_test_p(wins, n):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
