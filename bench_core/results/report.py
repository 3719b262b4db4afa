"""A static HTML report with the dashboard's charts, for ``python -m bench_core run --html``."""
from __future__ import annotations

import base64
import html
from pathlib import Path

from bench_core.config.bench_config import describe_shape
from bench_core.results.answer import answer
from bench_core.results.columns import KEY_COLUMNS, key_cell, shown
from bench_core.results.figures import ALL_FIGURES, KERNEL_GRID_CAPTION, not_applicable
from bench_core.results.headline import headline
from bench_core.results.records import RunResult
from bench_core.results.summary import RunSummary, summarize

# host memory is no model memory: a CPU run's RSS stays out of the shared report
HIDDEN = ("peak_rss_mib",)


def _table(summary: RunSummary, key: bool) -> str:
    """The run's table: the key columns, or the other shown columns of `columns.DISPLAY_COLUMNS` (after the stage),
    each header with its help as a tooltip."""
    cols = [c for c in shown(summary) if c.key not in HIDDEN and (c.key in KEY_COLUMNS) == key or c.key == "stage"]
    head = "".join(f"<th title='{html.escape(c.help, quote=True)}'>{html.escape(c.header)}</th>" for c in cols)
    rows = "".join("<tr>" + "".join(f"<td>{_cell(key_cell(summary, c, s), c.key)}</td>" for c in cols) + "</tr>"
                   for s in summary.stages)
    return f"<div class='scroll'><table><tr>{head}</tr>{rows}</table></div>"


def _cell(text: str, key: str) -> str:
    """A stage name may break after each '+': on a phone the Stage column narrows, so no other cell has to break
    inside a word or a number."""
    escaped = html.escape(text)
    return escaped.replace("+", "+<wbr>") if key == "stage" else escaped


def _answer(summary: RunSummary) -> str:
    """The card every view opens with (results.answer): each vendor's word, the contributions as a table whose
    rows carry their two stages as a tooltip and in a fold, then a CPU run's next step."""
    card = answer(summary)
    parts = ["<section id='answer'><h2>Answer</h2><ul>"
             + "".join(f"<li class='answer-line'>{_bold(line.markdown)}</li>" for line in card.lines) + "</ul>"]
    if card.rows:
        head = "".join(f"<th>{h}</th>" for h in ("Lever", "Against", "Effect (95% CI)", "Bound", "Proof"))
        rows = "".join(f"<tr title='{html.escape(r.stages, quote=True)}'>" + "".join(
            f"<td>{html.escape(cell)}</td>" for cell in (r.lever, r.against, r.effect, r.bound, r.proof)) + "</tr>"
            for r in card.rows)
        keys = "".join(f"<li>{html.escape(r.stages + (f'; {r.settle}' if r.settle else ''))}</li>" for r in card.rows)
        parts.append(f"<h2>What each lever adds</h2><div class='scroll'><table class='contrib'><tr>{head}</tr>"
                     f"{rows}</table></div><details><summary>The two stages of each row</summary><ol>{keys}</ol>"
                     "</details>")
    else:
        parts.append("<p>No two stages that differ by one lever have a result.</p>")
    if card.combined:
        parts.append(f"<p>{_bold(card.combined)}</p>")
    if card.next_step:
        parts.append(f"<p class='next'><b>Next step:</b> {_code(card.next_step)}</p>")
    return "".join(parts) + "</section>"


def _verdict(summary: RunSummary) -> str:
    """The rest of the verdict, after the answer card."""
    verdict = headline(summary)
    rest = verdict.lines[len(verdict.contributions):]
    return ("<section id='verdict'><h2>Verdict</h2><ul>" + "".join(f"<li>{_bold(line)}</li>" for line in rest)
            + "</ul></section>") if rest else ""


def _code(text: str) -> str:
    """`code` spans as HTML; everything else escaped."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _bold(line: str) -> str:
    """The verdict's **markdown** bold, as HTML; everything else escaped."""
    parts = html.escape(line).split("**")
    return "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))


def render_html(run: RunResult) -> str:
    summary = summarize(run)
    parts = [f"<h1>{html.escape(run.preset)} on {html.escape(run.gpu or run.device)}</h1>", _answer(summary),
             _verdict(summary),
             f"<p>run {run.run_id} · {run.created_at} · torch {html.escape(str(run.machine.torch))} · "
             f"{html.escape(describe_shape(run.config))}</p>"]
    if summary.baseline_note:
        parts.append(f"<p><b>{html.escape(summary.baseline_note)}</b></p>")
    parts.append(_table(summary, key=True))
    parts.append(f"<details><summary>All columns</summary>{_table(summary, key=False)}</details>")
    figures = []
    said: set[str] = set()
    for name, build in ALL_FIGURES.items():
        why = not_applicable(name, summary)
        if name == "memory" and run.device == "cpu":
            continue   # a CPU run's memory is the process's RSS: no model memory figure for a shared report
        if why:
            if why not in said:   # MFU and the roofline share one note: said once
                parts.append(f"<p class='na'>{html.escape(why)}</p>")
            said.add(why)
            continue
        parts.append(f"<div id='fig-{name}' class='fig'></div>")
        if name == "kernels":
            parts.append(f"<p class='na'>{html.escape(KERNEL_GRID_CAPTION)}</p>")
        figures.append(f'{{"id": "fig-{name}", "fig": {build(summary).to_json()}}}')
    parts.append(plotly_loader(figures))
    # fits a 390 px phone: stage names break after '+', wide tables scroll inside their own box, charts shrink
    style = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:auto;padding:0 12px}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:4px;"
             "vertical-align:top}.scroll{max-width:100%;overflow-x:auto}"
             ".fig{max-width:100%}.na{color:#757575}"
             # a phone: smaller cells, so five key columns fit whole (numbers and words never split)
             "@media (max-width:480px){table{font-size:12px}td,th{padding:3px}}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><meta name='viewport' "
            f"content='width=device-width,initial-scale=1'><title>bench report {run.run_id}</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>")


PLOTLY_BUNDLE = Path(__file__).parent.parent / "assets" / "plotly-cartesian-4.1.1.min.js.gz"


def plotly_loader(figures: list[str]) -> str:
    """One shared plotly.js for every chart: its cartesian bundle, gzipped and inlined (≈0.5 MB instead of the
    4.7 MB full bundle per report), unpacked in the browser with DecompressionStream; no network needed."""
    packed = base64.b64encode(PLOTLY_BUNDLE.read_bytes()).decode()
    figs = "[" + ",".join(figures).replace("</", "<\\/") + "]"
    return ("<script>(async () => {"
            f"const bytes = Uint8Array.from(atob('{packed}'), c => c.charCodeAt(0));"
            "const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));"
            "const s = document.createElement('script'); s.text = await new Response(stream).text();"
            "document.head.appendChild(s);"
            f"for (const f of {figs}) Plotly.newPlot(f.id, f.fig.data, f.fig.layout, {{responsive: true}});"
            "})();</script>")


def write_html(run: RunResult, path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render_html(run))
