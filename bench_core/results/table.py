"""The CLI's text output: the results table (fits the terminal, never cuts a cell) and the probe.

The table renders `columns.DISPLAY_COLUMNS`; long notes go under it, one line per stage. Stage names stay whole
on one line (no zero-width break characters), so a copied table pastes as it reads.
"""
from __future__ import annotations

from typing import Any

from bench_core.machine.probe import Probe
from bench_core.results.answer import Answer, answer
from bench_core.results.columns import DisplayColumn, Layout, shown
from bench_core.results.headline import headline
from bench_core.results.summary import RunSummary


def print_table(summary: RunSummary, console: Any = None) -> None:
    import sys

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text
    # a terminal: fit its width (other cells wrap, none is cut); a pipe or file: room for every column
    console = console or Console(width=None if sys.stdout.isatty() else 200)
    run = summary.run
    verdict = headline(summary)
    # the answer first: the card, each lever's contribution as a row, then the rest of the verdict (plain text)
    print_answer(answer(summary), console)
    rest = verdict.lines[len(verdict.contributions):]
    if rest:  # the same blocks as the HTML report and the dashboard
        console.print(Text("Verdict:", style="bold"))
    for line in rest:
        console.print(Text("  - " + line.replace("**", "")), soft_wrap=True)
    cols = shown(summary)
    in_table = [c for c in cols if c.layout != Layout.NOTE]
    table = Table(title=f"{run.preset} on {run.gpu} · run {run.run_id}", expand=False)
    width = _stage_width(summary, in_table, console.width)
    for c in in_table:
        stage = c.key == "stage"
        table.add_column(c.header, justify="right" if c.layout == Layout.NUMBER else "left", overflow="fold",
                         no_wrap=stage, min_width=width if stage else None)
    for s in summary.stages:
        # Text: a '[' in a reason is not rich markup
        table.add_row(*(Text(_wrap_key(s.key, width) if c.key == "stage" else c.cell(s)) for c in in_table))
    console.print(table)
    if summary.baseline_note:
        console.print(Text(f"  {summary.baseline_note}"), soft_wrap=True)
    for s in summary.stages:
        for c in cols:
            note = c.text(s) if c.layout == Layout.NOTE else None
            if note:
                console.print(Text(f"  {s.key}: {note}"), soft_wrap=True)


def print_answer(card: Answer, console: Any) -> None:
    """The answer card, the contributions table (each row's two stages in a numbered note under it), what the
    levers measure together, and a CPU run's next step."""
    from rich.table import Table
    from rich.text import Text
    console.print(Text("Answer:", style="bold"))
    for line in card.lines:
        console.print(Text("  " + line.text), soft_wrap=True)
    if card.rows:
        table = Table(title="What each lever adds", title_justify="left", expand=False)
        for header in ("#", "Lever", "Against", "Effect (95% CI)", "Bound", "Proof"):
            table.add_column(header, overflow="fold")
        for i, row in enumerate(card.rows, 1):
            table.add_row(str(i), row.lever, row.against, row.effect, row.bound, row.proof)
        console.print(table)
        for i, row in enumerate(card.rows, 1):
            console.print(Text(f"  {i}. {row.stages}" + (f"; {row.settle}" if row.settle else "")), soft_wrap=True)
    if card.combined:
        console.print(Text("  " + card.combined), soft_wrap=True)
    if card.next_step:
        console.print(Text("Next step: ", style="bold") + Text(card.next_step.replace("`", "")), soft_wrap=True)


def _longest_word(texts: list[str]) -> int:
    return max((len(word) for text in texts for word in text.split()), default=1)


def _stage_width(summary: RunSummary, cols: list[DisplayColumn], console_width: int) -> int:
    """As wide as the longest stage name where the other columns' narrowest fit leaves room; else what is left,
    but never narrower than one lever's name."""
    keys = [s.key for s in summary.stages]
    others = sum(_longest_word([c.header, *(c.cell(s) for s in summary.stages)]) + 3 for c in cols if c.key != "stage")
    one_lever = max((len(part) + 1 for key in keys for part in key.split("+")), default=1)
    return max(one_lever, min(max(map(len, keys), default=1), console_width - others - 4))


def _wrap_key(key: str, width: int) -> str:
    """Break a long stage name after a '+', with real line breaks: the cell copies as it reads."""
    lines = [""]
    for part in key.split("+"):
        piece = part if not lines[-1] else "+" + part
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines[-1] += "+"
            lines.append(part)
        else:
            lines[-1] += piece
    return "\n".join(lines)


def print_probe(probe: Probe) -> str:
    """Plain text; on a machine without a GPU it says so rather than printing None."""
    lines = [f"torch {probe.torch}" + (f"  CUDA {probe.cuda_runtime}" if probe.cuda_runtime else "  (CPU build)")
             + (f"  driver {probe.driver}" if probe.driver else "")]
    if probe.cuda_available:
        cap = ".".join(map(str, probe.cuda.capability or ()))
        lines.append(f"GPU: {probe.cuda.name}  capability {cap}  {probe.cuda.device_count} device(s)")
    else:
        lines.append("GPU: none (CPU runs only; Apex, TF32 and CUDA graphs need a CUDA GPU)")
    devices = ["cuda", "cpu"] if probe.cuda_available else ["cpu"]
    for label, table in (("bf16 autocast", probe.bf16), ("fp16 autocast", probe.fp16),
                         ("Adam(fused=True)", probe.adam_fused)):
        lines.append(f"{label}: " + ", ".join(f"{d} {'yes' if table.get(d) else 'no'}" for d in devices))
    apex = probe.apex
    if apex.status == "missing":
        lines.append("Apex: not installed (see docs/APEX.md, 'Installing Apex')")
    else:
        lines.append(f"Apex: {apex.label}")
        for ext in apex.extensions:
            reason = probe.apex_reason(ext)
            lines.append(f"  {ext}: {'ok' if reason is None else reason}")
    if probe.error:
        lines.append(f"probe error: {probe.error}")
    return "\n".join(lines)
