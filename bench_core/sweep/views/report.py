"""A sweep's static HTML report: its map, its crossovers, and a row per point (predicted beside measured)."""
from __future__ import annotations

import html

from bench_core.config.bench_config import describe_shape
from bench_core.results.report import plotly_loader
from bench_core.sweep.core.errors import error_figures
from bench_core.sweep.core.line_answers import line_answers
from bench_core.sweep.core.records import SweepResult
from bench_core.sweep.views.figures import has_memory, peak_memory_map, sweep_figure
from bench_core.sweep.views.parts import BREAKDOWN_CAPTION, BREAKDOWN_TITLE, breakdown_rows
from bench_core.sweep.views.rows import SHOWN_COLUMNS, shown_text, shown_text_rows
from bench_core.sweep.views.words import memory_gaps


def _table(rows: list[dict], columns: list[str]) -> str:
    """The rows as a table: text as it is (rows.shown_text_rows), any other cell as `shown_text` writes it."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)

    def cell(v: object) -> str:
        return html.escape(v if isinstance(v, str) else shown_text(v, None))
    body = "".join("<tr>" + "".join(f"<td>{cell(r[c])}</td>" for c in columns) + "</tr>" for r in rows)
    return f"<div class='scroll'><table><tr>{head}</tr>{body}</table></div>"


def render_html(result: SweepResult) -> str:
    rows = shown_text_rows(result)
    # a line may break after each "+" of the stage keys (overflow-wrap alone broke "fp|8" on a phone)
    title = html.escape(result.title).replace("+", "+<wbr>")
    parts = [f"<h1>{title} on {html.escape(result.gpu or result.device)}</h1>",
             f"<p>sweep {result.sweep_id} · {result.created_at} · base {html.escape(describe_shape(result.spec.base))}"
             "</p>",
             "<ul>" + "".join(f"<li>crossover: {html.escape(t)}</li>" for t in line_answers(result))
             + "".join(f"<li>{e.label}: {html.escape(e.text)}</li>" for e in error_figures(result))
             + "".join(f"<li>{html.escape(n)}</li>" for n in result.shown_notes) + "</ul>",
             "<div id='fig-sweep' class='fig'></div>"]
    figures = [f'{{"id": "fig-sweep", "fig": {sweep_figure(result).to_json()}}}']
    if has_memory(result):
        parts.append("<div id='fig-memory' class='fig'></div>")
        figures.append(f'{{"id": "fig-memory", "fig": {peak_memory_map(result).to_json()}}}')
    gaps = memory_gaps(result)
    if gaps:
        parts.append(f"<p>Peak memory: {html.escape(gaps)}.</p>")
    parts.append(_table(rows, list(rows[0]) if rows else [c.label for c in SHOWN_COLUMNS]))
    breakdown = [r.shown() for r in breakdown_rows(result)]
    if breakdown:
        parts += [f"<h2>{html.escape(BREAKDOWN_TITLE)}</h2><p>{html.escape(BREAKDOWN_CAPTION)}</p>",
                  _table(breakdown, list(breakdown[0]))]
    parts.append(plotly_loader(figures))
    style = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:auto;padding:0 12px}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:4px}"
             ".scroll{max-width:100%;overflow-x:auto}.fig{max-width:100%}"
             # stage keys joined by "+" have no space to break at: the title ran 431 px wide on a 390 px phone
             "h1{overflow-wrap:break-word}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><meta name='viewport' "
            f"content='width=device-width,initial-scale=1'><title>sweep {result.sweep_id}</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>")


def write_html(result: SweepResult, path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render_html(result))
