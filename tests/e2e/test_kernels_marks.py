"""The Kernels page's build doctor in Chromium at 1440 px (issue 42, item 8): each check's mark is a coloured word
(PASS, WARN, FAIL) drawn as text, readable without an emoji font, and a machine with nothing to build Apex for is
never told to build it."""
import re

import pytest

from live_server import wait_idle

pytestmark = pytest.mark.browser

MARK = re.compile(r"^(PASS|WARN|FAIL)\b")
EMOJI = re.compile("[\u2600-\u27bf\U0001f300-\U0001faff]")


def test_doctor_marks_are_coloured_words_and_the_build_advice_agrees_with_itself(page, server):
    page.set_viewport_size({"width": 1440, "height": 1600})
    page.goto(f"{server['url']}/kernels")
    wait_idle(page)
    page.get_by_text("Apex build doctor").wait_for(timeout=90_000)   # the probe is back
    assert page.get_by_test_id("stException").count() == 0
    doctor = page.locator(".st-key-doctor")
    doctor.wait_for()
    checks = doctor.locator("[data-testid='stMarkdownContainer'] p")
    texts = checks.all_inner_texts()
    assert texts and all(MARK.match(t) for t in texts), texts
    assert not [t for t in texts if EMOJI.search(t)], texts
    # each mark is drawn as text, in a colour of its own: PASS green, FAIL red, WARN orange (not the body's)
    body = page.evaluate("getComputedStyle(document.querySelector('[data-testid=stMain]')).color")
    marks = doctor.locator("[data-testid='stMarkdownContainer'] p > span")
    assert marks.count() == len(texts)
    drawn = marks.evaluate_all("""els => els.map(el => {
        const r = el.getBoundingClientRect();
        return {text: el.innerText, color: getComputedStyle(el).color, width: r.width, height: r.height};
    })""")
    for mark in drawn:
        assert MARK.match(mark["text"]) and mark["width"] > 0 and mark["height"] > 0, mark
        assert mark["color"] != body, mark
    colours = {m["text"].split()[0]: m["color"] for m in drawn}
    assert len(set(colours.values())) == len(colours), colours   # one colour a word
    # the tests' CPU torch has nothing to build Apex for: the page says so, and no advice to build follows it
    page_text = page.get_by_test_id("stMain").inner_text()
    assert "nothing to build Apex for here" in page_text
    assert "make apex" not in page_text, [line for line in page_text.splitlines() if "make apex" in line]
