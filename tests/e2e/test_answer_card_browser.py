"""Issue 42's "done when", in Chromium at a desktop's and a phone's width: the two H100 seed runs shipped as examples,
opened from History's "Open an example GPU run", each show the answer card's Apex line in the first screen (no
scrolling), and both read the same word."""
import os
import re

import pytest

from bench_core.results.answer import Worth
from bench_core.results.examples import EXAMPLES, example_run
from live_server import wait_idle

pytestmark = pytest.mark.browser

SHOTS = os.environ.get("BENCH_SCREENSHOTS")   # a folder: save each width's first screen there (docs/screenshots)
SCREENS = {1440: 900, 390: 844}               # a laptop's and a phone's first screen


def _apex_line(page, run_id):
    card = page.locator(f".st-key-answer_verdict_{run_id}")
    card.wait_for(timeout=90_000)
    return card.locator("p").filter(has_text=re.compile(r"^Apex: ")).first


@pytest.mark.parametrize("width", [1440, 390])
def test_both_example_runs_show_the_apex_answer_first_with_one_word(page, server, width):
    height = SCREENS[width]
    page.set_viewport_size({"width": width, "height": height})
    words = {}
    for name, example in EXAMPLES.items():
        page.goto(f"{server['url']}/history")
        wait_idle(page)
        page.get_by_role("button", name=f"Open an example GPU run: {example.title}").click()
        run_id = example_run(name).run_id
        page.wait_for_url(re.compile(rf"run={run_id}"), timeout=90_000)
        # the run's own page as a link opens it: its first screen, unscrolled
        page.goto(f"{server['url']}/history?run={run_id}")
        wait_idle(page)
        line = _apex_line(page, run_id)
        line.wait_for(timeout=60_000)
        assert page.evaluate("window.scrollY") == 0
        box = line.bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] <= height, (name, box)
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, (name, box)
        text = line.inner_text()
        words[name] = re.match(r"Apex: (.+?) here — ", text).group(1)
        assert page.get_by_test_id("stException").count() == 0
        if SHOTS and name == "h100-seed-A":
            page.screenshot(path=os.path.join(SHOTS, f"answer_card_{width}.png"))
    assert set(words.values()) == {str(Worth.NOT_WORTH_IT)}, words
