"""The HTML report (`run --html`, and the pages' Download HTML report) on a 390 px phone, drawn by Chromium: its
key table fits the screen, and each cell breaks only between words or after a stage's '+', never inside a number,
a word or a header."""
from pathlib import Path

import pytest

from bench_core.results.formats import parse_json
from bench_core.results.report import render_html
from live_server import ROOT

pytestmark = pytest.mark.browser

H200_SEED = Path(ROOT) / "docs/data/h200_2026-12-03_call15_seed_gpt2-small_agree_1.json"

# a line may end after white space, a stage's '+', a hyphen or the interval's dash; anything else split a word
BREAKS_INSIDE_WORDS = """table => {
    const bad = [];
    const walker = document.createTreeWalker(table, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const text = node.textContent;
        let top = null;
        for (let i = 0; i < text.length; i++) {
            const range = document.createRange();
            range.setStart(node, i);
            range.setEnd(node, i + 1);
            const rect = range.getClientRects()[0];
            if (!rect || !rect.width) continue;
            if (top !== null && rect.top > top + 2 && !/[\\s+\\-–\\u200b]/.test(text[i - 1]))
                bad.push(text.slice(0, i) + '|' + text.slice(i));
            top = rect.top;
        }
    }
    return bad;
}"""


@pytest.mark.parametrize("width", [390, 1440])
def test_the_reports_key_table_fits_and_breaks_only_between_words(page, tmp_path, width):
    report = tmp_path / "report.html"
    report.write_text(render_html(parse_json(H200_SEED.read_bytes())[0]), encoding="utf-8")
    page.set_viewport_size({"width": width, "height": 1200})
    page.goto(report.as_uri())
    table = page.locator("table:not(.contrib)").first   # the stages table, under the answer card's
    heads = [h.inner_text() for h in table.locator("th").all()]
    assert heads == ["Stage", "Median", "Speedup (95% CI)", "Bottleneck", "Kernel proof"]
    assert table.evaluate(BREAKS_INSIDE_WORDS) == []
    # nothing of it is scrolled out of sight, and the page itself does not scroll sideways
    assert table.evaluate("t => t.parentElement.scrollWidth <= t.parentElement.clientWidth + 1")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
