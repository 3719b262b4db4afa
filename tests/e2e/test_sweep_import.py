"""End to end: a person brings an H200 sweep's JSON to the Sweep page of a real server and sees its map."""
import json
from pathlib import Path

import pytest

from live_server import ROOT, wait_idle

pytestmark = pytest.mark.browser

H200_SWEEP = Path(ROOT) / "docs" / "data" / "h200_2026-12-04_call29_sweep_apex_gpt_1.json"


def test_a_sweep_json_imported_on_the_sweep_page_opens_its_map(page, server, tmp_path):
    sweep_id = json.loads(H200_SWEEP.read_text())["sweep_id"]
    page.set_viewport_size({"width": 1400, "height": 2400})
    page.goto(server["url"] + "/sweep")
    wait_idle(page)
    page.get_by_text("Import a sweep (its JSON").click()
    page.locator("input[type=file]").set_input_files(str(H200_SWEEP))
    wait_idle(page)
    page.get_by_role("button", name="Import the sweep").click()
    wait_idle(page)
    page.get_by_text(f"Imported sweep {sweep_id}.").wait_for(timeout=30_000)
    assert page.get_by_test_id("stException").count() == 0
    # the picker opens on the imported sweep: its crossovers, and its heatmap with its points' sources marked
    page.get_by_text("at width=768: ×1.011 (1.004–1.017) at best").wait_for(timeout=30_000)
    page.locator(".js-plotly-plot").first.wait_for(timeout=30_000)
    legend = page.locator(".js-plotly-plot .legend").first.text_content() or ""
    assert "measured end to end" in legend and "predicted from kernels" in legend, legend
    # the points table shows all 12 points without scrolling inside itself: Streamlit's rows are 35 px, and its
    # default height (10 rows) hid two of them
    points = len(json.loads(H200_SWEEP.read_text())["points"])
    table = page.get_by_test_id("stDataFrame").first.bounding_box()
    assert table is not None and table["height"] >= (points + 1) * 35, table
    # the HTML report is made on the click (it embeds its figures); what comes down is the whole report
    with page.expect_download() as download:
        page.get_by_role("button", name="Download HTML report").first.click()
    report = Path(download.value.path()).read_text()
    assert download.value.suggested_filename == f"sweep_{sweep_id}.html"
    assert "fig-sweep" in report and "at width=768: ×1.011 (1.004–1.017) at best" in report
    # on a phone the report is no wider than the screen: its title breaks after a "+" (it ran 431 px wide)
    page.set_viewport_size({"width": 390, "height": 844})
    saved = tmp_path / "report.html"   # the download itself has no extension: a browser shows it as text
    saved.write_text(report)
    page.goto(saved.as_uri())
    page.locator("h1").wait_for()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
