"""End to end: a person starts a tiny CPU sweep on the Sweep page of a real server and, without reloading, sees
it run and then its result, opened in the picker, with the form free again."""
import time

import pytest

from live_server import wait_idle

pytestmark = pytest.mark.browser


def test_a_sweep_started_on_the_page_shows_its_result_when_it_ends(page, server):
    page.set_viewport_size({"width": 1400, "height": 2400})
    page.goto(server["url"] + "/sweep")
    wait_idle(page)
    page.get_by_text("two stage keys").click()   # adam against adam-fused in FP32: both run on a CPU
    wait_idle(page)
    page.get_by_text("B adam-fused+layernorm+fp32 against A adam+layernorm+fp32.").wait_for()
    page.get_by_role("button", name="Start the sweep").click()
    page.get_by_role("button", name="Cancel (keeps the points that finished)").wait_for(timeout=60_000)
    started = time.monotonic()
    wait_idle(page)
    # while it runs the form's Start is off (it stayed on: only the live part redrew, and a click said "a sweep is
    # running"); the sweep takes about 15 s here, so this is read well before its end
    assert page.get_by_role("button", name="Start the sweep").is_disabled()
    # only the live part redraws while it runs; at its end the whole page does, opened on the sweep
    page.get_by_text("The sweep ended (done); its result is below.").wait_for(timeout=300_000)
    wait_idle(page)
    assert page.get_by_test_id("stException").count() == 0
    boxes = [b.inner_html() for b in page.get_by_test_id("stSelectbox").all()]
    picked = [b for b in boxes if "Sweep</" in b]
    assert len(picked) == 1 and "done · width 64–128" in picked[0], [b[-1500:] for b in boxes]
    # the result's parts are drawn in turn after the sentence: on a loaded machine the report's button comes later
    page.get_by_role("button", name="Download HTML report").wait_for(timeout=60_000)
    assert page.get_by_role("button", name="Download HTML report").count() == 1
    assert page.get_by_role("button", name="Start the sweep").is_enabled()
    assert page.get_by_role("button", name="Cancel (keeps the points that finished)").count() == 0
    print(f"the sweep ran {time.monotonic() - started:.0f} s")
    # a second one, cancelled at once: it ends as cancelled, what finished kept, the form free again
    page.get_by_role("button", name="Start the sweep").click()
    page.get_by_role("button", name="Cancel (keeps the points that finished)").click(timeout=60_000)
    page.get_by_text("The sweep ended (cancelled); its result is below. The points that finished are kept.") \
        .wait_for(timeout=300_000)
    wait_idle(page)
    assert page.get_by_role("button", name="Start the sweep").is_enabled()
