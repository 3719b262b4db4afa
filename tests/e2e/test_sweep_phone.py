"""End to end, from a new user's pass over the Sweep page: Enter in a form field starts nothing (it started a sweep
that measured every point end to end), two sweeps set side by side both read on a phone (the second was off its
screen), and a heatmap's axis titles clear their tick labels."""
import time
from pathlib import Path

import pytest

from bench_core.sweep.core.history import SweepStore
from bench_core.sweep.core.records import from_json
from live_server import ROOT, wait_idle

pytestmark = pytest.mark.browser

DATA = Path(ROOT) / "docs" / "data"
APEX_MAPS = ("h200_2026-12-05_call32_sweep_apex_gpt_1.json", "h200_2026-12-05_call33_sweep_apex_gpt_2.json")


def _import(db: str, *names: str) -> list[str]:
    store = SweepStore(db)
    return [store.import_sweep(from_json((DATA / name).read_bytes()))[0] for name in names]


def _overlap(a: dict, b: dict) -> bool:
    return not (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
                or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"])


def test_enter_in_a_form_field_starts_no_sweep(page, server):
    page.set_viewport_size({"width": 1400, "height": 2400})
    page.goto(server["url"] + "/sweep")
    wait_idle(page)
    for label in ("Values (list, or START:STOP:xFACTOR)", "Budget (e.g. 10m; empty: every point measured)"):
        field = page.get_by_label(label)
        field.fill("64,128" if label.startswith("Values") else "")
        field.press("Enter")
        time.sleep(1.5)   # a submit reruns the script: give it the time to start before waiting for it
        wait_idle(page)
    assert page.get_by_test_id("stException").count() == 0
    assert page.get_by_role("button", name="Cancel (keeps the points that finished)").count() == 0
    assert SweepStore(server["db"]).list_sweeps() == []
    assert page.get_by_text("Press Enter to submit form").count() == 0   # Streamlit's hint under a form's field


def test_two_sweeps_side_by_side_both_read_on_a_phone(page, server):
    first, second = _import(server["db"], *APEX_MAPS)
    page.set_viewport_size({"width": 390, "height": 6000})   # tall: the whole comparison in view at once
    page.goto(f"{server['url']}/sweep?sweep={second}")
    wait_idle(page)
    page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
    page.get_by_test_id("stMultiSelect").locator("input").click()
    page.get_by_role("option").first.click()
    page.keyboard.press("Escape")
    wait_idle(page)
    heading = page.get_by_text("Each point's speedup of B over A")
    heading.wait_for(timeout=30_000)
    top = heading.bounding_box()["y"]
    # (the wide points table is hidden on a phone: no box)
    tables = [t for t in page.get_by_test_id("stDataFrame").all() if (b := t.bounding_box()) and b["y"] > top]
    assert tables
    # no table below hides a column sideways: the second sweep's column ran off a 390 px screen
    for table in tables:
        box = table.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390, box
        scroller = table.locator(".dvn-scroller").first
        wide, shown = scroller.evaluate("e => [e.scrollWidth, e.clientWidth]")
        assert wide <= shown + 1, (wide, shown)
    # each sweep named over its own figures, on the screen
    for name in (f"({first[:6]})", f"({second[:6]})"):
        named = [b for el in page.get_by_text(name).all() if (b := el.bounding_box()) and b["y"] > top]
        assert named and all(0 <= b["x"] and b["x"] + b["width"] <= 390 for b in named), name


@pytest.mark.parametrize("width", [390, 1440])
def test_a_heatmap_s_axis_titles_clear_their_tick_labels(page, server, width):
    [sweep] = _import(server["db"], APEX_MAPS[0])
    page.set_viewport_size({"width": width, "height": 4000})
    page.goto(f"{server['url']}/sweep?sweep={sweep}")
    wait_idle(page)
    page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
    plots = page.locator(".js-plotly-plot").all()
    assert len(plots) == 2   # the speedup map and the peak-memory map
    for plot in plots:
        [x_title] = [a for a in plot.locator(".annotation").all() if a.text_content() == "batch_size"]
        title = x_title.bounding_box()
        ticks = [t.bounding_box() for t in plot.locator(".xtick text").all()]
        assert ticks and not any(_overlap(title, t) for t in ticks), (title, ticks)
        assert title["y"] >= max(t["y"] + t["height"] for t in ticks), "the x title is under its tick labels"
        legend = plot.locator(".legend").bounding_box()
        assert not _overlap(title, legend), (title, legend)
        y_title = plot.locator(".ytitle").bounding_box()
        assert not any(_overlap(y_title, t.bounding_box()) for t in plot.locator(".ytick text").all())


PHONE_WIDE = """e => {
    const grid = e.querySelector('canvas table[role=grid]');
    const s = e.querySelector('.dvn-scroller');
    return {headers: Array.from(grid.querySelectorAll('th'), th => th.textContent),
            columns: Number(grid.getAttribute('aria-colcount')), wide: s.scrollWidth, shown: s.clientWidth};
}"""


def _shown_table(page):
    """The one points table the page shows at this width, once its grid is drawn."""
    page.locator("[data-testid=stDataFrame]:visible").first.wait_for(timeout=30_000)
    [table] = [t for t in page.get_by_test_id("stDataFrame").all() if t.is_visible()]
    table.locator("canvas table[role=grid] th").first.wait_for(state="attached", timeout=30_000)
    return table


def test_one_sweep_s_points_table_shows_its_answer_whole_on_a_phone(page, server):
    """A two-axis map's points table scrolled sideways at 390 px, its source and bound columns off the screen: on a
    phone the table holds the axes, the speedup ("≈" before a predicted one) and its bound, and nothing scrolls
    sideways (the wide table, every column, stays on a wider screen)."""
    [sweep] = _import(server["db"], APEX_MAPS[0])
    page.set_viewport_size({"width": 390, "height": 4000})
    page.goto(f"{server['url']}/sweep?sweep={sweep}")
    wait_idle(page)
    page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
    table = _shown_table(page)
    box = table.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    grid = table.evaluate(PHONE_WIDE)
    assert grid["wide"] <= grid["shown"] + 1, grid
    assert grid["headers"] == ["batch_size", "width", "B over A", "bound"], grid
    assert grid["columns"] == len(grid["headers"]), grid   # every column drawn: none waits off the screen
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    page.set_viewport_size({"width": 1440, "height": 4000})   # a desktop: the table with every figure
    table = _shown_table(page)
    assert table.evaluate(PHONE_WIDE)["columns"] > 10
