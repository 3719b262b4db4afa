"""A static HTML report with the dashboard's charts, for ``python -m bench_core run --html``."""
from __future__ import annotations

import base64
import html
from collections.abc import Callable
from pathlib import Path

from bench_core.config.bench_config import describe_shape
from bench_core.results.figures import ALL_FIGURES, not_applicable
from bench_core.results.records import RunResult
from bench_core.results.summary import StageSummary, summarize


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:,.2f} ms"


TABLE: list[tuple[str, Callable[[StageSummary], object]]] = [
    ("Stage", lambda s: s.key), ("Status", lambda s: s.status.value + (" (partial)" if s.partial else "")),
    ("Median", lambda s: _ms(s.timing.median_ms)),
    ("p10–p90", lambda s: "—" if s.spread_text is None else f"{s.spread_text} ms"),
    ("Speedup (95% CI)", lambda s: s.speedup_text or "—"),
    ("Tokens/s", lambda s: "—" if s.rates.tokens_per_s is None else f"{s.rates.tokens_per_s:,.0f}"),
    ("MFU", lambda s: s.mfu_text or "—"),
    ("Peak memory", lambda s: "—" if s.peak_mem_mib is None else f"{s.peak_mem_mib:,.0f} MiB"),
    ("Bottleneck", lambda s: s.bottleneck.verdict + ("" if s.bottleneck.busy_text is None else
                                                     f" ({s.bottleneck.busy_text} busy)")),
    ("Noise", lambda s: s.noise_reason or ("steady" if s.timing.n else "—")),
    ("Kernel proof", lambda s: s.verdict or "—"),
    ("Notes", lambda s: "; ".join(([s.reason] if s.reason else []) + list(s.warnings))),
]


def _cell(fn: Callable[[StageSummary], object], stage: StageSummary) -> str:
    return html.escape(str(fn(stage)))


def render_html(run: RunResult) -> str:
    summary = summarize(run)
    parts = [f"<h1>{html.escape(run.preset)} on {html.escape(run.gpu or run.device)}</h1>",
             f"<p>run {run.run_id} · {run.created_at} · torch {html.escape(str(run.machine.torch))} · "
             f"{html.escape(describe_shape(run.config))}</p>"]
    if summary.baseline_note:
        parts.append(f"<p><b>{html.escape(summary.baseline_note)}</b></p>")
    rows = "".join("<tr>" + "".join(f"<td>{_cell(fn, s)}</td>" for _, fn in TABLE) + "</tr>" for s in summary.stages)
    parts.append("<table><tr>" + "".join(f"<th>{name}</th>" for name, _ in TABLE) + f"</tr>{rows}</table>")
    figures = []
    for name, build in ALL_FIGURES.items():
        why = not_applicable(name, summary)
        if why:
            parts.append(f"<p class='na'>{html.escape(why)}</p>")
            continue
        parts.append(f"<div id='fig-{name}' class='fig'></div>")
        figures.append(f'{{"id": "fig-{name}", "fig": {build(summary).to_json()}}}')
    parts.append(_plotly_loader(figures))
    style = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:auto;padding:0 12px}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:4px;"
             "vertical-align:top}td:first-child{white-space:nowrap}.na{color:#757575}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><meta name='viewport' "
            f"content='width=device-width,initial-scale=1'><title>bench report {run.run_id}</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>")


PLOTLY_BUNDLE = Path(__file__).parent.parent / "assets" / "plotly-cartesian-4.1.1.min.js.gz"


def _plotly_loader(figures: list[str]) -> str:
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
