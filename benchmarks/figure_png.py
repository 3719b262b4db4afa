"""PNG of one of the dashboard's figures, drawn from raw JSON by the same builders, for docs/.

    python benchmarks/figure_png.py roofline OUT.png RUN.json [RUN.json ...]
    python benchmarks/figure_png.py components OUT.png COMPONENTS.json
    python benchmarks/figure_png.py sweep OUT.png SWEEP.json          (its map: a line or a heatmap)
    python benchmarks/figure_png.py sweep_memory OUT.png SWEEP.json   (its peak-memory map)
The figure is written as HTML with the bundled plotly.js and photographed by headless Chromium (Playwright with
Debian's /usr/bin/chromium), so no image-export package is needed.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from bench_core.components.rows import ComponentsReport
from bench_core.results import figures
from bench_core.results.records import RunResult
from bench_core.results.summary import summarize

CHROMIUM = "/usr/bin/chromium"


def figure(kind: str, paths: list[str]):
    data = [json.loads(Path(p).read_text()) for p in paths]
    if kind == "components":
        return figures.components_bars(ComponentsReport.from_dict(data[0]))
    if kind in ("sweep", "sweep_memory"):
        from bench_core.sweep.core.records import SweepResult
        from bench_core.sweep.views import figures as sweep_figures
        result = SweepResult.from_dict(data[0])
        return sweep_figures.sweep_figure(result) if kind == "sweep" else sweep_figures.peak_memory_map(result)
    builder = getattr(figures, kind)
    return builder([summarize(RunResult.from_dict(d)) for d in data])


def main(kind: str, out: str, *paths: str) -> None:
    from playwright.sync_api import sync_playwright
    fig = figure(kind, list(paths))
    fig.update_layout(width=1100)
    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "figure.html"
        fig.write_html(page_path, include_plotlyjs=True, full_html=True)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM)
            page = browser.new_page(viewport={"width": 1140, "height": int(fig.layout.height or 500) + 40})
            page.goto(page_path.as_uri())
            page.wait_for_selector(".main-svg")
            page.locator(".plotly-graph-div").screenshot(path=out)
            browser.close()
    print(f"wrote {out}")


if __name__ == "__main__":
    main(*sys.argv[1:])
