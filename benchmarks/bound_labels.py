"""The launch-bound label by the old fitted line beside the label by the trace's host wait, for every raw run in
docs/data whose profile kept the idle attribution (issue 19, item 3: publish old label beside new).

    python benchmarks/bound_labels.py [--data docs/data]

Old: `gpu-bound` when kernel time per step ÷ median step time reached `BUSY_THRESHOLD` (the line fitted to earlier
results), else `launch-bound`. New: the engine's own `bottleneck`, which reads the host-wait share of the timed steps
and calls a stage launch-bound only when that wait is more than the trace's timestamps could make of none and at
least stats.EQUIVALENCE (3%) of the step. Both are
computed here from the same file by the engine's loader, so nothing is typed in. Files written before the idle
attribution have no new label and are left out.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _raw_runs import raw_runs

from bench_core.measure.breakdown import BUSY_THRESHOLD, Bound
from bench_core.results.summary import summarize


def old_label(busy: float) -> str:
    return (Bound.GPU if busy >= BUSY_THRESHOLD else Bound.LAUNCH).value


def rows(data: Path) -> list[tuple[str, str, float, str, float, str]]:
    out = []
    for name, run in raw_runs(data):
        for s in summarize(run).stages:
            b = s.bottleneck
            if b.busy is not None and b.host_wait_share is not None:
                out.append((name, s.result.key, b.busy, old_label(b.busy), b.host_wait_share, b.verdict))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="docs/data")
    args = parser.parse_args(argv)
    found = rows(Path(args.data))
    print(f"| file | stage | GPU busy | old label (busy ≥ {BUSY_THRESHOLD:.0%}) | host wait | new label | same |")
    print("| --- | --- | ---: | --- | ---: | --- | --- |")
    for name, key, busy, old, wait, new in found:
        print(f"| {name} | `{key}` | {busy:.1%} | {old} | {wait:.1%} | {new} | {'yes' if old == new else 'NO'} |")
    differ = sum(old != new for *_, old, _, new in found)
    print(f"\n{len(found)} stage results with a host-wait attribution; the two labels differ on {differ}")
    return 0 if found else 2


if __name__ == "__main__":
    sys.exit(main())
