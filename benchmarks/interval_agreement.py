"""Do two complete runs agree within their intervals? For each stage, whether run B's median speedup lies inside
run A's interval, per stage and in total (issue 19's measure of an honest interval).

    python benchmarks/interval_agreement.py A1.json B1.json [A2.json B2.json ...]
    python benchmarks/interval_agreement.py --stored A1.json B1.json ...   the intervals as each file recorded them

By default each run's intervals are computed by this engine from the raw series in the file (so a file written
before intervals covered processes gets today's intervals); --stored reads the summary rows the run wrote.
Stages are matched by key; the baseline (no interval) and stages without a speedup in both runs are left out.
Each stage of B outside A's interval is listed last with what each run's noise column said of it and of its
baseline (the speedup's other half): the cause the run recorded, not one guessed afterwards.
Exit 0 with the counts; 2 with a message for bad input.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench_core.results.agreement import Agreement, StageFigures, agreements, figures_of
from bench_core.results.formats import ImportRejected, parse_json
from bench_core.results.summary import summarize


def computed(path: Path) -> dict[str, StageFigures]:
    """The run's intervals as this engine computes them from the file's raw series."""
    [run] = parse_json(path.read_bytes())
    return figures_of(summarize(run))


def stored(path: Path) -> dict[str, StageFigures]:
    """The intervals the run wrote in its summary rows."""
    rows = json.loads(path.read_text()).get("summary")
    if not isinstance(rows, list):
        raise ImportRejected(f"{path}: no summary rows")
    noise = {r["stage"]: r.get("noise_reason") or "" for r in rows}
    return {r["stage"]: StageFigures(r["stage"], r.get("speedup"), r.get("speedup_ci_low"), r.get("speedup_ci_high"),
                                     r.get("interval_scope") or "as stored", noise[r["stage"]],
                                     noise.get(r.get("baseline_stage") or "", "")) for r in rows}


def pair_agreements(pairs: list[tuple[Path, Path]], read=computed) -> list[tuple[str, Agreement]]:
    """Each pair's stages (results.agreement), named by the pair's files."""
    return [(f"{path_a.stem} / {path_b.stem}", g) for path_a, path_b in pairs
            for g in agreements(read(path_a), read(path_b))]


def report(named: list[tuple[str, Agreement]]) -> str:
    found = [g for _, g in named]
    lines = ["| runs A / B | stage | A: speedup (interval, covers) | B: speedup (interval) | B inside A | overlap |",
             "| --- | --- | --- | --- | --- | --- |"]
    for pair, g in named:
        b_ci = f" ({g.b.low:.3f}–{g.b.high:.3f})" if g.b.low is not None and g.b.high is not None else ""
        lines.append(f"| {pair} | `{g.key}` | ×{g.a.speedup:.3f} ({g.a.low:.3f}–{g.a.high:.3f}, {g.a.covers}) | "
                     f"×{g.b.speedup:.3f}{b_ci} | {'yes' if g.inside else 'NO'} | "
                     f"{'—' if g.overlap is None else 'yes' if g.overlap else 'NO'} |")
    inside = sum(g.inside for g in found)
    judged = [g for g in found if g.overlap is not None]
    apart = sum(not g.overlap for g in judged)
    share = f" ({inside / len(found):.0%})" if found else ""
    misses = [(pair, g) for pair, g in named if not g.inside]
    if misses:
        lines += ["", "Outside A's interval, and what each run's noise column said (stage; baseline):"]
        lines += [f"- {pair} `{g.key}`: A: {_said(g.a.noise)}; baseline {_said(g.a.baseline_noise)} | "
                  f"B: {_said(g.b.noise)}; baseline {_said(g.b.baseline_noise)}" for pair, g in misses]
    lines += ["", f"{inside} of {len(found)} stages: run B's median speedup inside run A's interval{share}",
              f"{apart} of {len(judged)} stage pairs: intervals that do not overlap"]
    return "\n".join(lines)


def _said(noise: str) -> str:
    return noise or "steady"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stored", action="store_true", help="the intervals the files recorded, not recomputed")
    ap.add_argument("runs", nargs="*", help="run JSON files in pairs: A1 B1 A2 B2 ...")
    args = ap.parse_args(argv)
    if not args.runs or len(args.runs) % 2:
        print(f"error: runs: give run JSON files in pairs (A B), got {len(args.runs)}", file=sys.stderr)
        return 2
    paths = [Path(p) for p in args.runs]
    try:
        found = pair_agreements(list(zip(paths[::2], paths[1::2], strict=True)), stored if args.stored else computed)
    except (OSError, ImportRejected, KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
