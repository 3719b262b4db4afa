"""History's compare view in Chromium at a desktop's and a phone's width (issue 42, item 6): the two H100 seed runs
shipped as examples, selected together, say in words which stages agree, and the speedup chart's labels, one a
run beside its own bar, never print on top of each other (×1.013 over ×1.012)."""
import os
import time

import pytest
from test_browser import select_rows

from bench_core.results.agreement import compare
from bench_core.results.examples import EXAMPLES, example_run
from bench_core.results.store import Store
from bench_core.results.summary import summarize
from live_server import wait_idle

pytestmark = pytest.mark.browser

SHOTS = os.environ.get("BENCH_SCREENSHOTS")   # a folder: save each width's compare view there (docs/screenshots)


def _overlap(a, b):
    return not (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
                or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"])


def speedup_labels(page):
    """The speedup chart's text labels as drawn: (text, box) of each."""
    return page.evaluate("""() => {
        const title = el => (el.querySelector('.gtitle') || {}).textContent || '';
        const plot = [...document.querySelectorAll('.js-plotly-plot')].find(el => title(el).startsWith('Speedup'));
        if (!plot) return null;
        return [...plot.querySelectorAll('.textpoint text')].filter(t => t.textContent.trim()).map(t => {
            const r = t.getBoundingClientRect();
            return {text: t.textContent, x: r.x, y: r.y, width: r.width, height: r.height};
        });
    }""")


@pytest.mark.parametrize("width", [1440, 390])
def test_two_example_runs_compared_agree_in_words_with_labels_apart(page, server, width):
    store = Store(server["db"])
    runs = [example_run(name) for name in EXAMPLES]
    ids = [store.import_run(run)[0] for run in runs]
    page.set_viewport_size({"width": width, "height": 2400})
    page.goto(server["url"] + "/history")
    wait_idle(page)
    page.get_by_text("Select one or more runs").wait_for()
    select_rows(page, page.get_by_test_id("stDataFrame").first, [0, 1], ids)
    assert page.get_by_test_id("stException").count() == 0

    block = page.locator(".st-key-agreement")
    block.wait_for(timeout=60_000)
    # the sentence the engine writes for the pair, whichever run the table lists first
    expected = compare(*(summarize(r) for r in runs)).sentence
    assert expected in block.inner_text()

    deadline = time.time() + 30
    labels = None
    while time.time() < deadline and not labels:
        labels = speedup_labels(page)
        time.sleep(0.5)
    # a label a ranked stage a run: 7 stages in each of the two runs
    assert labels and len(labels) == 14, labels
    clash = [(a["text"], b["text"]) for i, a in enumerate(labels) for b in labels[i + 1:] if _overlap(a, b)]
    assert not clash, clash
    if SHOTS:   # from the sentence to the speedup chart's foot: what a user compares
        top = block.bounding_box()
        chart = page.locator(".js-plotly-plot").filter(has_text="Speedup").first.bounding_box()
        page.screenshot(path=os.path.join(SHOTS, f"history_compare_{width}.png"), full_page=True,
                        clip={"x": 0, "y": top["y"] - 10, "width": width,
                              "height": chart["y"] + chart["height"] - top["y"] + 20})
