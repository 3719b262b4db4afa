"""Is the recommendation within its interval of the best of the check set (issue 45's target)? Reads the JSON
files `python -m bench_core recommend --check-set ... --json F` wrote (the set may take several calls: their check
rows are pooled, per model), and prints for each file's recommendation whether its time per token, at the fast end
of its interval, reaches the best verified member's median, with both MFUs.

    python benchmarks/recommend_check.py docs/data/*_recommend_*.json
"""
from __future__ import annotations

import sys
from pathlib import Path

from bench_core.recommend.answer import Recommendation
from bench_core.recommend.check import Checked


def best_of(rows: list[Checked]) -> Checked | None:
    ok = [r for r in rows if r.verified and r.us_per_token is not None]
    return min(ok, key=lambda r: r.us_per_token or 0.0, default=None)


def main(paths: list[str]) -> int:
    recs = [(p, Recommendation.from_json(Path(p).read_text())) for p in paths]
    pooled: dict[str, dict[str, Checked]] = {}
    for _, rec in recs:   # a member measured in several files: the one with most processes
        for row in rec.check:
            known = pooled.setdefault(rec.model, {}).get(row.key)
            if known is None or row.processes > known.processes:
                pooled[rec.model][row.key] = row
    missed = 0
    for path, rec in recs:
        if rec.recommended is None:
            continue
        mine = next((r for r in rec.check if RECOMMENDED_ROLE in r.roles), None)
        best = best_of(list(pooled.get(rec.model, {}).values()))
        if mine is None or best is None or mine.us_per_token_low is None or best.us_per_token is None:
            print(f"{path}: {rec.recommended.key}: no check set to judge it by")
            continue
        within = mine.us_per_token_low <= best.us_per_token
        missed += not within
        mfu = f"MFU {mine.mfu:.1%}" if mine.mfu is not None else "no MFU"
        best_mfu = f"MFU {best.mfu:.1%}" if best.mfu is not None else "no MFU"
        print(f"{path}: {rec.recommended.key} {mine.us_per_token:.4f} us/token ({mine.us_per_token_low:.4f}-"
              f"{mine.us_per_token_high:.4f}, {mine.processes} processes, {mfu}); best of the set "
              f"({len(pooled[rec.model])} members) {best.key} {best.us_per_token:.4f} ({best_mfu}): "
              + ("within its interval" if within else "NOT within its interval"))
    return 1 if missed else 0


RECOMMENDED_ROLE = "recommended"

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
