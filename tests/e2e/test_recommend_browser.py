"""The Recommend page in a real browser: a real tiny recommendation on CPU asked for at 1440 px, its answer shown;
the same answer read at 390 px (a phone), where nothing runs off the screen sideways and the candidates are a list,
not a wide table."""
import pytest

from bench_core.recommend.history import RecommendationStore
from live_server import wait_idle

pytestmark = pytest.mark.browser

FIELDS = {"Timed iterations": "6", "Budget for measuring (e.g. 10m, 90s)": "15s",
          "Training run's tokens (for what it saves)": "1000000",
          "Levers to leave out, comma separated (e.g. compile)": "compile,fp16,adam-loop,bf16"}


def _no_sideways_overflow(page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    for block in page.locator("[class*='st-key-rec_answer'] :is(p, li, pre)").all():
        box = block.bounding_box()
        if box:   # shown: inside the screen
            assert box["x"] >= 0 and box["x"] + box["width"] <= 391, (block.inner_text()[:80], box)


@pytest.mark.slow
def test_a_real_recommendation_reads_at_1440_and_on_a_phone(page, server):
    page.set_viewport_size({"width": 1440, "height": 2400})
    page.goto(server["url"] + "/recommend")
    wait_idle(page)
    for label, value in FIELDS.items():
        field = page.get_by_role("textbox", name=label)
        field.fill(value)
        field.press("Tab")
    wait_idle(page)
    page.get_by_role("button", name="Find what to switch on").click()
    # the search runs in the server's worker processes: a loaded 2-core machine may take minutes
    page.get_by_text("The answer", exact=True).wait_for(timeout=300_000)
    wait_idle(page, timeout=120_000)
    [row] = RecommendationStore(server["db"]).list_recommendations()
    assert page.get_by_text("Switch on", exact=False).first.is_visible() or \
        page.get_by_text("Either", exact=False).first.is_visible()
    assert page.get_by_text(row["recommended"]).first.is_visible()
    wide = page.locator("[class*='st-key-rec_candidates_wide'] [data-testid='stDataFrame']")
    assert wide.is_visible()
    page.set_viewport_size({"width": 390, "height": 2400})
    page.get_by_text("The answer", exact=True).wait_for()
    assert not wide.is_visible()   # the wide table gives way to the list on a phone
    phone = page.locator("[class*='st-key-rec_candidates_phone'] li")
    assert phone.count() >= 1 and phone.first.is_visible()
    _no_sideways_overflow(page)


def test_an_opened_recommendation_reads_on_a_phone(page, server, tmp_path):
    """History's "answer" link: the recommendation opens on a phone with the form folded away above it."""
    from pathlib import Path

    from bench_core.recommend.answer import Recommendation
    fixture = Path(__file__).resolve().parents[1] / "data" / "recommendation_tiny_cpu.json"
    rid, _ = RecommendationStore(server["db"]).import_json(fixture.read_bytes())
    rec = Recommendation.from_json(fixture.read_text())
    page.set_viewport_size({"width": 390, "height": 3000})
    page.goto(f"{server['url']}/recommend?recommendation={rid}")
    wait_idle(page)
    page.get_by_text("The answer", exact=True).wait_for(timeout=60_000)
    assert rec.recommended is not None and page.get_by_text(rec.recommended.stage).first.is_visible()
    _no_sideways_overflow(page)
