"""Every raw run in docs/data that measured one stage, with its median step time, read by the engine's own loader.

    python benchmarks/stage_history.py STAGE_KEY [--model gpt2-small] [--data docs/data]

One line per run file and round-set: the file, its model shape, the stage's median (ms), p10–p90, and whether the
tool called it steady. So a doc that quotes a stage's earlier results can list all of them, none left out.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _raw_runs import raw_runs

from bench_core.config.bench_config import WORKLOADS
from bench_core.results.records import RunResult
from bench_core.results.summary import summarize


def model_of(run: RunResult) -> str:
    """The named model size whose shape the run has, else 'custom'."""
    for name, shape in WORKLOADS.items():
        if all(getattr(run.config, k) == v for k, v in shape.items()):
            return name
    return "custom"


def rows(key: str, model: str | None, data: Path) -> list[tuple[str, str, float, str, bool | None]]:
    out = []
    for name, run in raw_runs(data):
        if model and model_of(run) != model:
            continue
        for s in summarize(run).stages:
            if s.result.key == key and s.timing.median_ms:
                out.append((name, model_of(run), s.timing.median_ms, s.spread_text or "—", s.noisy))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("key")
    p.add_argument("--model")
    p.add_argument("--data", default="docs/data", type=Path)
    args = p.parse_args(argv)
    found = rows(args.key, args.model, args.data)
    for name, model, median, spread, steady in found:
        label = {True: "noisy", False: "steady", None: "—"}[steady]
        print(f"{name}\t{model}\t{median:.2f} ms\tp10–p90 {spread}\t{label}")
    print(f"{len(found)} run(s) measured {args.key}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
