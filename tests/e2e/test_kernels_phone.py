"""The Kernels page's Apex build doctor on a 390 px phone, in a real browser: each check's finding and fix read whole
inside the screen (as a table, the finding was cut and the fix ran off the right edge)."""
import pytest

from live_server import wait_idle

pytestmark = pytest.mark.browser

INSIDE = """el => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.left >= 0 && r.right <= window.innerWidth
        && el.scrollWidth <= el.clientWidth + 1;
}"""


def test_the_apex_doctors_findings_and_fixes_fit_a_phone(page, server):
    page.set_viewport_size({"width": 390, "height": 1200})
    page.goto(f"{server['url']}/kernels")
    wait_idle(page)
    page.get_by_text("Apex build doctor").wait_for(timeout=90_000)   # the probe is back
    assert page.get_by_test_id("stException").count() == 0
    # a CPU torch cannot build Apex: the torch check fails, and says how to fix it
    fix = page.get_by_text("install a CUDA build of torch", exact=False).first
    # the window scrolls down to it, as a thumb does; nothing scrolls sideways (that would hide what is cut)
    fix.evaluate("el => window.scrollTo(0, el.getBoundingClientRect().top + window.scrollY - 300)")
    assert fix.is_visible() and fix.evaluate(INSIDE), fix.bounding_box()
    finding = page.get_by_text("is a CPU build", exact=False).first
    assert finding.is_visible() and finding.evaluate(INSIDE), finding.bounding_box()
    # every word of the fix is drawn inside the screen: no line runs past its right edge
    right = fix.evaluate("""el => {
        const range = document.createRange();
        range.selectNodeContents(el);
        return Math.max(...Array.from(range.getClientRects(), r => r.right));
    }""")
    assert right <= 390, right
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
