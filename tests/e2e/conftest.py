"""A real `streamlit run app.py` on a free port with a temp DB, driven by Debian's Chromium."""
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.conftest import ROOT

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-quic", "--disable-sync", "--disable-dev-shm-usage"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(script: str, port: int, env: dict) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", script, "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true",
                             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1).read() == b"ok":
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"streamlit did not answer on port {port}")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


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
        try:
            page.screenshot(path=os.path.join(out, f"{item.name}.png"), full_page=True)
        except Exception:
            pass
