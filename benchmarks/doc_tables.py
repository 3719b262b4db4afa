"""Markdown tables for docs/BENCHMARKS.md, computed by the engine's own summary from raw run JSON.

    python benchmarks/doc_tables.py docs/data/h200_2026-12-02_call2_seed_gpt2-small_repeats2.json [...]
Each figure in the doc's tables comes from here, so the doc shows what the tool computes from the raw series.
"""
from __future__ import annotations

import json
import sys

from bench_core.records import RunResult


def _f(v: float | None, fmt: str) -> str:
    return "—" if v is None else format(v, fmt)


def table(path: str) -> str:
    with open(path) as fh:
        run = RunResult.from_dict(json.load(fh))
    out = [f"`{path}` — {run.preset}, run {run.run_id}, {run.created_at}, {run.config.repeats} round(s) of "
           f"{run.config.iters} timed steps", "",
           "| stage | median ms | p10–p90 ms | speedup (95% CI) | MFU | GPU busy | bottleneck | kernels/step | "
           "J/token | noise | proof |", "|---|---:|---:|---:|---:|---:|---|---:|---:|---|---|"]
    for s in run.summary.stages:
        t = s.timing
        ci = f" ({s.speedup_ci[0]:.2f}–{s.speedup_ci[1]:.2f})" if s.speedup_ci else ""
        out.append(f"| `{s.key}` | {_f(t.median_ms, '.2f')} | "
                   f"{'—' if t.p10_ms is None else f'{t.p10_ms:.2f}–{t.p90_ms:.2f}'} | "
                   f"{'—' if s.speedup is None else f'×{s.speedup:.2f}{ci}'} | "
                   f"{'—' if s.rates.mfu is None else f'{s.rates.mfu:.1%}'} | "
                   f"{'—' if s.bottleneck.busy is None else f'{s.bottleneck.busy:.0%}'} | {s.bottleneck.verdict} | "
                   f"{_f(s.profile.kernels_per_step if s.profile else None, '.0f')} | "
                   f"{_f(s.energy_j_per_token, '.4f')} | {s.noise_reason or 'steady'} | {s.verdict or '—'} |")
    return "\n".join(out)


if __name__ == "__main__":
    print("\n\n".join(table(p) for p in sys.argv[1:]))
