"""A static HTML report with the dashboard's charts, for ``python -m bench_core run --html``."""
from __future__ import annotations

import html

from .figures import ALL_FIGURES
from .results import RunResult, summary_rows


def render_html(run: RunResult) -> str:
    cfg = run.config
    parts = [f"<h1>{html.escape(run.preset)} on {html.escape(run.gpu or run.device)}</h1>",
             f"<p>run {run.run_id} · {run.created_at} · torch {html.escape(str(run.env.get('torch')))} · "
             f"depth {cfg.depth}, width {cfg.width}, heads {cfg.heads}, seq {cfg.seq_len}, batch {cfg.batch_size}, "
             f"vocab {cfg.vocab_size}, warm-up {cfg.warmup}, iterations {cfg.iters}</p>"]
    for i, build in enumerate(ALL_FIGURES.values()):
        parts.append(build(run).to_html(full_html=False, include_plotlyjs="inline" if i == 0 else False))
    cols = ["stage", "status", "reason", "verdict", "median_ms", "p10_ms", "p90_ms", "speedup", "tokens_per_s",
            "mfu", "peak_mem_mib", "warnings"]
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(r[c]))}</td>" for c in cols) + "</tr>"
                   for r in summary_rows(run))
    parts.append("<table><tr>" + "".join(f"<th>{c}</th>" for c in cols) + f"</tr>{rows}</table>")
    style = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:auto}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:4px}")
    return f"<!doctype html><html><head><meta charset='utf-8'><title>bench report</title><style>{style}</style>" \
           f"</head><body>{''.join(parts)}</body></html>"


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def write_html(run: RunResult, path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render_html(run))
