"""Markdown tables for docs/BENCHMARKS.md, computed by the engine's own summary from raw run JSON.

    python benchmarks/doc_tables.py RUN.json [...]                 one table per run
    python benchmarks/doc_tables.py --agree RUN1.json RUN2.json    stage by stage, how far two complete runs agree
    python benchmarks/doc_tables.py --components C1.json C2.json   two components reports side by side
Each figure in the doc's tables comes from here, so the doc shows what the tool computes from the raw series.
"""
from __future__ import annotations

import json
import sys

from bench_core.components import ComponentsReport
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


def _load(path: str) -> RunResult:
    with open(path) as fh:
        return RunResult.from_dict(json.load(fh))


def agreement(path_a: str, path_b: str) -> str:
    """Per stage: both runs' medians, their difference (of the first), and each run's bottleneck and noise verdict."""
    a, b = _load(path_a).summary, _load(path_b).summary
    by_key = {s.key: s for s in b.stages}
    out = [f"`{path_a}` against `{path_b}`", "",
           "| stage | run 1 ms | run 2 ms | differ | run 1 | run 2 |", "|---|---:|---:|---:|---|---|"]
    for s in a.stages:
        t = by_key.get(s.key)
        if t is None or not s.timing.median_ms or not t.timing.median_ms:
            continue
        diff = abs(t.timing.median_ms - s.timing.median_ms) / s.timing.median_ms
        verdict = [f"{x.bottleneck.verdict}{', noisy' if x.noise_reason else ''}" for x in (s, t)]
        out.append(f"| `{s.key}` | {s.timing.median_ms:.2f} | {t.timing.median_ms:.2f} | {diff:.1%} | "
                   f"{verdict[0]} | {verdict[1]} |")
    return "\n".join(out)


def components(path_a: str, path_b: str) -> str:
    """Two components reports row by row: median (p10–p90), share of the copy ceiling, kernel ms and bound."""
    reps = []
    for path in (path_a, path_b):
        with open(path) as fh:
            reps.append(ComponentsReport.from_dict(json.load(fh)))
    a, b = reps
    ceil = a.ceilings or {}
    out = [f"`{path_a}` and `{path_b}` — {a.model}, {a.params:,} parameters, LayerNorm "
           f"{a.rows_x_width[0]}x{a.rows_x_width[1]}; copy ceiling {ceil.get('copy_gbps', 0):,.0f} GB/s", "",
           "| row | dtype | run 1 ms (p10–p90) | run 2 ms (p10–p90) | differ | of copy | kernel ms | kernel GB/s "
           "| bound | proof |", "|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in a.rows:
        t = b.row(r.view, r.name, r.dtype)
        if r.median_ms is None or t is None or t.median_ms is None:
            continue
        diff = abs(t.median_ms - r.median_ms) / r.median_ms
        share = "—" if r.copy_fraction is None else f"{r.copy_fraction:.0%} / {t.copy_fraction:.0%}"
        out.append(f"| {r.view} · `{r.name}` | {r.dtype} | {r.median_ms:.3f} ({r.p10_ms:.3f}–{r.p90_ms:.3f}) | "
                   f"{t.median_ms:.3f} ({t.p10_ms:.3f}–{t.p90_ms:.3f}) | {diff:.1%} | {share} | "
                   f"{_f(r.kernel_ms, '.3f')} / {_f(t.kernel_ms, '.3f')} | {_f(r.kernel_gb_per_s, ',.0f')} | "
                   f"{r.bound or '—'} / {t.bound or '—'} | "
                   f"{r.proof or '—'} |")
    return "\n".join(out)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--agree"]:
        print(agreement(*sys.argv[2:4]))
    elif sys.argv[1:2] == ["--components"]:
        print(components(*sys.argv[2:4]))
    else:
        print("\n\n".join(table(p) for p in sys.argv[1:]))
