"""The answer at a glance, in a real browser at a desktop's and a phone's width: an H200 seed run from docs/data,
imported into the server's history, opens with what each lever adds, a kernel grid whose headers read, and
Bottleneck cells in whole words."""
import os
from pathlib import Path

import pytest

from bench_core.results.formats import parse_json
from bench_core.results.store import Store
from live_server import ROOT, wait_idle

pytestmark = pytest.mark.browser

H200_SEED = Path(ROOT) / "docs/data/h200_2026-12-03_call3_seed_gpt2-medium_run1.json"
SHOTS = os.environ.get("BENCH_SCREENSHOTS")   # a folder: save each width's page there (docs/screenshots)


def _boxes_overlap(a, b):
    return not (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
                or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"])


@pytest.mark.parametrize("width", [1440, 390])
def test_an_imported_h200_seed_run_opens_with_what_each_lever_adds(page, server, width):
    run_id, _ = Store(server["db"]).import_run(parse_json(H200_SEED.read_bytes())[0])
    page.set_viewport_size({"width": width, "height": 1800})
    page.goto(f"{server['url']}/history?run={run_id}")
    wait_idle(page)
    verdict = page.locator(f".st-key-verdict_{run_id}")
    verdict.wait_for(timeout=60_000)
    assert page.get_by_test_id("stException").count() == 0

    # the first block of the run's page: its verdict, above its table and every chart
    main = page.get_by_test_id("stMain")
    first_box = main.locator(".stVerticalBlock.st-key-verdict_" + run_id).first
    assert first_box.locator("h4").first.inner_text() == "What each lever adds"
    lines = [li.inner_text() for li in verdict.locator("li").all()]
    assert lines[0].startswith("Apex FusedAdam in FP32 against Adam (this run has no Adam fused twin): ×1.01")
    assert lines[1].startswith("Apex FusedLayerNorm in FP32 against its native twin LayerNorm: no measurable effect")
    assert lines[2].startswith("BF16 against FP32: ×6.26") and "depends on the host CPU" in lines[2]
    top = verdict.bounding_box()["y"]
    assert all(top < el.bounding_box()["y"] for el in
               (page.get_by_test_id("stTable").first, *page.locator(".js-plotly-plot").all()[:3]))

    if SHOTS:   # the page as it opens: verdict, key table
        page.screenshot(path=os.path.join(SHOTS, f"history_h200_seed_{width}.png"))

    # the kernel grid's column headers are visible text, clear of its legend and of each other
    grid = page.locator(".js-plotly-plot").filter(has_text="Kernel proof")
    grid.scroll_into_view_if_needed()
    headers = grid.locator(".xtick text").all()
    assert headers and all((h.text_content() or "").strip() for h in headers)
    legend = grid.locator(".legend").bounding_box()
    boxes = [h.bounding_box() for h in headers]
    assert not any(_boxes_overlap(b, legend) for b in boxes)
    assert not any(_boxes_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    assert page.get_by_text("Each column is a key kernel a lever must launch").count() == 1

    # the key table: Bottleneck cells read whole, nothing cut off at this width
    table = page.get_by_test_id("stTable").first
    heads = [h.inner_text() for h in table.locator("th").all()]
    assert heads[:5] == ["Stage", "Median", "Speedup (95% CI)", "Bottleneck", "Kernel proof"]
    col = heads.index("Bottleneck")
    cells = [row.locator("td").nth(col) for row in table.locator("tbody tr").all()]
    assert [c.inner_text().split(" (")[0] for c in cells] == ["gpu-bound"] * 3 + ["launch-bound"]
    for cell in (*cells, table, *table.locator("table").all()):
        assert cell.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), cell.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
