"""Markdown tables for docs/BENCHMARKS.md, computed by the engine's own summary from raw run JSON.

    python benchmarks/doc_tables.py RUN.json [...]                 one table per run
    python benchmarks/doc_tables.py --agree RUN1.json RUN2.json    stage by stage, how far two complete runs agree
    python benchmarks/doc_tables.py --components C1.json C2.json   two components reports side by side
    python benchmarks/doc_tables.py --pair RUN1.json RUN2.json     one model's stages from two runs: time, interval,
                                                                   memory, MFU, bottleneck and proof of each
    python benchmarks/doc_tables.py --twins RUN.json [...]         each stage against its twin in the same run: one
                                                                   vendor lever swapped for the PyTorch one it replaces
    python benchmarks/doc_tables.py --rewrite docs/BENCHMARKS.md   every marked table printed again, in place
Each figure in the doc's tables comes from here, so the doc shows what the tool computes from the raw series. A
printed table sits in the doc right under a marker naming the command that prints it (invisible when rendered):
    <!-- table: python benchmarks/doc_tables.py --pair docs/data/A.json docs/data/B.json -->
so `--rewrite` (after a change to the statistics) and the docs' test (at every run) can print it again.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from bench_core.components.rows import ComponentsReport
from bench_core.results.records import RunResult
from bench_core.results.summary import StageSummary, summarize


def _f(v: float | None, fmt: str) -> str:
    return "—" if v is None else format(v, fmt)


def _load(path: str) -> RunResult:
    with open(path) as fh:
        return RunResult.from_dict(json.load(fh))


def _shape(run: RunResult) -> str:
    c = run.config
    return (f"{c.family}, {c.depth} layers, width {c.width}, batch {c.batch_size} × seq {c.seq_len}, "
            f"{c.repeats} round(s) of {c.iters} timed steps")


def _evidence(s: StageSummary, device: str) -> str:
    """The key kernels this stage's levers expect, each with the first name the trace showed for it."""
    stage = s.result.stage
    wanted = sorted({key for lever in stage.levers for key in lever.expected(device, stage)})
    seen = [(key, s.result.kernels[key][0]) for key in wanted if s.result.kernels.get(key)]
    return ", ".join(f"{key} `{name[:48]}`" for key, name in seen)


def _not_run(s: StageSummary) -> str:
    return f"{s.status.value}: {s.reason}" if s.reason else s.status.value


def table(path: str) -> str:
    run = _load(path)
    out = [f"`{path}` — {run.preset}, run {run.run_id}, {run.created_at}; {_shape(run)}", "",
           "| stage | median ms | p10–p90 ms | speedup (95% CI) | peak MiB | MFU | GPU busy | bottleneck | "
           "kernels/step | J/token | noise | proof |", "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---|"]
    for s in summarize(run).stages:
        if s.timing.median_ms is None:
            out.append(f"| `{s.key}` | {_not_run(s)} |" + " — |" * 10)
            continue
        out.append(f"| `{s.key}` | {s.timing.median_ms:.2f} | {s.spread_text or '—'} | {s.speedup_text or '—'} | "
                   f"{_f(s.peak_mem_mib, ',.0f')} | {s.mfu_text or '—'} | {s.bottleneck.busy_text or '—'} | "
                   f"{s.bottleneck.verdict} | {_f(s.profile.kernels_per_step if s.profile else None, '.0f')} | "
                   f"{_f(s.energy_j_per_token, '.4f')} | {s.noise_reason or 'steady'} | {s.verdict or '—'} |")
    return "\n".join(out)


def pair(path_a: str, path_b: str) -> str:
    """One model's stages as two runs saw them: each run's median (p10–p90), speedup over the first stage, peak
    memory, MFU, GPU busy and bottleneck, and the kernel proof; a stage that did not run says why."""
    a, b = _load(path_a), _load(path_b)
    other = {s.key: s for s in summarize(b).stages}
    out = [f"`{path_a}` and `{path_b}` — {a.preset} on {a.gpu}; {_shape(a)}", "",
           "| stage | run 1 ms (p10–p90) | run 2 ms (p10–p90) | speedup run 1 / run 2 | peak MiB | MFU run 1 / run 2 "
           "| busy · bottleneck, run 1 / run 2 | proof run 1 / run 2: key kernels seen |",
           "|---|---:|---:|---:|---:|---:|---|---|"]

    def ms(s: StageSummary) -> str:
        return f"{s.timing.median_ms:.2f} ({s.spread_text})" + (" noisy" if s.noise_reason else "")

    def bound(s: StageSummary) -> str:
        return f"{s.bottleneck.busy_text or '—'} {s.bottleneck.verdict}"
    for s in summarize(a).stages:
        t = other.get(s.key)
        if s.timing.median_ms is None or t is None or t.timing.median_ms is None:
            out.append(f"| `{s.key}` | {_not_run(s)} | | | | | | |")
            continue
        mem = _f(s.peak_mem_mib, ",.0f") + ("" if s.peak_mem_mib == t.peak_mem_mib else
                                            f" / {_f(t.peak_mem_mib, ',.0f')}")
        out.append(f"| `{s.key}` | {ms(s)} | {ms(t)} | {_f(s.speedup, '.2f')} / {_f(t.speedup, '.2f')} | {mem} | "
                   f"{s.mfu_text or '—'} / {t.mfu_text or '—'} | {bound(s)} / {bound(t)} | "
                   f"{s.verdict or '—'} / {t.verdict or '—'}: {_evidence(s, a.device)} |")
    return "\n".join(out)


def agreement(path_a: str, path_b: str) -> str:
    """Per stage: both runs' medians, their difference (of the first), and each run's bottleneck and noise verdict."""
    a, b = summarize(_load(path_a)), summarize(_load(path_b))
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


def twins(paths: list[str]) -> str:
    """Ratios measured inside one run: each stage against the stage that differs only in one vendor lever (Liger,
    torchao, TE, Apex) swapped for the PyTorch lever it replaces (`Lever.native`). For a loss-head lever the peak
    memory saved is also given per logit (tokens × vocab), the size the fused head never materialises."""
    out = ["| run | stage | twin | twin ms / stage ms | peak MiB, twin → stage | saved | saved per logit |",
           "|---|---|---|---:|---:|---:|---:|"]
    for path in paths:
        run = _load(path)
        by_key = {s.key: s for s in summarize(run).stages}
        logits = run.config.tokens_per_step * run.config.vocab_size
        for s in summarize(run).stages:
            stage = s.result.stage
            for lever in (lv for lv in stage.levers if lv.native):
                twin = by_key.get(stage.replace(**{lever.kind: lever.native}).key)
                if twin is None or not s.ok or not twin.ok or not s.timing.median_ms or not twin.timing.median_ms:
                    continue
                ratio = twin.timing.median_ms / s.timing.median_ms
                mem = saved = per_logit = "—"
                if s.peak_mem_mib and twin.peak_mem_mib:
                    delta = twin.peak_mem_mib - s.peak_mem_mib
                    mem = f"{twin.peak_mem_mib:,.0f} → {s.peak_mem_mib:,.0f}"
                    saved = f"{delta:,.0f} MiB ({delta / twin.peak_mem_mib:.1%})"
                    per_logit = f"{delta * 2 ** 20 / logits:.1f} B" if lever.kind == "head" else "—"
                out.append(f"| `{path.rsplit('/', 1)[-1]}` | `{s.key}` | `{twin.key}` | ×{ratio:.2f} | {mem} | "
                           f"{saved} | {per_logit} |")
    return "\n".join(out)


def render(argv: list[str]) -> str:
    """What the command line `doc_tables.py ARGV` prints, as text (a usage error exits, as from the shell)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    for flag in ("--agree", "--components", "--pair"):
        mode.add_argument(flag, nargs=2, metavar=("RUN1.json", "RUN2.json"))
    mode.add_argument("--twins", action="store_true", help="each vendor-lever stage against its native twin, per run")
    mode.add_argument("--rewrite", metavar="DOC.md", help="print every marked table of DOC.md again, in place")
    parser.add_argument("runs", nargs="*", metavar="RUN.json", help="one table per run")
    args = parser.parse_args(argv)
    if args.rewrite:
        changed = rewrite(Path(args.rewrite))
        return f"{args.rewrite}: {changed} of {len(marked_tables(Path(args.rewrite).read_text()))} tables changed"
    if args.twins and args.runs:
        return twins(args.runs)
    for flag, build in (("agree", agreement), ("components", components), ("pair", pair)):
        if getattr(args, flag):
            return build(*getattr(args, flag))
    if not args.runs:
        parser.error("give RUN.json files, or --agree, --components or --pair with two files")
    return "\n\n".join(table(p) for p in args.runs)


# ---------------------------------------------------------------- the doc's marked tables
SCRIPT = "python benchmarks/doc_tables.py"
MARK = re.compile(r"^<!-- table: (.+?) -->$")
CAPTION_LINES = 2   # a caption and a blank line may stand between a marker and its table


@dataclass(frozen=True)
class MarkedTable:
    """A table in a doc under its marker: lines [start, end) of the doc are what `argv` prints."""
    line: int           # the marker's line, 0-based
    argv: tuple[str, ...]
    start: int
    end: int

    @property
    def command(self) -> str:
        return shlex.join([*SCRIPT.split(), *self.argv])


def marked_tables(text: str) -> list[MarkedTable]:
    """Every marker of the doc with the block under it: from the next line to its table's last row."""
    lines = text.split("\n")
    found = []
    for n, line in enumerate(lines):
        m = MARK.match(line)
        if not m:
            continue
        words = shlex.split(m.group(1))
        if words[:2] != SCRIPT.split():
            raise ValueError(f"line {n + 1}: a table marker must name `{SCRIPT} ...`, not {m.group(1)!r}")
        first = next((i for i in range(n + 1, min(n + 2 + CAPTION_LINES, len(lines))) if lines[i].startswith("|")),
                     None)
        if first is None:
            raise ValueError(f"line {n + 1}: no table within {CAPTION_LINES} lines under the marker")
        end = first
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        found.append(MarkedTable(n, tuple(words[2:]), n + 1, end))
    return found


def printed(mark: MarkedTable, root: Path = Path()) -> str:
    """The block as the engine prints it today; the files are read relative to `root` (the repository)."""
    with contextlib.chdir(root):
        return render(list(mark.argv))


def rewrite(doc: Path, root: Path = Path()) -> int:
    """Each marked table of `doc` printed again in place (the last first, so earlier lines keep their place);
    returns how many changed."""
    lines = doc.read_text().split("\n")
    changed = 0
    for mark in reversed(marked_tables("\n".join(lines))):
        new = printed(mark, root).split("\n")
        if lines[mark.start:mark.end] != new:
            lines[mark.start:mark.end] = new
            changed += 1
    doc.write_text("\n".join(lines))
    return changed


def main(argv: list[str] | None = None) -> None:
    print(render(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
