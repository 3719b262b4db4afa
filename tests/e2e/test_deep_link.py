"""A deep link opened first on a fresh server: Streamlit's first run took the pages/ folder for its older multipage
layout and ran /history alone, under a menu of "app" and the files' lowercase names, 736 px wide (a new user's
pass). It now runs through app.py: its menu, its wide layout."""
import pytest

from live_server import wait_idle

pytestmark = pytest.mark.browser


def test_a_deep_link_opened_first_gets_the_apps_menu_and_layout(page, server):
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{server['url']}/history")   # the server's first script run
    wait_idle(page)
    page.get_by_role("heading", name="Run history").wait_for(timeout=60_000)
    nav = [t.strip() for t in page.get_by_test_id("stSidebarNav").inner_text().splitlines() if t.strip()]
    assert nav == ["Benchmark", "Components", "Sweep", "Recommend", "Kernels", "History", "Machines", "Method"]
    width = page.evaluate("() => getComputedStyle(document.querySelector('[data-testid=stMainBlockContainer]'))"
                          ".maxWidth")
    assert width == "none"   # app.py's layout="wide"; the page alone read 736px
    assert page.url.endswith("/history")
