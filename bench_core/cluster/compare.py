"""The cross-GPU view: each lever's contribution (results.contributions, read, never recomputed) side by side,
one column per GPU, from one run per GPU of the same ladder."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench_core.results.contributions import contributions
from bench_core.results.near_one import times
from bench_core.results.records import RunResult
from bench_core.results.summary import summarize


@dataclass(frozen=True)
class LeverAcross:
    lever: str
    against: str
    context: str
    by_gpu: dict[str, str]   # GPU (and node) -> "×1.23 [1.20, 1.26]", or "—" where that run has no such pair


def column(run: RunResult) -> str:
    return f"{run.gpu} ({run.node})" if run.node else run.gpu


def across_gpus(runs: Sequence[RunResult]) -> list[LeverAcross]:
    columns = [column(r) for r in runs]
    rows: dict[tuple[str, str, str], dict[str, str]] = {}
    for name, run in zip(columns, runs, strict=True):
        for c in contributions(summarize(run)):
            d = c.decimals   # a third decimal near ×1.00, as the contribution's words (results.near_one)
            ratio = times(c.ratio, d) + (f" [{c.interval[0]:.{d}f}, {c.interval[1]:.{d}f}]" if c.interval else "")
            rows.setdefault((c.lever, c.against, c.context), {})[name] = ratio
    return [LeverAcross(lever, against, context, {name: cells.get(name, "—") for name in columns})
            for (lever, against, context), cells in rows.items()]
