"""How much of each process's warm-up was needed? Per stage and process of each run: the warm-up it ran, the point
from which it had settled by measure.warmup.settle (SM clock at the timed steps' median, then the next steps inside
the stage's own timed p10-p90), and the spare seconds; then the largest settle time over every process, which is
what a shorter WARMUP_MIN_S would have to cover.

    python benchmarks/warmup_settle.py RUN.json [RUN.json ...]

Reads run JSON files written with their warm-up records (`python -m bench_core run --json`). Exit 0 with the table;
2 with a message for bad input (a missing or rejected file, or files without warm-up records).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from bench_core.config.bench_config import WARMUP_MIN_S
from bench_core.measure.warmup import CLOCK_STEP_MHZ, SETTLED_RUN, Settled, WarmupTrace, settle
from bench_core.results.formats import ImportRejected, parse_json
from bench_core.results.summary import StageSummary, summarize


@dataclass(frozen=True)
class ProcessSettle:
    """One process's warm-up against the rule."""
    file: str
    stage: str
    process: int           # 1-based, in the order the processes ran
    trace: WarmupTrace
    settled: Settled | None

    @property
    def spare_s(self) -> float | None:
        return None if self.settled is None else self.trace.seconds - self.settled.seconds

    @property
    def line(self) -> str:
        used = f"warm-up {self.trace.steps} steps, {self.trace.seconds:.2f} s"
        if self.settled is None:
            return f"  process {self.process}: {used}; NOT settled by the rule within its warm-up"
        clock = "" if self.settled.clock_checked else " (no SM clock samples: step times only)"
        return (f"  process {self.process}: {used}; settled after {self.settled.steps} steps, "
                f"{self.settled.seconds:.2f} s{clock}; spare {self.spare_s:.2f} s")


def stage_settles(file: str, stage: StageSummary) -> list[ProcessSettle]:
    t = stage.timing
    if t.p10_ms is None or t.p90_ms is None:
        return []   # no timed steps: nothing to compare the warm-up with
    clock = stage.conditions.sm_clock_mhz_median if stage.conditions else None
    return [ProcessSettle(file, stage.key, i + 1, trace, settle(trace, clock, (t.p10_ms, t.p90_ms)))
            for i, trace in enumerate(stage.result.warmups)]


def header(stage: StageSummary) -> str:
    t = stage.timing
    clock = stage.conditions.sm_clock_mhz_median if stage.conditions else None
    clock_text = f"SM clock median {clock:,.0f} MHz" if clock is not None else "no SM clock samples"
    return f"{stage.key}: timed p10-p90 {t.p10_ms:.3f}-{t.p90_ms:.3f} ms, {clock_text}"


def summary_lines(rows: list[ProcessSettle]) -> list[str]:
    settled = [r for r in rows if r.settled is not None]
    lines = [f"rule: SM clock within {CLOCK_STEP_MHZ} MHz of the timed median, then {SETTLED_RUN} steps in a row "
             f"inside the stage's timed p10-p90 (measure.warmup.settle); this checkout's WARMUP_MIN_S: "
             f"{WARMUP_MIN_S:g} s"]
    if settled:
        worst = max(settled, key=lambda r: r.settled.seconds if r.settled else 0.0)
        assert worst.settled is not None
        lines.append(f"largest settle time: {worst.settled.seconds:.2f} s ({worst.settled.steps} steps), "
                     f"{worst.stage} process {worst.process} in {worst.file}; over {len(rows)} processes")
    unsettled = len(rows) - len(settled)
    if unsettled:
        lines.append(f"{unsettled} of {len(rows)} processes had not settled within their warm-up: these files "
                     "cannot argue a shorter WARMUP_MIN_S")
    return lines


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print("usage: warmup_settle.py RUN.json [RUN.json ...]: give at least one run JSON file", file=sys.stderr)
        return 2
    rows: list[ProcessSettle] = []
    out: list[str] = []
    for path in paths:
        try:
            [run] = parse_json(Path(path).read_bytes())
        except (OSError, ImportRejected) as exc:
            print(f"{path}: {exc}", file=sys.stderr)
            return 2
        out.append(f"== {path}")
        for stage in summarize(run).stages:
            found = stage_settles(path, stage)
            if found:
                out.append(header(stage))
                out.extend(r.line for r in found)
                rows.extend(found)
    if not rows:
        print(f"no warm-up records in {', '.join(paths)}: files written before warm-ups were recorded, or no stage "
              "had timed steps", file=sys.stderr)
        return 2
    print("\n".join(out + summary_lines(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
