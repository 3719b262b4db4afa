"""Fixtures: a real `streamlit run app.py` on a free port with a temp DB, driven by Debian's Chromium."""
import contextlib
import os

import pytest

from live_server import CHROMIUM, CHROMIUM_ARGS, ROOT, free_port, start_server, stop_server


@pytest.fixture(scope="session")
def browser_type_launch_args():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (make browser installs Debian's)")
    return {"executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture
def server(tmp_path):
    port = free_port()
    env = {**os.environ, "BENCH_DB": str(tmp_path / "runs.sqlite3")}
    env.pop("BENCH_OPERATOR_TOKEN", None)
    proc = start_server("app.py", port, env)
    yield {"url": f"http://127.0.0.1:{port}", "db": env["BENCH_DB"], "proc": proc}
    stop_server(proc)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Save a screenshot of the page when a browser test fails."""
    outcome = yield
    report = outcome.get_result()
    page = item.funcargs.get("page") if hasattr(item, "funcargs") else None
    if report.when == "call" and report.failed and page is not None:
        out = os.path.join(ROOT, "test-results")
        os.makedirs(out, exist_ok=True)
        with contextlib.suppress(Exception):  # best effort: never mask the test's own failure
            page.screenshot(path=os.path.join(out, f"{item.name}.png"), full_page=True)
