"""The answer at a glance, in a real browser at a desktop's and a phone's width: an H200 seed run from docs/data,
imported into the server's history, opens with its answer card and what each lever adds, a kernel grid whose
headers read, and Bottleneck cells in whole words."""
import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from bench_core.results.answer import answer
from bench_core.results.formats import parse_json
from bench_core.results.store import Store
from bench_core.results.summary import summarize
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
    # the answer card's Apex line, then what each lever adds: a table whose stage keys sit in a fold below it
    card = answer(summarize(parse_json(H200_SEED.read_bytes())[0]))
    assert first_box.locator("p").first.inner_text() == card.lines[0].text
    assert first_box.locator("h4").first.inner_text() == "What each lever adds"
    # st.dataframe draws on a canvas; its accessible grid mirror in the DOM holds the text of the columns in view
    rows = verdict.get_by_test_id("stDataFrame").first
    rows.wait_for()
    # the grid mirror fills after the frame is drawn: wait for its text (a loaded machine), then read it
    for r in card.rows:
        expect(rows).to_contain_text(r.lever, timeout=60_000)
    cells = rows.text_content()
    assert all(r.lever in cells for r in card.rows), (cells, [r.lever for r in card.rows])
    verdict.get_by_text("The two stages of each row").click()
    pairs = [li.inner_text() for li in verdict.locator("ol li").all()]
    assert [p.split(";")[0] for p in pairs] == [r.stages for r in card.rows]
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
    assert not any(_boxes_overlap(b, grid.locator(".gtitle").bounding_box()) for b in boxes)   # nor its title
    assert not any(_boxes_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    assert page.get_by_text("Each column is a key kernel a lever must launch").count() == 1
    if SHOTS:   # the proof grid alone: its upright headers, its legend at the foot
        grid.screenshot(path=os.path.join(SHOTS, f"history_h200_seed_proof_{width}.png"))

    # the key table: Bottleneck cells read whole, nothing cut off at this width
    table = page.get_by_test_id("stTable").first
    heads = [h.inner_text() for h in table.locator("th").all()]
    assert heads[:5] == ["Stage", "Median", "Speedup (95% CI)", "Bottleneck", "Kernel proof"]
    col = heads.index("Bottleneck")
    cells = [row.locator("td").nth(col) for row in table.locator("tbody tr").all()]
    assert [c.inner_text().split(" (")[0] for c in cells] == ["gpu-bound"] * 3 + ["launch-bound"]
    for cell in (*cells, table, *table.locator("table").all()):
        assert cell.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), cell.inner_text()
    # nor does the table overflow the box that would scroll it: its last column (the proof) ends inside it
    inner = table.locator("table").first
    assert inner.evaluate("t => t.getBoundingClientRect().right <= t.parentElement.getBoundingClientRect().right + 1 "
                          "&& t.parentElement.scrollWidth <= t.parentElement.clientWidth + 1")
    assert all(c.bounding_box()["x"] + c.bounding_box()["width"] <= width for c in table.locator("td, th").all())
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


@pytest.mark.parametrize("width", [1440, 390])
def test_charts_keep_labels_whole_and_legends_clear_of_titles(page, server, width):
    """Each chart of the imported H200 run, drawn by the browser: no legend over its title or plot, and every bar's
    text (the busy share, the speedup numbers) inside the chart's own box, so none is cut at its edge."""
    run_id, _ = Store(server["db"]).import_run(parse_json(H200_SEED.read_bytes())[0])
    page.set_viewport_size({"width": width, "height": 1800})
    page.goto(f"{server['url']}/history?run={run_id}")
    wait_idle(page)
    page.locator(f".st-key-verdict_{run_id}").wait_for(timeout=60_000)
    page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
    titles = set()
    for plot in page.locator(".js-plotly-plot").all():
        plot.scroll_into_view_if_needed()
        title = plot.locator(".gtitle")
        title.wait_for(timeout=20_000)   # a chart is drawn once it scrolls into view
        titles.add(title.text_content().split("  ")[0][:20])
        box = plot.locator(".main-svg").first.bounding_box()
        title_box, area = title.bounding_box(), plot.locator(".nsewdrag").first.bounding_box()
        for legend in plot.locator(".legend").all():
            assert not _boxes_overlap(legend.bounding_box(), title_box), title.text_content()
            assert not _boxes_overlap(legend.bounding_box(), area), title.text_content()
        assert title_box["y"] + title_box["height"] <= area["y"] + 1, title.text_content()
        for text in plot.locator(".bartext, .textpoint text").all():
            b = text.bounding_box()
            if b and b["width"]:
                assert box["x"] - 1 <= b["x"] and b["x"] + b["width"] <= box["x"] + box["width"] + 1, \
                    (title.text_content(), text.text_content())
    assert any(t.startswith("Kernel share") for t in titles) and any(t.startswith("Speedup") for t in titles), titles
    busy = page.locator(".js-plotly-plot").filter(has_text="Kernel share of the step")
    assert sorted(t.text_content() for t in busy.locator(".legendtext").all()) == ["gpu-bound", "launch-bound"]
    assert all(t.text_content().endswith("%") for t in busy.locator(".bartext").all())
